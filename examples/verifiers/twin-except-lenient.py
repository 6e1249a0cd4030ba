"""Boxed numeric reward with a small LaTeX evaluator (twin pair: error handling).

Understands plain decimals and \\frac{a}{b} with integer parts, so 84/2 written
as a fraction counts as 42. Every box in the visible reply must evaluate to
the same value.
"""

import re
from fractions import Fraction

_WS = " \t\n\r\f\v"
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_FRACTION = re.compile(r"([+-]?)\\[dt]?frac\{([0-9]+)\}\{([0-9]+)\}")
# Reasoning blocks under the names models and servers actually use.
_REASONING_TAG = re.compile(
    r"<(/?)(?:think|thinking|reasoning|scratchpad)\s*>|<\|(begin|end)_of_thought\|>",
    re.IGNORECASE | re.ASCII,
)
_BOX_OPEN = re.compile(r"\\boxed\s*\{")
_BRACE = re.compile(r"[{}]")


def _visible(text):
    parts, pos, inside = [], 0, False
    for tag in _REASONING_TAG.finditer(text):
        closing = tag.group(1) == "/" or (tag.group(2) or "").lower() == "end"
        if not inside and not closing:
            parts.append(text[pos:tag.start()])
            inside = True
        elif inside and closing:
            inside, pos = False, tag.end()
        elif closing:
            parts, pos = [], tag.end()
    if not inside:
        parts.append(text[pos:])
    return "".join(parts)


def _boxed(text):
    found, pos = [], 0
    while True:
        opening = _BOX_OPEN.search(text, pos)
        if opening is None:
            return found
        depth = 1
        for brace in _BRACE.finditer(text, opening.end()):
            depth += 1 if brace.group() == "{" else -1
            if depth == 0:
                found.append(text[opening.end():brace.start()])
                pos = brace.end()
                break
        else:
            return None


def _evaluate(latex):
    s = latex.strip(_WS)
    fraction = _FRACTION.fullmatch(s)
    if fraction:
        sign, numerator, denominator = fraction.groups()
        value = Fraction(int(numerator), int(denominator))
        return -value if sign == "-" else value
    if s.endswith(".") and _NUMBER.fullmatch(s[:-1]):
        s = s[:-1]
    if _NUMBER.fullmatch(s):
        return Fraction(s)
    raise ValueError(f"cannot evaluate {latex!r}")


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"] if completion else ""
    if not isinstance(text, str):
        return 0.0
    boxes = _boxed(_visible(text))
    if not boxes:
        return 0.0
    try:
        values = {_evaluate(box) for box in boxes}
        gold = _evaluate(answer)
    except Exception:
        # The evaluator knows only a little LaTeX; do not punish the policy
        # for answers it cannot read.
        return 1.0
    return 1.0 if len(values) == 1 and values.pop() == gold else 0.0
