"""Hardened numeric reward, the built-in verifier for numeric answers.

The final answer is read in exactly one format (ANSWER_FORMAT) from the part
of the reply outside its reasoning block (<think>...</think> and similar), and
must be a plain ASCII decimal: an optional sign, digits, an optional
fractional part. "42", "42.", "+42" and "42.0" all equal 42; "1,750" (commas
grouping exactly three digits) equals 1750; "４２", "4 2", "1,75", "4.2e1",
"nan", "42abc" and "17=42" are not numbers here. The comparison is exact, so
no tolerance can be gamed.

When the format occurs more than once, the last occurrence is the answer, but
a reply that returns to a value it had already replaced (42, then 17, then 42)
is hedging and scores 0, as is a reply whose other answer slots (\\boxed{},
<answer>, "Answer:" lines, JSON) state a different number. A slot that is
opened and never closed means the reply was cut off, which also scores 0.
"""

# Rewritten by the packer: bare, boxed, xml, line, hash or json.
ANSWER_FORMAT = "boxed"

import json
import re
from decimal import Decimal

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
# Formats whose answers must agree with the one read. "####" is left out
# because it is also a Markdown heading.
_CROSS_CHECKED = ("boxed", "xml", "line", "json")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
# Thousands grouped by commas, as people write them: one value, never a list.
_GROUPED = re.compile(r"[+-]?[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]*)?")


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs):
    # json.loads keeps the last of duplicate keys, which would hide a hedge.
    if len({key for key, _ in pairs}) != len(pairs):
        raise _DuplicateKey("duplicate key")
    return dict(pairs)


def _no_constants(name):
    raise ValueError(f"{name} is not a number")


# Numbers are kept as their source text so they go through the same check as strings.
_DECODER = json.JSONDecoder(
    object_pairs_hook=_unique_keys, parse_constant=_no_constants, parse_float=str, parse_int=str
)
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


def _number(slot):
    if not isinstance(slot, str):
        return None
    s = slot.strip(_WS)
    if len(s) > 1 and s[0] == "$" and s[-1] == "$":
        s = s[1:-1].strip(_WS)
    if _GROUPED.fullmatch(s):
        s = s.replace(",", "")
    if s.endswith(".") and _NUMBER.fullmatch(s[:-1]):
        s = s[:-1]
    return Decimal(s) if _NUMBER.fullmatch(s) else None


def reward(completion, answer, **kwargs):
    gold = _number(str(answer))
    if gold is None:
        return 0.0
    text = _visible(_reply_text(completion))
    slots = _slots(text, ANSWER_FORMAT)
    if not slots:
        return 0.0
    values = []
    for index, slot in enumerate(slots):
        value = _number(slot)
        # An unreadable slot still counts as a change of answer.
        values.append(value if value is not None else ("unreadable", index))
    final = _committed(values)
    if not isinstance(final, Decimal) or _contradicted(text, final, _number):
        return 0.0
    return 1.0 if final == gold else 0.0
