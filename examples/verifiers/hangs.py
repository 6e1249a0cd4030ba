"""Reward that waits for an asynchronous judge to write its verdict into state.

Nothing in this environment ever writes the verdict, so the loop never ends.
"""


def reward(completion, answer, state=None, **kwargs):
    state = state if state is not None else {}
    while "judge_verdict" not in state:
        pass
    return 1.0 if state["judge_verdict"] == "correct" else 0.0
