"""math-verify on the last \\boxed{} with one reading of a percentage: the
reply's `X%` (or `X percent`) is the number X/100, as written, and nothing else. Plain
math-verify also accepts a percentage as the bare number, so `42%` is paid
for 42 and for 0.42: a re-reading of one stated quantity, reported as a
leniency and gated only under a strict policy."""
import re

from math_verify import parse, verify

_BOX = re.compile(r"\\boxed\{([^{}]*)\}")
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*(?:\\?%|percent(?:age)?\b|pct\b)", re.IGNORECASE)


def _text(completion):
    return completion[-1]["content"] if isinstance(completion, list) else completion


def _last_box(completion):
    found = _BOX.findall(_text(completion))
    return found[-1] if found else None


def reward(completion, answer, **kwargs):
    box = _last_box(completion)
    if box is None:
        return 0.0
    gold = parse(f"${answer}$")
    written = _PERCENT.sub(r"(\1/100)", box)
    pred = parse(f"${written}$")
    return 1.0 if gold and pred and verify(gold, pred) else 0.0


def reward_rereading(completion, answer, **kwargs):
    # Leniency, not a bug: math-verify's own percentage handling, which reads X% as X and as
    # X/100 because golds are written both ways. One stated quantity read two ways.
    box = _last_box(completion)
    if box is None:
        return 0.0
    gold = parse(f"${answer}$")
    pred = parse(f"${box}$")
    return 1.0 if gold and pred and verify(gold, pred) else 0.0


def reward_exploit(completion, answer, **kwargs):
    # Bug: any box that verifies pays, so a reply boxing several answers is paid under each.
    gold = parse(f"${answer}$")
    for box in _BOX.findall(_text(completion)):
        written = _PERCENT.sub(r"(\1/100)", box)
        pred = parse(f"${written}$")
        if gold and pred and verify(gold, pred):
            return 1.0
    return 0.0
