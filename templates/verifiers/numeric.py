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

import re
from decimal import Decimal

# The answer-slot reader the built-in verifiers share, shipped beside this file.
if __package__:
    from . import gatekept_slots
else:
    import gatekept_slots

_WS = gatekept_slots.WHITESPACE
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
# Thousands grouped by commas, as people write them: one value, never a list.
_GROUPED = re.compile(r"[+-]?[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]*)?")


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


# Formats whose answers must agree with the one read. "####" is left out
# because it is also a Markdown heading.
_READER = gatekept_slots.SlotReader(
    ANSWER_FORMAT, _number, Decimal, cross_checked=("boxed", "xml", "line", "json"), numbers_as_text=True
)


def reward(completion, answer, **kwargs):
    return _READER.reward(completion, answer)
