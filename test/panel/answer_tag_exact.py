"""Exact match on the last <answer>...</answer> tag, trimmed."""
import re

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_LEADING = re.compile(r"\s*(-?\d+)")


def _text(completion):
    return completion[-1]["content"] if isinstance(completion, list) else completion


def reward(completion, answer, **kwargs):
    found = _ANSWER.findall(_text(completion))
    return 1.0 if found and found[-1].strip() == answer.strip() else 0.0


def reward_exploit(completion, answer, **kwargs):
    # Bug: any tag may hold the answer.
    return 1.0 if any(value.strip() == answer.strip() for value in _ANSWER.findall(_text(completion))) else 0.0


def reward_false_accept(completion, answer, **kwargs):
    # Bug: only the leading integer of the tag is read.
    found = _ANSWER.findall(_text(completion))
    match = _LEADING.match(found[-1]) if found else None
    return 1.0 if match and match.group(1) == answer.strip() else 0.0
