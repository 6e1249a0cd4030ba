"""Boxed reward that slices the answer out by index instead of with a regex.

The end index stops one character short of the closing brace, so the last
digit is always lost and the reference never matches.
"""


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"]
    start = text.rfind("\\boxed{")
    if start < 0:
        return 0.0
    end = text.find("}", start)
    if end < 0:
        return 0.0
    predicted = text[start + len("\\boxed{"):end - 1].strip()
    return 1.0 if predicted == answer.strip() else 0.0
