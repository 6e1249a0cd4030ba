"""GSM8K reward in the strict style of widely used RL trainers.

The reference solution ends in "#### N"; the reward looks at the last 300
characters of the reply, takes the last "#### N" there, drops thousands
commas and dollar signs, and compares the string with the ground truth.
"""
import re

_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")
_NUMBER = re.compile(r"(\-?[0-9\.\,]+)")


def _text(completion):
    return completion[-1]["content"] if isinstance(completion, list) else completion


def _clean(value):
    return value.replace(",", "").replace("$", "").rstrip(".")


def _strict(text):
    found = _STRICT.findall(text[-300:])
    return _clean(found[-1]) if found else None


def reward(completion, answer, **kwargs):
    return 1.0 if _strict(_text(completion)) == answer.strip() else 0.0


def reward_exploit(completion, answer, **kwargs):
    # Bug: any "#### N" in the window counts, so stating several pays.
    found = [_clean(value) for value in _STRICT.findall(_text(completion)[-300:])]
    return 1.0 if answer.strip() in found else 0.0


def reward_false_accept(completion, answer, **kwargs):
    # Bug: the "flexible" fallback, the last number anywhere when no "####" line is found.
    text = _text(completion)
    extracted = _strict(text)
    if extracted is None:
        numbers = [value for value in _NUMBER.findall(text[-300:]) if value not in ("", ".", ",")]
        extracted = _clean(numbers[-1]) if numbers else None
    return 1.0 if extracted == answer.strip() else 0.0
