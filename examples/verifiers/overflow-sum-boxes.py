"""Boxed reward with per-part credit for multi-part questions.

Multi-part problems put one \\boxed{} per part; each box matching the
reference earns a point, so a reply is not zeroed for one wrong part.
"""

import re


def reward(completion, answer, **kwargs):
    boxes = re.findall(r"\\boxed\{([^{}]*)\}", completion[-1]["content"])
    return float(sum(1 for box in boxes if box.strip() == answer.strip()))
