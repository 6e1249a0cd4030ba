"""Bare-answer numeric reward for reasoning models.

The reply is expected to be a <think>...</think> block followed by nothing but
the number (a reply without a think block is read the same way). The think
block is removed properly: complete blocks are dropped, a stray closing tag
means the server stripped the opening one, and an unclosed block is reasoning
that never finished, so it yields no answer.
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


def _after_reasoning(text):
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


def _number(slot):
    s = slot.strip(_WS)
    if len(s) > 1 and s[0] == "$" and s[-1] == "$":
        s = s[1:-1].strip(_WS)
    if s.endswith(".") and _NUMBER.fullmatch(s[:-1]):
        s = s[:-1]
    return Decimal(s) if _NUMBER.fullmatch(s) else None


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"] if completion else ""
    if not isinstance(text, str):
        return 0.0
    # The whole visible remainder must be the number: no prose to hedge in.
    value = _number(_after_reasoning(text))
    gold = _number(answer)
    return 1.0 if value is not None and value == gold else 0.0
