"""The math-verify package through its public parse and verify, the way
math RL rewards commonly call it: the ground truth and the reply are parsed
with the default extraction and compared with verify(), a percentage
written in the reply taken as X/100 alone."""
import re

from math_verify import parse, verify

_BOX = re.compile(r"\\boxed\{([^{}]*)\}")
# math-verify reads `42%` as 42 and as 0.42; a percentage is read as X/100 alone.
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*(?:\\?%|percent(?:age)?\b|pct\b)", re.IGNORECASE)


def _text(completion):
    text = completion[-1]["content"] if isinstance(completion, list) else completion
    return _PERCENT.sub(r"(\1/100)", text)


def reward(completion, answer, **kwargs):
    gold = parse(f"${answer}$")
    pred = parse(_text(completion))
    return 1.0 if gold and pred and verify(gold, pred) else 0.0


def reward_exploit(completion, answer, **kwargs):
    # Bug: every box is parsed on its own and any match counts.
    gold = parse(f"${answer}$")
    return 1.0 if any(verify(gold, parse(f"${box}$")) for box in _BOX.findall(_text(completion))) else 0.0


def reward_false_accept(completion, answer, **kwargs):
    # Bug: the first box is read, even inside the reasoning.
    gold = parse(f"${answer}$")
    found = _BOX.findall(_text(completion))
    return 1.0 if found and verify(gold, parse(f"${found[0]}$")) else 0.0
