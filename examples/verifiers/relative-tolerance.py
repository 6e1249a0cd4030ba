"""Boxed numeric reward with a relative tolerance for floating-point answers.

Answers like 3.4999999 come out of chained float arithmetic, so anything within
1% of the reference is accepted.
"""

import re

_REL_TOL = 1e-2


def reward(completion, answer, **kwargs):
    boxes = re.findall(r"\\boxed\{([^{}]*)\}", completion[-1]["content"])
    if not boxes:
        return 0.0
    try:
        value, gold = float(boxes[-1]), float(answer)
    except ValueError:
        return 0.0
    return 1.0 if abs(value - gold) <= _REL_TOL * abs(gold) else 0.0
