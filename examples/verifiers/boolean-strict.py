"""True/false reward with exact matching after light normalisation.

The answer is the "Answer: ..." line when the reply has one (every such line
must agree), otherwise the whole visible reply. After ASCII lower-casing,
trimming and dropping one trailing period it must be exactly "true" or
"false": "untrue", "not true", "yes" and "1" are not booleans here.
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
# Only ASCII letters are lower-cased, so fullwidth or small-capital look-alikes stay distinct.
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


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


def _boolean(slot):
    s = slot.translate(_ASCII_LOWER).strip(_WS)
    if s.endswith("."):
        s = s[:-1].rstrip(_WS)
    if len(s) > 4 and s.startswith("**") and s.endswith("**"):
        s = s[2:-2].strip(_WS)
    return s if s in ("true", "false") else None


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"] if completion else ""
    if not isinstance(text, str):
        return 0.0
    text = _visible(text)
    slots = _ANSWER_LINE.findall(text) or [text]
    values = {_boolean(slot) for slot in slots}
    if len(values) != 1 or None in values:
        return 0.0
    gold = _boolean(answer)
    return 1.0 if gold is not None and values.pop() == gold else 0.0
