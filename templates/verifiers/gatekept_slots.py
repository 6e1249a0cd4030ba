"""The answer-slot reader of gatekept's built-in verifiers: where a reply's answer is.

Each built-in verifier (numeric.py, string.py, choice.py, boolean.py) imports
this module and gives it only what its answer type decides: how one slot's
text reads as a value, and which other formats must agree. `gatekept pack`
writes a byte-for-byte copy next to the verifier, both where the gate audits
it and in every package it emits. Standard library only, Python 3.10 or newer.

The answer is read in exactly one format from the part of the reply outside
its reasoning block (<think>...</think> and similar). A reply commits to one
final answer: the format may occur more than once, but every occurrence must
state the same value (in the bare format, every line above the last that
reads as an answer). A reply that states two different answers is hedging
and scores 0, whichever of them comes last, as is a reply whose other answer
slots state a different value. A slot that is opened and never closed means
the reply was cut off, which also scores 0.
"""

import json
import re

FORMATS = ("bare", "boxed", "xml", "line", "hash", "json")
# The formats with markers of their own; "bare" is the whole reply.
_MARKED = FORMATS[1:]

WHITESPACE = " \t\n\r\f\v"
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
    r"^[ \t]*(?:>[ \t]*|[*-][ \t]+)*(?:\*\*)?(?:final[ \t]+)?answer(?:\*\*)?[ \t]*:(?:\*\*)?(.*)$",
    re.IGNORECASE | re.MULTILINE | re.ASCII,
)
_HASH_LINE = re.compile(r"^[ \t]*(?:>[ \t]*|[*-][ \t]+)*####(?!#)(.*)$", re.MULTILINE)
# Markdown quote and list markers before a line: a quoted answer is an answer.
_LINE_MARKERS = re.compile(r"^[ \t]*(?:>[ \t]*|[*-][ \t]+)*")
# Answers stated outside any answer format: "The final answer is 17.", a
# "Correction: 17" line, a value hidden in an HTML comment. Each is checked
# against the answer read, whatever the format. Bounded, so a long reply is
# read in linear time.
_ANSWER_SENTENCE = re.compile(
    r"\banswer[ \t]+is:?[ \t]+([^\n]{1,200}?)(?=[.!?;]?[ \t]*$|[.!?;][ \t])",
    re.IGNORECASE | re.MULTILINE | re.ASCII,
)
_CORRECTION_LINE = re.compile(
    r"^[ \t]*(?:\*\*)?(?:correction|corrected[ \t]+answer)(?:\*\*)?[ \t]*:(?:\*\*)?(.*)$",
    re.IGNORECASE | re.MULTILINE | re.ASCII,
)
_COMMENT = re.compile(r"<!--(.*?)-->", re.DOTALL)
# A sentence naming an answer slot ("The answer is \boxed{17}.") is read as that slot.
_SLOT_MARKUP = re.compile(r"\\boxed|</?answer\b|[{}]", re.IGNORECASE)


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs):
    # json.loads keeps the last of duplicate keys, which would hide a hedge;
    # "Answer" beside "answer" is one too.
    if len({key.lower() for key, _ in pairs}) != len(pairs):
        raise _DuplicateKey("duplicate key")
    return dict(pairs)


def _no_constants(name):
    raise ValueError(f"{name} is not standard JSON")


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys, parse_constant=_no_constants)
# Numbers kept as their source text, so they go through the same check as strings.
_TEXT_NUMBER_DECODER = json.JSONDecoder(
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


def _json_answers(text, decoder):
    found, pos = [], 0
    while (start := text.find("{", pos)) >= 0:
        try:
            obj, end = decoder.raw_decode(text, start)
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


def _slots(text, answer_format, decoder):
    if answer_format == "bare":
        # The last line is the answer; the lines above it are the working.
        lines = (_LINE_MARKERS.sub("", line, count=1) for line in text.split("\n"))
        return [line for line in lines if line.strip(WHITESPACE)]
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
    return _json_answers(text, decoder)


def _unwrapped(slot):
    # Math delimiters are no part of an answer: "$42$" states 42.
    if isinstance(slot, str):
        s = slot.strip(WHITESPACE)
        if len(s) > 1 and s[0] == "$" and s[-1] == "$":
            return s[1:-1]
    return slot


def _stated(text):
    sentences = [found for found in _ANSWER_SENTENCE.findall(text) if not _SLOT_MARKUP.search(found)]
    return sentences + _CORRECTION_LINE.findall(text) + _COMMENT.findall(text)


def _committed(values):
    # One final answer, however often it is restated: a reply that states two
    # different answers is hedging, whichever of them a fixed rule would read.
    if not values or any(value != values[-1] for value in values):
        return None
    return values[-1]


class SlotReader:
    """Scores replies against a gold, reading one answer format.

    answer_format: one of FORMATS (anything else raises, so a bad rewrite
    fails when the verifier loads rather than scoring everything 0).
    parse(slot): the value a slot states, or None when it states none; a slot
    is a str, or in the json format any JSON value.
    kind: the type every value parse returns.
    cross_checked: the other formats whose answers must agree with the one read,
    by default all those with markers: a "####" heading or an "Answer:" line that reads
    as another value is another answer (answers stated in a sentence, a
    correction or a comment always must agree).
    numbers_as_text: JSON numbers reach parse as their source text.
    """

    def __init__(self, answer_format, parse, kind, cross_checked=_MARKED, numbers_as_text=False):
        if answer_format not in FORMATS:
            raise ValueError(f"ANSWER_FORMAT must be one of {FORMATS}, got {answer_format!r}")
        self.answer_format = answer_format
        self.parse = lambda slot: parse(_unwrapped(slot))
        self.kind = kind
        self.cross_checked = tuple(other for other in cross_checked if other != answer_format)
        self.decoder = _TEXT_NUMBER_DECODER if numbers_as_text else _DECODER

    def _contradicted(self, text, final):
        """Whether another structured slot in the reply states a different answer.

        A reply that boxes one value and tags another is hedging across formats,
        whichever of the two this verifier happens to read; so is one that
        boxes a value and then says the final answer is another.
        """
        slots = [slot for other in self.cross_checked for slot in _slots(text, other, self.decoder) or []]
        for slot in slots + _stated(text):
            value = self.parse(slot)
            if value is not None and value != final:
                return True
        return False

    def reward(self, completion, answer):
        """1.0 when the reply commits to the gold's value, else 0.0."""
        gold = self.parse(str(answer))
        if gold is None:
            return 0.0
        text = _visible(_reply_text(completion))
        slots = _slots(text, self.answer_format, self.decoder)
        if not slots:
            return 0.0
        values = []
        for index, slot in enumerate(slots):
            value = self.parse(slot)
            if value is None and self.answer_format == "bare" and index < len(slots) - 1:
                # A bare reply's lines above its last are the working: only
                # those that read as an answer count as one.
                continue
            # An unreadable slot is an answer all the same, one that is not the gold.
            values.append(value if value is not None else ("unreadable", index))
        final = _committed(values)
        if not isinstance(final, self.kind) or self._contradicted(text, final):
            return 0.0
        return 1.0 if final == gold else 0.0
