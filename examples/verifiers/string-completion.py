"""Boxed reward written for completion-mode (plain string) rollouts.

In chat mode the completion is a list of messages, and list has no strip(),
so every call raises.
"""

import re


def reward(completion: str, answer: str, **kwargs) -> float:
    text = completion.strip()
    boxes = re.findall(r"\\boxed\{([^{}]*)\}", text)
    return 1.0 if boxes and boxes[-1].strip() == answer.strip() else 0.0
