"""Server side of the environment."""

from .{{environment_module}} import {{environment_class}}

__all__ = ["{{environment_class}}"]
