"""Integer reward for \\boxed{N} or "Answer: N" (twin pair: integer parsing).

Every answer line and box in the visible reply must give the same integer,
and that integer must equal the reference.
"""

import re

_WS = " \t\n\r\f\v"
# Reasoning blocks under the names models and servers actually use.
_REASONING_TAG = re.compile(
    r"<(/?)(?:think|thinking|reasoning|scratchpad)\s*>|<\|(begin|end)_of_thought\|>",
    re.IGNORECASE | re.ASCII,
)
_ANSWER_LINE = re.compile(
    r"^[ \t]*(?:\*\*)?(?:final[ \t]+)?answer(?:\*\*)?[ \t]*:(?:\*\*)?(.*)$",
    re.IGNORECASE | re.MULTILINE | re.ASCII,
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


def _integer(slot):
    s = slot.strip(_WS)
    if s.endswith("."):
        s = s[:-1].rstrip(_WS)
    try:
        # int() already ignores surrounding spaces and rejects decimals.
        return int(s)
    except ValueError:
        # Also raised for numbers longer than the int-from-string digit limit.
        return None


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"] if completion else ""
    if not isinstance(text, str):
        return 0.0
    text = _visible(text)
    boxes = _boxed(text)
    if boxes is None:
        return 0.0
    values = {_integer(slot) for slot in boxes + _ANSWER_LINE.findall(text)}
    if len(values) != 1 or None in values:
        return 0.0
    gold = _integer(answer)
    return 1.0 if gold is not None and values.pop() == gold else 0.0
