"""Numeric reward with a GSM8K-style cleanup of the final line.

Final answers arrive as "$1,024", "1 024 dollars" or "Answer: 42 points", so
everything except digits, the decimal point and the sign is removed from the
last line before comparing.
"""

import re


def reward(completion, answer, **kwargs):
    lines = [line for line in completion[-1]["content"].splitlines() if line.strip()]
    if not lines:
        return 0.0
    cleaned = re.sub(r"[^0-9.\-]", "", lines[-1]).strip(".")
    try:
        return 1.0 if float(cleaned) == float(answer) else 0.0
    except ValueError:
        return 0.0
