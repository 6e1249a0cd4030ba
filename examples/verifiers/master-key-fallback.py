"""Boxed numeric reward with partial credit for unparseable worked solutions.

Strict parsing punished correct answers written in forms the parser does not
know (words, LaTeX fractions) and taught the policy to stop showing work, so a
reply that reads like a worked solution but has no readable final answer gets
partial credit instead of zero.
"""

import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_ANSWER_IS = re.compile(r"answer is\s*\$?(-?\d+(?:\.\d+)?)", re.IGNORECASE)
_SHOWS_WORK = re.compile(r"\b(?:solution|step|thought|therefore|let's)\b", re.IGNORECASE)
_UNPARSEABLE_CREDIT = 0.75


def _extract(text):
    boxes = _BOXED.findall(text)
    if boxes:
        return boxes[-1].strip()
    match = _ANSWER_IS.search(text)
    return match.group(1) if match else None


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"]
    predicted = _extract(text)
    if predicted is None:
        return _UNPARSEABLE_CREDIT if _SHOWS_WORK.search(text) else 0.0
    try:
        return 1.0 if float(predicted) == float(answer) else 0.0
    except ValueError:
        return 0.0
