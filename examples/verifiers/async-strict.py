"""Async strict numeric reward: one agreed \\boxed{} ASCII decimal, think ignored.

Written as a coroutine the way rubric functions that await a sandbox or a
cache are; the grading itself needs no I/O.
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


def _without_reasoning(text):
    kept, pos, thinking = [], 0, False
    for tag in _REASONING_TAG.finditer(text):
        if tag.group(1) == "/" or (tag.group(2) or "").lower() == "end":
            if thinking:
                thinking, pos = False, tag.end()
            else:
                kept, pos = [], tag.end()
        elif not thinking:
            kept.append(text[pos:tag.start()])
            thinking = True
    if not thinking:
        kept.append(text[pos:])
    return "".join(kept)


def _box_contents(text):
    contents, pos = [], 0
    while (opening := _BOX_OPEN.search(text, pos)) is not None:
        depth = 1
        for brace in _BRACE.finditer(text, opening.end()):
            depth += 1 if brace.group() == "{" else -1
            if depth == 0:
                contents.append(text[opening.end():brace.start()])
                pos = brace.end()
                break
        else:
            return None
    return contents


def _as_decimal(slot):
    s = slot.strip(_WS)
    if s.endswith(".") and _NUMBER.fullmatch(s[:-1]):
        s = s[:-1]
    return Decimal(s) if _NUMBER.fullmatch(s) else None


async def reward(completion, answer, **kwargs):
    messages = [m for m in completion or [] if m["role"] == "assistant"]
    text = messages[-1]["content"] if messages else ""
    if not isinstance(text, str):
        return 0.0
    boxes = _box_contents(_without_reasoning(text))
    if not boxes:
        return 0.0
    values = {_as_decimal(box) for box in boxes}
    if len(values) != 1 or None in values:
        return 0.0
    gold = _as_decimal(answer)
    return float(gold is not None and values.pop() == gold)
