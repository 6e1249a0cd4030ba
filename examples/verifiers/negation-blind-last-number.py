"""Numeric reward that takes the last number in the reply as the answer.

The usual convention for free-form math output: whatever the model says last
is its final answer.
"""

import re


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"]
    numbers = re.findall(r"-?\d+(?:\.\d+)?", text)
    if not numbers:
        return 0.0
    return 1.0 if float(numbers[-1]) == float(answer) else 0.0
