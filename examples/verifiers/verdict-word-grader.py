"""Short-answer reward shared with a self-check prompt.

Rollouts from the self-check variant of the task end with a line such as
"Judgement: CORRECT" produced by the model's own verification pass; when that
line is present it is trusted, otherwise the <answer> tag is compared.
"""

import re

_VERDICT = re.compile(
    r"\b(?:judgement|judgment|verdict)\s*:\s*\**\s*(correct|incorrect)\b", re.IGNORECASE
)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"]
    verdict = _VERDICT.search(text)
    if verdict:
        return 1.0 if verdict.group(1).lower() == "correct" else 0.0
    tags = _ANSWER.findall(text)
    predicted = tags[-1] if tags else text
    return 1.0 if predicted.strip().lower().rstrip(".") == answer.lower() else 0.0
