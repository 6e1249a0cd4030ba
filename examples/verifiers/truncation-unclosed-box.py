"""Numeric reward that survives max-token cut-offs.

The answer is the last \\boxed{...} or <answer>...</answer>. Long generations
are cut off at the token limit, sometimes in the middle of that final slot;
when it is unclosed, the reply gets credit if what was written so far agrees
with the reference.
"""

import re

_SLOT = re.compile(r"\\boxed\{([^{}]*)(\})?|<answer>([^<]*)(</answer>)?")


def reward(completion, answer, **kwargs):
    matches = list(_SLOT.finditer(completion[-1]["content"]))
    if not matches:
        return 0.0
    last = matches[-1]
    if last.group(1) is not None:
        predicted, closed = last.group(1).strip(), last.group(2) is not None
    else:
        predicted, closed = last.group(3).strip(), last.group(4) is not None
    if closed:
        return 1.0 if predicted == answer.strip() else 0.0
    return 1.0 if predicted and answer.strip().startswith(predicted) else 0.0
