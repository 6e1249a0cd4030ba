"""Strict numeric reward that works whether the completion is a chat message
list or a plain string.

Environments switch between chat and completion mode, and message objects are
not always dicts (pydantic messages support m["content"] but fail an
isinstance check), so the reply text is read defensively. The answer may be
given as \\boxed{...} or as an "Answer: ..." line; every answer given must agree.
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
_ANSWER_LINE = re.compile(
    r"^[ \t]*(?:\*\*)?(?:final[ \t]+)?answer(?:\*\*)?[ \t]*:(?:\*\*)?(.*)$",
    re.IGNORECASE | re.MULTILINE | re.ASCII,
)


def _field(message, name):
    try:
        return message[name]
    except (KeyError, TypeError, IndexError):
        return getattr(message, name, None)


def _as_text(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # OpenAI-style content parts: images and audio carry no answer text.
        texts = [part.get("text") for part in content if isinstance(part, dict) and part.get("type") == "text"]
        return "".join(t for t in texts if isinstance(t, str))
    return ""


def _reply_text(completion):
    if isinstance(completion, str):
        return completion
    for message in reversed(list(completion or [])):
        if _field(message, "role") == "assistant":
            return _as_text(_field(message, "content"))
    return ""


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
    if s.startswith("$") and s.endswith("$") and len(s) > 1:
        s = s[1:-1].strip(_WS)
    if s.endswith(".") and _NUMBER.fullmatch(s[:-1]):
        s = s[:-1]
    return Decimal(s) if _NUMBER.fullmatch(s) else None


def reward(completion, answer, **kwargs):
    text = _visible(_reply_text(completion))
    boxes = _boxed(text)
    if boxes is None:
        return 0.0
    slots = boxes + _ANSWER_LINE.findall(text)
    if not slots:
        return 0.0
    values = {_number(slot) for slot in slots}
    if len(values) != 1 or None in values:
        return 0.0
    gold = _number(str(answer))
    return 1.0 if gold is not None and values.pop() == gold else 0.0
