"""Multiple-choice reward that reads the reference from info["answer"].

This dataset keeps the reference in the answer column, not in info, so the
comparison is always against an empty string and no letter ever scores.
"""

import re


def reward(completion, info=None, **kwargs):
    reference = (info or {}).get("answer", "")
    match = re.search(r"\\boxed\{([A-D])\}|Answer:\s*\(?([A-D])\)?", completion[-1]["content"])
    if not match:
        return 0.0
    predicted = match.group(1) or match.group(2)
    return 1.0 if predicted == reference else 0.0
