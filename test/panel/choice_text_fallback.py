"""A multiple-choice grader: the label from an `Answer:` line or the last
\\boxed{}, with a fallback for labels written with text or units after them
(`B) 12 kg`, `B.`): the label is the slot's leading letter when a
parenthesis, a dot or a space follows it."""
import re

_LINE = re.compile(r"^Answer:[ \t]*(.+)$", re.MULTILINE)
_BOX = re.compile(r"\\boxed\{([^{}]*)\}")
_LABEL = re.compile(r"^\(?([A-D])(?:[).:]|\s|$)")


def _text(completion):
    return completion[-1]["content"] if isinstance(completion, list) else completion


def _slot(completion):
    text = _text(completion)
    found = _LINE.findall(text) or _BOX.findall(text)
    return found[-1].strip() if found else None


def reward(completion, answer, **kwargs):
    slot = _slot(completion)
    if slot is None:
        return 0.0
    match = _LABEL.match(slot)
    return 1.0 if match and match.group(1) == answer.strip() else 0.0


def reward_exploit(completion, answer, **kwargs):
    # Bug: the fallback strips text and units by keeping every capital label letter in the slot.
    slot = _slot(completion)
    if slot is None:
        return 0.0
    return 1.0 if answer.strip() in re.findall(r"[A-D]", slot.upper()) else 0.0
