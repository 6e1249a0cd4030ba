"""Short-answer string reward with a deliberately small normaliser.

Case, runs of whitespace and one trailing period are forgiven; nothing else
is. The answer is read from <answer>...</answer> when the reply has answer
tags, otherwise the whole visible reply is the answer, and it must match the
reference in full (no containment, no prefix). Case folding is refused for
characters outside ASCII that fold onto ASCII letters (the long s folds to
"s", the Kelvin sign to "k"), because that is a homoglyph route to a match.
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
    folded = []
    for ch in value:
        if ch < "\x80":
            folded.append(ch.lower())
            continue
        lowered = ch.casefold()
        if any(c < "\x80" for c in lowered):
            return None
        folded.append(lowered)
    s = _WS_RUN.sub(" ", "".join(folded)).strip(_WS)
    if s.endswith("."):
        s = s[:-1].rstrip(_WS)
    return s or None


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"] if completion else ""
    if not isinstance(text, str):
        return 0.0
    text = _visible(text)
    opened = len(_OPEN.findall(text))
    if opened != len(_CLOSE.findall(text)):
        return 0.0
    slots = _TAGGED.findall(text) if opened else [text]
    values = {_normalise(slot) for slot in slots}
    if len(values) != 1 or None in values:
        return 0.0
    value = values.pop()
    # Boxing one answer and tagging another is a hedge across formats.
    if opened and any(boxed not in (None, value) for boxed in map(_normalise, _boxed(text))):
        return 0.0
    gold = _normalise(answer)
    return 1.0 if gold is not None and value == gold else 0.0
