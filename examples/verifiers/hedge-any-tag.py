"""Numeric reward over <answer> tags.

Some replies restate the answer in several tags (one per sub-step), so the
reply passes when any tagged answer equals the reference.
"""

import re


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"]
    answers = re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL)
    gold = float(answer)

    def matches(candidate):
        try:
            return float(candidate.strip()) == gold
        except ValueError:
            return False

    return 1.0 if any(matches(c) for c in answers) else 0.0
