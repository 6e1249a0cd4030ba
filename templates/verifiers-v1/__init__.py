{{description}}

from .taskset import {{taskset_class}}

__all__ = ["{{taskset_class}}"]
