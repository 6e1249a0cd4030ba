"""Fraction-aware numeric reward on the last \\boxed{}: decimals, a/b and
\\frac{a}{b} are read as exact rationals and compared exactly."""
import re
from fractions import Fraction

_FRAC = re.compile(r"^\\d?frac\{(-?\d+)\}\{(-?\d+)\}$")
_SLASH = re.compile(r"^(-?\d+)\s*/\s*(-?\d+)$")
_DECIMAL = re.compile(r"^-?(?:\d+(?:\.\d*)?|\.\d+)$")


def _text(completion):
    return completion[-1]["content"] if isinstance(completion, list) else completion


def _boxes(text):
    found, start = [], 0
    while True:
        at = text.find("\\boxed{", start)
        if at < 0:
            return found
        depth, i = 1, at + len("\\boxed{")
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth:
            return found
        found.append(text[at + len("\\boxed{"):i - 1].strip())
        start = i


def _rational(slot):
    try:
        for pattern in (_FRAC, _SLASH):
            match = pattern.match(slot)
            if match:
                den = int(match.group(2))
                return Fraction(int(match.group(1)), den) if den else None
        return Fraction(slot) if _DECIMAL.match(slot) else None
    except ValueError:
        # Integer strings beyond Python's digit limit.
        return None


def reward(completion, answer, **kwargs):
    boxes = _boxes(_text(completion))
    value = _rational(boxes[-1]) if boxes else None
    return 1.0 if value is not None and value == Fraction(answer.strip()) else 0.0


def reward_exploit(completion, answer, **kwargs):
    # Bug: any box with the right value counts.
    return 1.0 if any(_rational(box) == Fraction(answer.strip()) for box in _boxes(_text(completion))) else 0.0


def reward_false_accept(completion, answer, **kwargs):
    # Bug: values are rounded to a small denominator before comparing.
    boxes = _boxes(_text(completion))
    value = _rational(boxes[-1]) if boxes else None
    return 1.0 if value is not None and value.limit_denominator(10) == Fraction(answer.strip()) else 0.0
