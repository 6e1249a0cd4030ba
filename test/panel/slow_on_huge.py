"""Last \\boxed{}, after a filter for degenerate replies: one in which most
word 3-grams already appeared earlier, punctuation and case aside, scores 0.
The filter normalises the words seen so far again at every word, so its
cost grows with the square of the length: milliseconds on a reply, more
than a second on 50,000 characters.
"""

import re

_BOX = re.compile(r"\\boxed\{([^{}]*)\}")


def _text(completion):
    return completion[-1]["content"] if isinstance(completion, list) else completion


def _plain(text):
    for mark in ",.;:!?":
        text = text.replace(mark, "")
    return text.lower()


def _repeated_share(words):
    repeated = 0
    for i in range(3, len(words) - 3):
        if _plain(" ".join(words[i : i + 3])) in _plain(" ".join(words[:i])):
            repeated += 1
    return repeated / max(1, len(words) - 6)


def _degenerate(text):
    return _repeated_share(text.split()) > 0.5


def _same(value, answer):
    return value.strip().replace(",", "") == answer.strip()


def reward(completion, answer, **kwargs):
    text = _text(completion)
    if _degenerate(text):
        return 0.0
    boxes = _BOX.findall(text)
    return 1.0 if boxes and _same(boxes[-1], answer) else 0.0


def reward_exploit(completion, answer, **kwargs):
    # Bug: any box holding the answer counts, so a list of boxes pays.
    text = _text(completion)
    if _degenerate(text):
        return 0.0
    return 1.0 if any(_same(box, answer) for box in _BOX.findall(text)) else 0.0


def reward_false_accept(completion, answer, **kwargs):
    # Bug: the first box is read, even one inside the reasoning.
    text = _text(completion)
    if _degenerate(text):
        return 0.0
    boxes = _BOX.findall(text)
    return 1.0 if boxes and _same(boxes[0], answer) else 0.0
