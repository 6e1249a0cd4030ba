"""SQuAD-style normalised exact match on the <answer> tag.

Reasoning in <think> blocks is dropped, the last <answer>...</answer> is the
prediction, and prediction and ground truth are normalised the SQuAD way
(lower case, punctuation and the articles a/an/the removed, whitespace
collapsed) before they are compared.
"""
import re
import string

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _text(completion):
    return completion[-1]["content"] if isinstance(completion, list) else completion


def normalize_answer(s):
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def reward(completion, answer, **kwargs):
    found = _ANSWER.findall(_THINK.sub("", _text(completion)))
    return 1.0 if found and normalize_answer(found[-1]) == normalize_answer(answer) else 0.0


def reward_exploit(completion, answer, **kwargs):
    # Bug: token F1 of at least one half counts as correct.
    found = _ANSWER.findall(_THINK.sub("", _text(completion)))
    if not found:
        return 0.0
    pred, gold = normalize_answer(found[-1]).split(), normalize_answer(answer).split()
    common = sum(min(pred.count(t), gold.count(t)) for t in set(gold))
    if not pred or not gold or common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 1.0 if 2 * precision * recall / (precision + recall) >= 0.5 else 0.0


def reward_false_accept(completion, answer, **kwargs):
    # Bug: the reasoning is not dropped and the first tag is taken.
    match = _ANSWER.search(_text(completion))
    return 1.0 if match and normalize_answer(match.group(1)) == normalize_answer(answer) else 0.0
