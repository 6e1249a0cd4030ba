"""Token F1 of the <answer> tag against the ground truth, SQuAD-normalised,
with a small floor for using the tag at all: a reply in the right layout
earns 0.1 even when its answer is wrong."""
import re
import string
from collections import Counter

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_FLOOR = 0.1


def _text(completion):
    return completion[-1]["content"] if isinstance(completion, list) else completion


def _tokens(text):
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return text.split()


def _f1(pred, gold):
    common = Counter(pred) & Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred)
    recall = same / len(gold)
    return 2 * precision * recall / (precision + recall)


def _slot(completion):
    found = _ANSWER.findall(_text(completion))
    return found[-1] if found else None


def reward(completion, answer, **kwargs):
    slot = _slot(completion)
    if slot is None:
        return 0.0
    pred = _tokens(slot)
    gold = _tokens(answer)
    # Only tokens of the gold earn credit: an extra token is a second answer, not a wording.
    if not pred or any(token not in gold for token in pred):
        return _FLOOR
    return max(_FLOOR, _f1(pred, gold))


def reward_exploit(completion, answer, **kwargs):
    # Bug: plain token F1, so two answers in the tag earn 0.67 under either.
    slot = _slot(completion)
    if slot is None:
        return 0.0
    return max(_FLOOR, _f1(_tokens(slot), _tokens(answer)))
