"""Float reward with flexible answer extraction (twin pair: tolerance test).

The answer may be given as \\boxed{}, in <answer> tags, on an "Answer:" or a
"####" line, or as the whole reply; every answer the visible reply states must
give the same value. The spellings float() understands
are accepted in ASCII (3.5, 3.50, 35e-1), and values are compared by relative
error so that large and small answers get the same treatment.
"""

import re

_WS = " \t\n\r\f\v"
_FLOAT = re.compile(
    r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|nan|inf|infinity)",
    re.IGNORECASE | re.ASCII,
)
# Reasoning blocks under the names models and servers actually use.
_REASONING_TAG = re.compile(
    r"<(/?)(?:think|thinking|reasoning|scratchpad)\s*>|<\|(begin|end)_of_thought\|>",
    re.IGNORECASE | re.ASCII,
)
_BOX_OPEN = re.compile(r"\\boxed\s*\{")
_BRACE = re.compile(r"[{}]")
_OPEN = re.compile(r"<answer\s*>", re.IGNORECASE | re.ASCII)
_CLOSE = re.compile(r"</answer\s*>", re.IGNORECASE | re.ASCII)
_TAGGED = re.compile(r"<answer\s*>(.*?)</answer\s*>", re.IGNORECASE | re.ASCII | re.DOTALL)
_ANSWER_LINE = re.compile(
    r"^[ \t]*(?:\*\*)?(?:final[ \t]+)?answer(?:\*\*)?[ \t]*:(?:\*\*)?(.*)$",
    re.IGNORECASE | re.MULTILINE | re.ASCII,
)
_HASH_LINE = re.compile(r"^[ \t]*####(?!#)(.*)$", re.MULTILINE)
_REL_TOL = 1e-6


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


def _slots(text):
    boxes = _boxed(text)
    if boxes is None or len(_OPEN.findall(text)) != len(_CLOSE.findall(text)):
        # An unclosed box or tag: the reply was cut off mid-answer.
        return []
    # Every answer the reply states, in any of the formats, has to agree.
    found = boxes + _TAGGED.findall(text) + _ANSWER_LINE.findall(text) + _HASH_LINE.findall(text)
    return found or [text]


def _float(slot):
    s = slot.strip(_WS)
    if s.endswith(".") and _FLOAT.fullmatch(s[:-1]):
        s = s[:-1]
    return float(s) if _FLOAT.fullmatch(s) else None


def _close(value, gold):
    # Written as "not too far" so the intent reads like the spec.
    return not abs(value - gold) / max(abs(value), abs(gold), 1e-12) > _REL_TOL


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"] if completion else ""
    if not isinstance(text, str):
        return 0.0
    values = [_float(slot) for slot in _slots(_visible(text))]
    gold = _float(answer)
    if not values or None in values or gold is None:
        return 0.0
    return 1.0 if all(_close(value, gold) for value in values) else 0.0
