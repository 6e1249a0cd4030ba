"""Strict multiple-choice reward.

The letter is read from \\boxed{...} or from an "Answer: ..." line, and the
slot must be exactly one of the choice labels, optionally as (C), C., **C** or
\\text{C}. Nothing is upper-cased (that is how "a good choice" becomes A) and no
letter is searched for inside longer text. All slots in the visible reply must
name the same letter.
"""

import re

CHOICES = ("A", "B", "C", "D")

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
_TEXT_WRAPPER = re.compile(r"\\text(?:bf)?\{([^{}]*)\}")


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


def _letter(slot):
    s = slot.strip(_WS)
    if s.endswith("."):
        s = s[:-1].rstrip(_WS)
    if len(s) > 4 and s.startswith("**") and s.endswith("**"):
        s = s[2:-2].strip(_WS)
    wrapped = _TEXT_WRAPPER.fullmatch(s)
    if wrapped:
        s = wrapped.group(1).strip(_WS)
    if len(s) > 2 and s[0] == "(" and s[-1] == ")":
        s = s[1:-1].strip(_WS)
    return s if s in CHOICES else None


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"] if completion else ""
    if not isinstance(text, str):
        return 0.0
    text = _visible(text)
    boxes = _boxed(text)
    if boxes is None:
        return 0.0
    letters = {_letter(slot) for slot in boxes + _ANSWER_LINE.findall(text)}
    if len(letters) != 1 or None in letters:
        return 0.0
    return 1.0 if letters.pop() == answer.strip(_WS) else 0.0
