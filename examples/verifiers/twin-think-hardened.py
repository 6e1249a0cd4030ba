"""First-boxed-answer numeric reward (twin pair: reasoning block handling).

The first \\boxed{} answer is the committed one; a reply that leaves a value
and comes back to it is hedging and scores nothing. Numbers must be plain
ASCII decimals.
"""

import re
from decimal import Decimal

_WS = " \t\n\r\f\v"
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_BOX_OPEN = re.compile(r"\\boxed\s*\{")
_BRACE = re.compile(r"[{}]")
# Reasoning blocks under the names models and servers actually use.
_REASONING_TAG = re.compile(
    r"<(/?)(?:think|thinking|reasoning|scratchpad)\s*>|<\|(begin|end)_of_thought\|>",
    re.IGNORECASE | re.ASCII,
)


def _visible(text):
    # Boxes written while thinking are drafts, not answers.
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


def _first_committed(boxes):
    history = []
    for box in boxes:
        value = _number(box)
        key = value if value is not None else ("raw", box.strip(_WS))
        if history and history[-1] == key:
            continue
        if key in history:
            return None
        history.append(key)
    return history[0] if history else None


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"] if completion else ""
    if not isinstance(text, str):
        return 0.0
    boxes = _boxed(_visible(text))
    if not boxes:
        return 0.0
    first = _first_committed(boxes)
    gold = _number(answer)
    return 1.0 if isinstance(first, Decimal) and first == gold else 0.0
