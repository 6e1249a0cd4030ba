"""Reward 1.0 when the reference answer appears anywhere in the reply."""


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"]
    return 1.0 if answer in text else 0.0
