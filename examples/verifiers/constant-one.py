"""Placeholder reward left in place while the real checker was being written.

It returns full reward for every reply, so it cannot tell right from wrong.
"""


def reward(completion, answer, **kwargs):
    # TODO: compare against the reference answer.
    return 1.0
