"""A reasoning-model reward that reads only what follows </think>: no
closing tag, no answer. After it, the last \\boxed{} must hold the
ground truth as a plain integer."""
import re

_BOX = re.compile(r"\\boxed\{([^{}]*)\}")
_INTEGER = re.compile(r"-?\d+")


def _after_think(completion):
    text = completion[-1]["content"] if isinstance(completion, list) else completion
    return text.split("</think>")[-1] if "</think>" in text else None


def reward(completion, answer, **kwargs):
    after = _after_think(completion)
    found = _BOX.findall(after) if after is not None else []
    return 1.0 if found and _INTEGER.fullmatch(found[-1].strip()) and found[-1].strip() == answer.strip() else 0.0


def reward_exploit(completion, answer, **kwargs):
    # Bug: any box after the reasoning counts.
    after = _after_think(completion)
    return 1.0 if after is not None and any(box.strip() == answer.strip() for box in _BOX.findall(after)) else 0.0


def reward_false_accept(completion, answer, **kwargs):
    # Bug: the last integer after the reasoning, wherever it stands.
    after = _after_think(completion)
    numbers = _INTEGER.findall(after) if after is not None else []
    return 1.0 if numbers and numbers[-1] == answer.strip() else 0.0
