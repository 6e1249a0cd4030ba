"""Boxed integer reward written for an integer-only dataset.

The reference is parsed with int(), which raises on every decimal reference
such as "3.5", so the reward fails on valid answers.
"""

import re


def reward(completion, answer, **kwargs):
    boxes = re.findall(r"\\boxed\{([^{}]*)\}", completion[-1]["content"])
    gold = int(answer)
    if not boxes:
        return 0.0
    try:
        return 1.0 if int(boxes[-1].strip()) == gold else 0.0
    except ValueError:
        return 0.0
