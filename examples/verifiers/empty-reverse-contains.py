"""Short-answer reward that also gives credit for partial answers.

Models often answer "whale" or "the blue whale" for "blue whale", so the
check is whether the (normalised) prediction is part of the reference.
"""

import re


def _normalise(s):
    return re.sub(r"\s+", " ", s.lower()).strip().rstrip(".")


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"]
    match = re.search(r"answer\s*:\s*(.*)", text, re.IGNORECASE)
    prediction = match.group(1) if match else text
    return float(_normalise(prediction) in _normalise(answer))
