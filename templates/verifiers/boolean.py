"""Hardened true/false reward, the built-in verifier for boolean answers.

The final answer is read in exactly one format (ANSWER_FORMAT) from the part
of the reply outside its reasoning block (<think>...</think> and similar).
After ASCII lower-casing, trimming and dropping one trailing period (or
**bold** markers) the slot must be exactly "true" or "false"; in the json
format a JSON true/false is accepted as well. "untrue", "not true",
"construe", "yes", 1 and "true or false" are not booleans here.

A reply commits to one final answer: every answer slot in the format must
state the same value, as must the other answer slots (\\boxed{}, <answer>,
"Answer:" lines, JSON); a reply stating two different answers is hedging and
scores 0, whichever comes last. A slot that is opened and never closed means
the reply was cut off, which also scores 0.
"""

# Rewritten by the packer: bare, boxed, xml, line, hash or json.
ANSWER_FORMAT = "boxed"

# The answer-slot reader the built-in verifiers share, shipped beside this file.
if __package__:
    from . import gatekept_slots
else:
    import gatekept_slots

_WS = gatekept_slots.WHITESPACE
# Only ASCII letters are lower-cased, so fullwidth or small-capital look-alikes stay distinct.
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _boolean(slot):
    # bool is checked before anything numeric: True == 1 in Python.
    if isinstance(slot, bool):
        return slot
    if not isinstance(slot, str):
        return None
    s = slot.translate(_ASCII_LOWER).strip(_WS)
    if s.endswith("."):
        s = s[:-1].rstrip(_WS)
    if len(s) > 4 and s.startswith("**") and s.endswith("**"):
        s = s[2:-2].strip(_WS)
    return {"true": True, "false": False}.get(s)


_READER = gatekept_slots.SlotReader(ANSWER_FORMAT, _boolean, bool)


def reward(completion, answer, **kwargs):
    return _READER.reward(completion, answer)
