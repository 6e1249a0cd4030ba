"""Boolean reward for replies that end in a JSON object {"answer": ...}.

The value must be a JSON boolean or the string "true"/"false" (any ASCII
case); 1, "yes", lists and nested objects are refused rather than coerced.
Duplicate "answer" keys are refused too: json.loads would silently keep the
last one. When several answer objects appear they must all agree.
"""

import json
import re

_WS = " \t\n\r\f\v"
# Reasoning blocks under the names models and servers actually use.
_REASONING_TAG = re.compile(
    r"<(/?)(?:think|thinking|reasoning|scratchpad)\s*>|<\|(begin|end)_of_thought\|>",
    re.IGNORECASE | re.ASCII,
)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_INVALID = object()


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs):
    keys = [key for key, _ in pairs]
    if len(keys) != len(set(keys)):
        raise _Duplicate("duplicate key")
    return dict(pairs)


def _reject_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)


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


def _answer_objects(text):
    """Values of "answer" in each top-level JSON object of the text."""
    found, pos = [], 0
    while (start := text.find("{", pos)) >= 0:
        try:
            obj, end = _DECODER.raw_decode(text, start)
        except _Duplicate:
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


def _boolean(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        s = value.translate(_ASCII_LOWER).strip(_WS)
        return {"true": True, "false": False}.get(s)
    return None


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"] if completion else ""
    if not isinstance(text, str):
        return 0.0
    values = [(_INVALID if v is _INVALID else _boolean(v)) for v in _answer_objects(_visible(text))]
    if not values or any(v is None or v is _INVALID for v in values) or len(set(values)) != 1:
        return 0.0
    gold = _boolean(answer)
    return 1.0 if gold is not None and values[0] == gold else 0.0
