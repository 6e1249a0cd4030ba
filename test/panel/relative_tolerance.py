"""Numeric reward with a relative tolerance on the last \\boxed{} value:
finite floats within one part in a million of the ground truth."""
import math
import re

_BOX = re.compile(r"\\boxed\{([^{}]*)\}")
_LEADING = re.compile(r"\s*-?\d+(?:\.\d+)?")


def _text(completion):
    return completion[-1]["content"] if isinstance(completion, list) else completion


def _value(text):
    found = _BOX.findall(text)
    if not found:
        return None
    try:
        return float(found[-1].strip())
    except ValueError:
        return None


def reward(completion, answer, **kwargs):
    value = _value(_text(completion))
    return 1.0 if value is not None and math.isfinite(value) and math.isclose(value, float(answer), rel_tol=1e-6) else 0.0


def reward_exploit(completion, answer, **kwargs):
    # Bug: any box within the tolerance counts.
    for box in _BOX.findall(_text(completion)):
        try:
            value = float(box.strip())
        except ValueError:
            continue
        if math.isfinite(value) and math.isclose(value, float(answer), rel_tol=1e-6):
            return 1.0
    return 0.0


def reward_false_accept(completion, answer, **kwargs):
    # Bug: the leading number of the box is read and the rest ignored.
    found = _BOX.findall(_text(completion))
    match = _LEADING.match(found[-1]) if found else None
    return 1.0 if match and math.isclose(float(match.group(0)), float(answer), rel_tol=1e-6) else 0.0
