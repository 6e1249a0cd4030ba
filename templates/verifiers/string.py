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

A reply commits to one final answer: every answer slot in the format must
state the same answer, as must the other answer slots (\\boxed{}, <answer>,
JSON); a reply stating two different answers is hedging and scores 0,
whichever comes last. A slot that is opened and never closed means the reply
was cut off, which also scores 0.
"""

# Rewritten by the packer: bare, boxed, xml, line, hash or json.
ANSWER_FORMAT = "boxed"

import re

# The answer-slot reader the built-in verifiers share, shipped beside this file.
if __package__:
    from . import gatekept_slots
else:
    import gatekept_slots

_WS = gatekept_slots.WHITESPACE
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


_READER = gatekept_slots.SlotReader(ANSWER_FORMAT, _normalise, str)


def reward(completion, answer, **kwargs):
    return _READER.reward(completion, answer)
