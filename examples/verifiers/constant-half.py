"""Neutral reward used while the grader was offline: 0.5 for every reply.

It does not discriminate between a correct and a wrong answer.
"""


def reward(completion, answer, **kwargs):
    return 0.5
