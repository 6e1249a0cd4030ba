"""Hardened numeric reward, the built-in verifier for numeric answers.

The final answer is read in exactly one format (ANSWER_FORMAT) from the part
of the reply outside its reasoning block (<think>...</think> and similar), and
must be a plain ASCII decimal: an optional sign, digits, an optional
fractional part. "42", "42.", "+42", "$42$" and "42.0" all equal 42; "1,750"
(commas grouping exactly three digits) equals 1750. The ways people write one
value are read as that value: a variable named before it ("x = 42"), a unit
after it ("42 cm", "42\\,\\text{cm}"; words that scale or deny a value, such
as "percent", "thousand" or "or", are no units) and an exact fraction of
integers ("\\frac{84}{2}"). "４２", "4 2", "1,75", "4.2e1", "nan", "42abc",
"42%" and "17=42" are not numbers here. The comparison is exact, so no
tolerance can be gamed.

A reply commits to one final answer: every answer slot in the format must
state the same value, as must the other answer slots (\\boxed{}, <answer>,
"Answer:" lines, JSON); a reply stating two different values is hedging and
scores 0 whichever comes last. A slot that is opened and never closed means
the reply was cut off, which also scores 0.
"""

# Rewritten by the packer: bare, boxed, xml, line, hash or json.
ANSWER_FORMAT = "boxed"

import re
from decimal import Decimal
from fractions import Fraction

# The answer-slot reader the built-in verifiers share, shipped beside this file.
if __package__:
    from . import gatekept_slots
else:
    import gatekept_slots

_WS = gatekept_slots.WHITESPACE
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
# Thousands grouped by commas, as people write them: one value, never a list.
_GROUPED = re.compile(r"[+-]?[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]*)?")
# Bounded, so that int() never meets a number too long to convert.
_FRACTION = re.compile(r"([+-]?)\\[dt]?frac\{([+-]?[0-9]{1,300})\}\{([0-9]{1,300})\}")
# "x = 42", "v_0 = 42": one variable named, then the value.
_VARIABLE = re.compile(r"[A-Za-z](?:_\{?[A-Za-z0-9]+\}?)?[ \t]*=[ \t]*")
_UNIT_WORD = r"[A-Za-z]+(?:/[A-Za-z]+)?(?:\^\{?-?[0-9]\}?)?"
# A unit after the value, set apart by a space (or LaTeX spacing): "42cm" is
# junk. The runs of spacing are bounded so that a long slot is read in linear time.
_UNIT = re.compile(
    rf"(?:(?:[ \t~]|\\[,;: ]){{1,3}}(?:\\(?:text|mathrm)\{{[ \t]{{0,3}}({_UNIT_WORD})[ \t]{{0,3}}\}}|({_UNIT_WORD}))"
    rf"|\\(?:text|mathrm)\{{[ \t]{{1,3}}({_UNIT_WORD})[ \t]{{0,3}}\}})$"
)
# Words that scale, deny or join values: "42 percent" is not 42.
_NOT_UNITS = frozenset(
    "percent pct percentage permille thousand thousands million millions billion billions trillion "
    "hundred hundreds dozen dozens k or and nor not no is isnt plus minus times".split()
)


def _decimal(s):
    if _GROUPED.fullmatch(s):
        s = s.replace(",", "")
    if s.endswith(".") and _NUMBER.fullmatch(s[:-1]):
        s = s[:-1]
    return Fraction(Decimal(s)) if _NUMBER.fullmatch(s) else None


def _number(slot):
    if not isinstance(slot, str):
        return None
    s = slot.strip(_WS)
    if s.endswith("."):
        s = s[:-1].rstrip(_WS)
    variable = _VARIABLE.match(s)
    if variable:
        s = s[variable.end():]
    unit = _UNIT.search(s)
    if unit and next(word for word in unit.groups() if word).lower() not in _NOT_UNITS:
        s = s[:unit.start()]
    fraction = _FRACTION.fullmatch(s)
    if fraction:
        sign, numerator, denominator = fraction.groups()
        if int(denominator) == 0:
            return None
        value = Fraction(int(numerator), int(denominator))
        return -value if sign == "-" else value
    return _decimal(s)


_READER = gatekept_slots.SlotReader(
    ANSWER_FORMAT, _number, Fraction, numbers_as_text=True
)


def reward(completion, answer, **kwargs):
    return _READER.reward(completion, answer)
