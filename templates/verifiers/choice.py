"""Hardened multiple-choice reward, the built-in verifier for lettered answers.

The final answer is read in exactly one format (ANSWER_FORMAT) from the part
of the reply outside its reasoning block (<think>...</think> and similar), and
the slot must be exactly one of the labels in CHOICES, optionally written as
(C), C., **C**, $C$ or \\text{C}, or named in one sentence ("The answer is (C).").
Nothing is upper-cased and no letter is searched for inside longer text, so "a
good choice", "A B C D", "C or D" and "C (per the data)" name no label.

A reply commits to one final answer: every answer slot in the format must
state the same label, as must the other answer slots (\\boxed{}, <answer>,
"Answer:" lines, JSON); a reply stating two different answers is hedging and
scores 0, whichever comes last. A slot that is opened and never closed means
the reply was cut off, which also scores 0.
"""

# Rewritten by the packer: bare, boxed, xml, line, hash or json.
ANSWER_FORMAT = "boxed"
# Rewritten by the packer: the answer labels of this task.
CHOICES = ["A", "B", "C", "D"]

import re

# The answer-slot reader the built-in verifiers share, shipped beside this file.
if __package__:
    from . import gatekept_slots
else:
    import gatekept_slots

_WS = gatekept_slots.WHITESPACE
_TEXT_WRAPPER = re.compile(r"\\text(?:bf)?\{([^{}]*)\}")
# "The answer is (C).": the sentence people end with, naming one label.
_LEAD_IN = re.compile(r"(?:the[ \t]+)?(?:final[ \t]+|correct[ \t]+)?answer[ \t]+is:?[ \t]+", re.IGNORECASE | re.ASCII)


def _label(slot):
    if not isinstance(slot, str):
        return None
    s = slot.strip(_WS)
    if s.endswith("."):
        s = s[:-1].rstrip(_WS)
    lead_in = _LEAD_IN.match(s)
    if lead_in:
        s = s[lead_in.end():]
    if len(s) > 4 and s.startswith("**") and s.endswith("**"):
        s = s[2:-2].strip(_WS)
    wrapped = _TEXT_WRAPPER.fullmatch(s)
    if wrapped:
        s = wrapped.group(1).strip(_WS)
    if len(s) > 2 and s[0] == "(" and s[-1] == ")":
        s = s[1:-1].strip(_WS)
    return s if s in CHOICES else None


_READER = gatekept_slots.SlotReader(ANSWER_FORMAT, _label, str)
if not CHOICES or not all(isinstance(c, str) and c and c.strip() == c for c in CHOICES):
    raise ValueError(f"CHOICES must be labels without surrounding spaces, got {CHOICES!r}")


def reward(completion, answer, **kwargs):
    return _READER.reward(completion, answer)
