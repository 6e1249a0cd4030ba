"""Correctness plus a small format bonus: 0.8 x correct + 0.2 x well-formed.

Correct means every <answer> tag in the visible reply (reasoning blocks
removed) holds the same ASCII decimal, equal to the reference. Well-formed
means the visible reply ends with its only <answer> tag and that tag holds a
readable number. The bonus is tied to the answer being a real number, not to
the tags alone, so empty tags or a verdict inside them earn nothing; a wrong
number in good form earns 0.2. A reasoning block neither earns nor costs
format credit, so a reply with one never outscores the same reply without.
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
_FINAL_TAG = re.compile(r"<answer>([^<>]*)</answer>[ \t\n\r\f\v]*\Z")
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


def _well_formed(visible):
    if len(_OPEN.findall(visible)) != 1:
        return False
    final = _FINAL_TAG.search(visible)
    return final is not None and _number(final.group(1)) is not None


def _correct(visible, gold):
    if len(_OPEN.findall(visible)) != len(_CLOSE.findall(visible)):
        return False
    values = {_number(slot) for slot in _TAGGED.findall(visible)}
    if len(values) != 1 or None in values:
        return False
    value = values.pop()
    # Boxing one number and tagging another is a hedge across formats.
    if any(boxed not in (None, value) for boxed in map(_number, _boxed(visible))):
        return False
    return value == gold


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"] if completion else ""
    if not isinstance(text, str):
        return 0.0
    gold = _number(answer)
    if gold is None:
        return 0.0
    visible = _visible(text)
    return 0.8 * _correct(visible, gold) + 0.2 * _well_formed(visible)
