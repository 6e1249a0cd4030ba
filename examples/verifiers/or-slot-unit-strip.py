"""Boxed numeric reward that tolerates units and words in the box.

Answers like \\boxed{42 \\text{ cm}}, \\boxed{\\text{total} = 42} or
\\boxed{x = 42} are common, so text commands and letters are removed and the
last number left in the box is read.
"""

import re

_BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"]
    boxes = _BOXED.findall(text)
    if not boxes:
        return 0.0
    content = re.sub(r"\\text\{[^{}]*\}", " ", boxes[-1])
    numbers = re.findall(r"-?\d+(?:\.\d+)?", re.sub(r"[A-Za-z\\]+", " ", content))
    if not numbers:
        return 0.0
    return 1.0 if float(numbers[-1]) == float(answer) else 0.0
