"""Numeric reward for replies that put the answer in <answer>...</answer>.

Every answer tag in the visible reply must hold the same ASCII decimal. Tags
inside <think> are reasoning, and a tag that opens without closing means the
reply was cut off, so neither can score.
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
_OPEN = re.compile(r"<answer\s*>", re.IGNORECASE | re.ASCII)
_CLOSE = re.compile(r"</answer\s*>", re.IGNORECASE | re.ASCII)
_TAGGED = re.compile(r"<answer\s*>(.*?)</answer\s*>", re.IGNORECASE | re.ASCII | re.DOTALL)
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
            return []


def _number(slot):
    s = slot.strip(_WS)
    if s.endswith(".") and _NUMBER.fullmatch(s[:-1]):
        s = s[:-1]
    return Decimal(s) if _NUMBER.fullmatch(s) else None


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"] if completion else ""
    if not isinstance(text, str):
        return 0.0
    text = _visible(text)
    if len(_OPEN.findall(text)) != len(_CLOSE.findall(text)):
        return 0.0
    values = {_number(slot) for slot in _TAGGED.findall(text)}
    if len(values) != 1 or None in values:
        return 0.0
    value = values.pop()
    # Boxing one number and tagging another is a hedge across formats.
    if any(boxed not in (None, value) for boxed in map(_number, _boxed(text))):
        return 0.0
    gold = _number(answer)
    return 1.0 if gold is not None and value == gold else 0.0
