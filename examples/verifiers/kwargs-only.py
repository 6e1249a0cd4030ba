"""Multiple-choice reward written against the keyword pool only.

It takes **kwargs and pulls what it needs, the way rubric functions that are
shared across tasks are written; the label set comes from info["choices"]
when the dataset provides it. Grading is strict: one label, read from
\\boxed{...} or an "Answer: ..." line, equal in every slot.
"""

import re

_DEFAULT_CHOICES = ("A", "B", "C", "D")
_WS = " \t\n\r\f\v"
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


def _reply(completion):
    for message in reversed(completion or []):
        if message["role"] == "assistant":
            content = message["content"]
            return content if isinstance(content, str) else ""
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


def _label(slot, choices):
    s = slot.strip(_WS)
    if s.endswith("."):
        s = s[:-1].rstrip(_WS)
    if len(s) > 2 and s[0] == "(" and s[-1] == ")":
        s = s[1:-1].strip(_WS)
    return s if s in choices else None


def reward(**kwargs):
    info = kwargs.get("info") or {}
    choices = tuple(str(c) for c in info.get("choices") or _DEFAULT_CHOICES)
    answer = str(kwargs.get("answer", "")).strip(_WS)
    if answer not in choices:
        return 0.0
    text = _visible(_reply(kwargs.get("completion")))
    boxes = _boxed(text)
    if boxes is None:
        return 0.0
    labels = {_label(slot, choices) for slot in boxes + _ANSWER_LINE.findall(text)}
    if len(labels) != 1 or None in labels:
        return 0.0
    return 1.0 if labels.pop() == answer else 0.0
