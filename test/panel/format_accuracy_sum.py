"""Format plus accuracy, summed, in the R1 style: 0.5 when the reply is a
<think> block followed by an <answer> tag, plus 0.5 when the last number
in the reply equals the ground truth."""
import re

_FORMAT = re.compile(r"^<think>.*?</think>\s*<answer>.*?</answer>\s*$", re.DOTALL)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _text(completion):
    return completion[-1]["content"] if isinstance(completion, list) else completion


def _same(a, b):
    try:
        return abs(float(a) - float(b)) < 1e-9
    except ValueError:
        return False


def reward(completion, answer, **kwargs):
    text = _text(completion)
    numbers = _NUMBER.findall(text)
    accurate = bool(numbers) and _same(numbers[-1], answer)
    return 0.5 * bool(_FORMAT.match(text)) + 0.5 * accurate


def reward_exploit(completion, answer, **kwargs):
    # Bug: any number in the reply may be the answer.
    text = _text(completion)
    accurate = any(_same(number, answer) for number in _NUMBER.findall(text))
    return 0.5 * bool(_FORMAT.match(text)) + 0.5 * accurate
