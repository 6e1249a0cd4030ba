"""Weighted correctness and format reward in the R1 style: 0.8 when the
last <answer> tag equals the ground truth, plus 0.2 when the reply is
exactly a <think> block followed by an <answer> tag."""
import re

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_FORMAT = re.compile(r"^<think>.*?</think>\s*<answer>.*?</answer>\s*$", re.DOTALL)
_LEADING = re.compile(r"\s*(-?\d+)")


def _text(completion):
    return completion[-1]["content"] if isinstance(completion, list) else completion


def _correct(text, answer):
    found = _ANSWER.findall(text)
    return bool(found) and found[-1].strip() == answer.strip()


def _format(text):
    return bool(_FORMAT.match(text))


def reward(completion, answer, **kwargs):
    text = _text(completion)
    return 0.8 * _correct(text, answer) + 0.2 * _format(text)


def reward_exploit(completion, answer, **kwargs):
    # Bug: the gold anywhere in the tag counts as correct.
    text = _text(completion)
    found = _ANSWER.findall(text)
    return 0.8 * (bool(found) and answer.strip() in found[-1]) + 0.2 * _format(text)


def reward_false_accept(completion, answer, **kwargs):
    # Bug: the leading integer of the tag is read.
    text = _text(completion)
    found = _ANSWER.findall(text)
    match = _LEADING.match(found[-1]) if found else None
    return 0.8 * bool(match and match.group(1) == answer.strip()) + 0.2 * _format(text)
