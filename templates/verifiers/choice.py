"""Hardened multiple-choice reward, the built-in verifier for lettered answers.

The final answer is read in exactly one format (ANSWER_FORMAT) from the part
of the reply outside its reasoning block (<think>...</think> and similar), and
the slot must be exactly one of the labels in CHOICES, optionally written as
(C), C., **C** or \\text{C}. Nothing is upper-cased and no letter is searched
for inside longer text, so "a good choice", "A B C D", "C or D" and
"C (per the data)" name no label.

When the format occurs more than once, the last occurrence is the answer, but
a reply that returns to a value it had already replaced is hedging and scores
0, as is a reply whose other answer slots (\\boxed{}, <answer>, "Answer:"
lines, JSON) state a different label. A slot that is opened and never closed
means the reply was cut off, which also scores 0.
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


def _label(slot):
    if not isinstance(slot, str):
        return None
    s = slot.strip(_WS)
    if s.endswith("."):
        s = s[:-1].rstrip(_WS)
    if len(s) > 4 and s.startswith("**") and s.endswith("**"):
        s = s[2:-2].strip(_WS)
    wrapped = _TEXT_WRAPPER.fullmatch(s)
    if wrapped:
        s = wrapped.group(1).strip(_WS)
    if len(s) > 2 and s[0] == "(" and s[-1] == ")":
        s = s[1:-1].strip(_WS)
    return s if s in CHOICES else None


# Formats whose answers must agree with the one read. "####" is left out
# because it is also a Markdown heading.
_READER = gatekept_slots.SlotReader(ANSWER_FORMAT, _label, str, cross_checked=("boxed", "xml", "line", "json"))
if not CHOICES or not all(isinstance(c, str) and c and c.strip() == c for c in CHOICES):
    raise ValueError(f"CHOICES must be labels without surrounding spaces, got {CHOICES!r}")


def reward(completion, answer, **kwargs):
    return _READER.reward(completion, answer)
