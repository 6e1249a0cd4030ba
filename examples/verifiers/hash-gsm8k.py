"""GSM8K-style reward: the final answer follows "####" at the start of a line.

Thousands separators are not stripped on purpose: removing commas is what lets
"10,24" (or "1,0,2,4") pass as 1024. Every "####" line must agree, and lines
inside <think> are ignored.
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
_HASH_LINE = re.compile(r"^[ \t]*####(?!#)(.*)$", re.MULTILINE)


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


def _number(slot):
    s = slot.strip(_WS)
    if s.endswith(".") and _NUMBER.fullmatch(s[:-1]):
        s = s[:-1]
    return Decimal(s) if _NUMBER.fullmatch(s) else None


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"] if completion else ""
    if not isinstance(text, str):
        return 0.0
    values = {_number(slot) for slot in _HASH_LINE.findall(_visible(text))}
    if len(values) != 1 or None in values:
        return 0.0
    gold = _number(answer)
    return 1.0 if gold is not None and values.pop() == gold else 0.0
