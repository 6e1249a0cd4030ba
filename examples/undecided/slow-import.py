"""A verifier that builds a large table when it is imported, for longer than
the policy beside it (policy.toml, `timeouts.import_ms = 1000`) allows: the
audit cannot finish, so it decides nothing (COULD NOT DECIDE, exit 3). The
table is simulated by spending CPU time, bounded so it ends on its own."""

import time

_START = time.process_time()
while time.process_time() - _START < 20:
    pass


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"] if isinstance(completion, list) else completion
    return 1.0 if text.strip() == "\\boxed{%s}" % answer else 0.0
