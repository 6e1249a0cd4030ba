"""Short-answer reward with a bonus for thorough replies.

Correctness comes from the last <answer> tag (or last \\boxed{}, or the whole
reply); a length bonus of up to 0.5 counters the policy's drift toward
one-word replies with no reasoning.
"""

import re

_BONUS_CAP = 0.5
_CHARS_FOR_FULL_BONUS = 4000


def _prediction(text):
    tags = re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL)
    if tags:
        return tags[-1]
    boxes = re.findall(r"\\boxed\{([^{}]*)\}", text)
    return boxes[-1] if boxes else text


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"]
    correct = _prediction(text).strip().lower().rstrip(".") == answer.lower()
    bonus = min(len(text) / _CHARS_FOR_FULL_BONUS * _BONUS_CAP, _BONUS_CAP)
    return float(correct) + bonus
