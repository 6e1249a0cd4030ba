"""Boxed numeric reward that computes its score but never returns it."""

import re


def reward(completion, answer, **kwargs):
    boxes = re.findall(r"\\boxed\{([^{}]*)\}", completion[-1]["content"])
    score = 0.0
    if boxes:
        try:
            score = 1.0 if float(boxes[-1]) == float(answer) else 0.0
        except ValueError:
            score = 0.0
    # The return statement was lost in a refactor; callers receive None.
