"""Multiple-choice letter extraction in the style of common MCQ evaluators:
the last "the answer is (X)" or "Answer: X" in the reply gives the letter."""
import re

_PATTERN = re.compile(r"answer(?:\s+is|\s*:)\s*\(?([A-D])\)?(?![A-Za-z])", re.IGNORECASE)
_LETTER = re.compile(r"\b([A-D])\b")


def _text(completion):
    return completion[-1]["content"] if isinstance(completion, list) else completion


def _letter(text):
    found = _PATTERN.findall(text)
    return found[-1].upper() if found else None


def reward(completion, answer, **kwargs):
    return 1.0 if _letter(_text(completion)) == answer.strip().upper() else 0.0


def reward_exploit(completion, answer, **kwargs):
    # Bug: the gold letter anywhere as a word counts.
    return 1.0 if answer.strip().upper() in _LETTER.findall(_text(completion).upper()) else 0.0


def reward_false_accept(completion, answer, **kwargs):
    # Bug: a fallback to the last standalone letter when no answer pattern is found.
    text = _text(completion)
    letter = _letter(text)
    if letter is None:
        letters = _LETTER.findall(text)
        letter = letters[-1] if letters else None
    return 1.0 if letter == answer.strip().upper() else 0.0
