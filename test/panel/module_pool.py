"""Last \\boxed{} checked in a process pool made when the module is imported,
as math rewards run their checker: each call submits the check and waits at
most 5 s for it; a check that does not finish in time scores 0 and the
pool's processes are killed, so the next call gets fresh ones.
"""

import re
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as CheckTimeout

POOL = ProcessPoolExecutor(max_workers=2)
CHECK_TIMEOUT_S = 5.0
_BOX = re.compile(r"\\boxed\{([^{}]*)\}")


def _text(completion):
    return completion[-1]["content"] if isinstance(completion, list) else completion


def _same(value, answer):
    return value.strip().replace(",", "") == answer.strip()


def _check_last(text, answer):
    boxes = _BOX.findall(text)
    return 1.0 if boxes and _same(boxes[-1], answer) else 0.0


def _check_any(text, answer):
    return 1.0 if any(_same(box, answer) for box in _BOX.findall(text)) else 0.0


def _check_first(text, answer):
    boxes = _BOX.findall(text)
    return 1.0 if boxes and _same(boxes[0], answer) else 0.0


def _in_pool(check, completion, answer):
    future = POOL.submit(check, _text(completion), answer)
    try:
        return future.result(timeout=CHECK_TIMEOUT_S)
    except CheckTimeout:
        for process in list(POOL._processes.values()):
            process.kill()
        return 0.0


def reward(completion, answer, **kwargs):
    return _in_pool(_check_last, completion, answer)


def reward_exploit(completion, answer, **kwargs):
    # Bug: any box holding the answer counts, so a list of boxes pays.
    return _in_pool(_check_any, completion, answer)


def reward_false_accept(completion, answer, **kwargs):
    # Bug: the first box is read, even one inside the reasoning.
    return _in_pool(_check_first, completion, answer)
