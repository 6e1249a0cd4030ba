"""Short-answer string reward (twin pair: prefix check).

The answer is read from the <answer> tags of the visible reply (reasoning
blocks removed), or from the whole reply when it has no tags; every tag must
agree. Case, whitespace runs and a trailing period are normalised before
comparing.
"""

import re

_WS = " \t\n\r\f\v"
_WS_RUN = re.compile(r"[ \t\n\r\f\v]+")
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


def _normalise(value):
    s = _WS_RUN.sub(" ", value.translate(_ASCII_LOWER)).strip(_WS)
    if s.endswith("."):
        s = s[:-1].rstrip(_WS)
    return s


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"] if completion else ""
    if not isinstance(text, str):
        return 0.0
    text = _visible(text)
    opened = len(_OPEN.findall(text))
    if opened != len(_CLOSE.findall(text)):
        return 0.0
    values = {_normalise(slot) for slot in (_TAGGED.findall(text) if opened else [text])}
    if len(values) != 1:
        return 0.0
    predicted, gold = values.pop(), _normalise(answer)
    if not predicted or not gold:
        return 0.0
    # Boxing one answer and tagging another is a hedge across formats.
    if any(boxed not in ("", predicted) for boxed in map(_normalise, _boxed(text))):
        return 0.0
    # Prefix match so "Paris, France" and "Paris (the capital)" are accepted.
    return 1.0 if predicted.startswith(gold) else 0.0
