"""Boolean reward: the last <answer> tag holds true or false (any case)."""
import re

_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL)


def _text(completion):
    return completion[-1]["content"] if isinstance(completion, list) else completion


def reward(completion, answer, **kwargs):
    found = _ANSWER.findall(_text(completion))
    return 1.0 if found and found[-1].lower() in ("true", "false") and found[-1].lower() == answer.strip().lower() else 0.0


def reward_exploit(completion, answer, **kwargs):
    # Bug: any tag may hold the verdict.
    return 1.0 if any(value.lower() == answer.strip().lower() for value in _ANSWER.findall(_text(completion))) else 0.0


def reward_false_accept(completion, answer, **kwargs):
    # Bug: without a tag, the last word of the reply is taken as the verdict.
    text = _text(completion)
    found = _ANSWER.findall(text)
    if found:
        return 1.0 if found[-1].lower() == answer.strip().lower() else 0.0
    words = re.findall(r"[a-z]+", text.lower())
    return 1.0 if words and words[-1] in ("true", "false") and words[-1] == answer.strip().lower() else 0.0
