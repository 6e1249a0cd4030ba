"""Boxed-answer reward (twin pair: substring check).

Reads the \\boxed{...} answers from the visible reply (think block removed),
requires them to agree, and compares the boxed text with the reference.
"""

import re

_WS = " \t\n\r\f\v"
# Reasoning blocks under the names models and servers actually use.
_REASONING_TAG = re.compile(
    r"<(/?)(?:think|thinking|reasoning|scratchpad)\s*>|<\|(begin|end)_of_thought\|>",
    re.IGNORECASE | re.ASCII,
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
                found.append(text[opening.end():brace.start()].strip(_WS))
                pos = brace.end()
                break
        else:
            return None


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"] if completion else ""
    if not isinstance(text, str):
        return 0.0
    boxes = _boxed(_visible(text))
    if not boxes or len(set(boxes)) != 1:
        return 0.0
    predicted = boxes[0]
    # Containment so that "42 apples" or "x = 42" still count.
    return 1.0 if answer.strip(_WS) in predicted else 0.0
