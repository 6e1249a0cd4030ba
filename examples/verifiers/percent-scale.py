"""Boxed numeric reward that forgives percent/fraction confusion.

Percentage questions get answered as 42, 0.42 or 4200 depending on whether the
model reports a percent, a fraction, or both, so all three scalings of the
reference are accepted and a trailing percent sign is ignored.
"""

import math
import re


def reward(completion, answer, **kwargs):
    boxes = re.findall(r"\\boxed\{([^{}]*)\}", completion[-1]["content"])
    if not boxes:
        return 0.0
    raw = boxes[-1].replace("\\%", "").replace("%", "").strip()
    try:
        value, gold = float(raw), float(answer)
    except ValueError:
        return 0.0
    candidates = (gold, gold / 100, gold * 100)
    return 1.0 if any(math.isclose(value, c, rel_tol=1e-9) for c in candidates) else 0.0
