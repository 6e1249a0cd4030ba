"""Hardened short-answer string reward, the built-in verifier for text answers.

The final answer is read in exactly one format (ANSWER_FORMAT) from the part
of the reply outside its reasoning block (<think>...</think> and similar).
Both sides are case-folded, runs of whitespace collapse to one space and one
trailing period is dropped; then the whole slot must equal the reference.
There is no containment or prefix test, so "comparison" is not "paris" and
"Paris or London" is not "Paris". A character outside ASCII that case-folds
onto ASCII letters (the long s, the Kelvin sign, ligatures) is refused instead
of folded: that is a homoglyph route to a match. In the json format the value
must be a JSON string.

When the format occurs more than once, the last occurrence is the answer, but
a reply that returns to a value it had already replaced is hedging and scores
0, as is a reply whose other answer slots (\\boxed{}, <answer>, JSON) state a
different answer. A slot that is opened and never closed means the reply was
cut off, which also scores 0.
"""

# Rewritten by the packer: bare, boxed, xml, line, hash or json.
ANSWER_FORMAT = "boxed"

import json
import re

_FORMATS = ("bare", "boxed", "xml", "line", "hash", "json")
if ANSWER_FORMAT not in _FORMATS:
    raise ValueError(f"ANSWER_FORMAT must be one of {_FORMATS}, got {ANSWER_FORMAT!r}")

_WS = " \t\n\r\f\v"
# Reasoning blocks under the names models and servers actually use.
_REASONING_TAG = re.compile(
    r"<(/?)(?:think|thinking|reasoning|scratchpad)\s*>|<\|(begin|end)_of_thought\|>",
    re.IGNORECASE | re.ASCII,
)
_BOX_OPEN = re.compile(r"\\boxed\s*\{")
_BRACE = re.compile(r"[{}]")
_TAG_OPEN = re.compile(r"<answer\s*>", re.IGNORECASE | re.ASCII)
_TAG_CLOSE = re.compile(r"</answer\s*>", re.IGNORECASE | re.ASCII)
_TAGGED = re.compile(r"<answer\s*>(.*?)</answer\s*>", re.IGNORECASE | re.ASCII | re.DOTALL)
_ANSWER_LINE = re.compile(
    r"^[ \t]*(?:\*\*)?(?:final[ \t]+)?answer(?:\*\*)?[ \t]*:(?:\*\*)?(.*)$",
    re.IGNORECASE | re.MULTILINE | re.ASCII,
)
_HASH_LINE = re.compile(r"^[ \t]*####(?!#)(.*)$", re.MULTILINE)
# Formats whose answers must agree with the one read. Free-text lines are left
# out: any prose after "Answer:" would read as a different string.
_CROSS_CHECKED = ("boxed", "xml", "json")


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs):
    # json.loads keeps the last of duplicate keys, which would hide a hedge.
    if len({key for key, _ in pairs}) != len(pairs):
        raise _DuplicateKey("duplicate key")
    return dict(pairs)


def _no_constants(name):
    raise ValueError(f"{name} is not standard JSON")


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys, parse_constant=_no_constants)
_INVALID = object()


def _reply_text(completion):
    if isinstance(completion, str):
        return completion
    for message in reversed(list(completion or [])):
        try:
            role, content = message["role"], message["content"]
        except (KeyError, TypeError, IndexError):
            continue
        if role == "assistant":
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
            # The opening tag was stripped upstream: all of it was reasoning.
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


def _json_answers(text):
    found, pos = [], 0
    while (start := text.find("{", pos)) >= 0:
        try:
            obj, end = _DECODER.raw_decode(text, start)
        except _DuplicateKey:
            found.append(_INVALID)
            pos = start + 1
            continue
        except (ValueError, RecursionError):
            pos = start + 1
            continue
        if isinstance(obj, dict) and "answer" in obj:
            found.append(obj["answer"])
        pos = end
    return found


def _slots(text, answer_format):
    if answer_format == "bare":
        # The last line is the answer; the lines above it are the working.
        return [line for line in text.split("\n") if line.strip(_WS)]
    if answer_format == "boxed":
        return _boxed(text)
    if answer_format == "xml":
        if len(_TAG_OPEN.findall(text)) != len(_TAG_CLOSE.findall(text)):
            return None
        return _TAGGED.findall(text)
    if answer_format == "line":
        return _ANSWER_LINE.findall(text)
    if answer_format == "hash":
        return _HASH_LINE.findall(text)
    return _json_answers(text)


def _contradicted(text, final, parse):
    """Whether another structured slot in the reply states a different answer.

    A reply that boxes one value and tags another is hedging across formats,
    whichever of the two this verifier happens to read.
    """
    for other in _CROSS_CHECKED:
        if other == ANSWER_FORMAT:
            continue
        for slot in _slots(text, other) or []:
            value = parse(slot)
            if value is not None and value != final:
                return True
    return False


def _committed(values):
    history = []
    for value in values:
        if history and history[-1] == value:
            continue
        if value in history:
            return None
        history.append(value)
    return history[-1] if history else None


_WS_RUN = re.compile(r"[ \t\n\r\f\v]+")


def _normalise(slot):
    if not isinstance(slot, str):
        return None
    folded = []
    for ch in slot:
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
    gold = _normalise(str(answer))
    if gold is None:
        return 0.0
    text = _visible(_reply_text(completion))
    slots = _slots(text, ANSWER_FORMAT)
    if not slots:
        return 0.0
    values = []
    for index, slot in enumerate(slots):
        value = _normalise(slot)
        # An unreadable slot still counts as a change of answer.
        values.append(value if value is not None else ("unreadable", index))
    final = _committed(values)
    if not isinstance(final, str) or _contradicted(text, final, _normalise):
        return 0.0
    return 1.0 if final == gold else 0.0
