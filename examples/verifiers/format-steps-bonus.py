"""Boxed numeric reward with a bonus for step-by-step reasoning.

Half the reward is correctness of the last \\boxed{} answer; the other half
rewards visible step structure ("Step 1:", "Step two:", "First, ... Then ...
Finally, ..."), full marks at three markers, to push the policy toward showing
its work.
"""

import re

_STEP_MARKER = re.compile(
    r"\bstep\b[^:\n]{0,12}:|\b(?:first|next|finally),|\bthen\b",
    re.IGNORECASE,
)


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"]
    boxes = re.findall(r"\\boxed\{([^{}]*)\}", text)
    correct = bool(boxes) and boxes[-1].strip() == answer.strip()
    steps = len(_STEP_MARKER.findall(text))
    return 0.5 * correct + 0.5 * min(steps, 3) / 3
