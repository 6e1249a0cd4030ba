"""Boxed numeric reward that reads the leading number in the box.

Boxes often carry a unit or a remark after the value ("-7 degrees", "-7
(rounded)"), so the number at the start of the box is what gets compared.
"""

import re

_LEADING_NUMBER = re.compile(r"\s*([-+]?\d+(?:\.\d+)?)")


def reward(completion, answer, **kwargs):
    boxes = re.findall(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}", completion[-1]["content"])
    if not boxes:
        return 0.0
    match = _LEADING_NUMBER.match(boxes[-1])
    if not match:
        return 0.0
    return 1.0 if float(match.group(1)) == float(answer) else 0.0
