"""Multiple-choice reward that reads the letter from the last line.

Models write the choice as "a", "(A)", "A)", "Answer: A" or "**A**", so the
last line is upper-cased and the first standalone choice letter on it is taken.
"""

import re


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"].strip()
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return 0.0
    match = re.search(r"\b([ABCD])\b", lines[-1].upper())
    return 1.0 if match and match.group(1) == answer.upper() else 0.0
