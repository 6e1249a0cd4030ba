{{description}}

from .{{module}} import load_environment

__all__ = ["load_environment"]
