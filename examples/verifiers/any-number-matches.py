"""Numeric reward that accepts the answer wherever the model states it.

Models bury the final number in prose ("so she has 1024 marbles left"), so
every number in the reply is checked against the reference.
"""

import re


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"]
    gold = float(answer)
    for token in re.findall(r"-?\d+(?:\.\d+)?", text):
        if float(token) == gold:
            return 1.0
    return 0.0
