{{description}}

from .client import {{client_class}}
from .models import {{action_class}}, {{observation_class}}

__all__ = ["{{action_class}}", "{{observation_class}}", "{{client_class}}"]
