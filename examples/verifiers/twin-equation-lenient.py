"""Boxed numeric reward (twin pair: equations inside the box).

Every \\boxed{} in the visible reply must hold the same ASCII decimal, equal to
the reference.
"""

import re
from decimal import Decimal

_WS = " \t\n\r\f\v"
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
# Reasoning blocks under the names models and servers actually use.
_REASONING_TAG = re.compile(
    r"<(/?)(?:think|thinking|reasoning|scratchpad)\s*>|<\|(begin|end)_of_thought\|>",
    re.IGNORECASE | re.ASCII,
)
_BOX_OPEN = re.compile(r"\\boxed\s*\{")
_BRACE = re.compile(r"[{}]")
_RELATION = re.compile(
    r"=|\\(?:approx|neq|ne|to|Rightarrow|rightarrow|implies|le|ge|leq|geq)(?![A-Za-z])"
)


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


def _number(slot):
    s = slot.strip(_WS)
    # Models often box the whole relation ("x = -7", "x \approx -7"); keep
    # the value on the right of the last one.
    s = _RELATION.split(s)[-1].strip(_WS)
    if s.endswith(".") and _NUMBER.fullmatch(s[:-1]):
        s = s[:-1]
    return Decimal(s) if _NUMBER.fullmatch(s) else None


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"] if completion else ""
    if not isinstance(text, str):
        return 0.0
    boxes = _boxed(_visible(text))
    if not boxes:
        return 0.0
    values = {_number(box) for box in boxes}
    if len(values) != 1 or None in values:
        return 0.0
    gold = _number(answer)
    return 1.0 if gold is not None and values.pop() == gold else 0.0
