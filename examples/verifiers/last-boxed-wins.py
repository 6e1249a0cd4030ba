"""Numeric reward where the last \\boxed{} answer is the committed one.

A model may box a draft and then correct itself, so earlier boxes are treated
as superseded. Going back to a value it already abandoned (17, then 42, then
17 again) is hedging rather than correcting, and scores nothing.
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
    if s.endswith(".") and _NUMBER.fullmatch(s[:-1]):
        s = s[:-1]
    return Decimal(s) if _NUMBER.fullmatch(s) else None


def _committed(values):
    history = []
    for value in values:
        if history and history[-1] == value:
            continue
        if value in history:
            return None
        history.append(value)
    return history[-1] if history else None


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"] if completion else ""
    if not isinstance(text, str):
        return 0.0
    boxes = _boxed(_visible(text))
    if not boxes:
        return 0.0
    # Unparseable boxes keep their raw text so they still count as a change of mind.
    values = [_number(box) if _number(box) is not None else ("raw", box) for box in boxes]
    final = _committed(values)
    gold = _number(answer)
    return 1.0 if isinstance(final, Decimal) and final == gold else 0.0
