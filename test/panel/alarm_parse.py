"""Last \\boxed{} parsed as an exact rational with sympy under a 1 s
signal.alarm, as math rewards bound their parsing: a parse that does not
finish within the second scores 0. sympy is imported on the first parse,
so the first call in a fresh process is the slow one.
"""

import re
import signal

PARSE_TIMEOUT_S = 1
_BOX = re.compile(r"\\boxed\{([^{}]*)\}")


class ParseTimeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise ParseTimeout()


def _text(completion):
    return completion[-1]["content"] if isinstance(completion, list) else completion


def _parse(value):
    import sympy

    try:
        return sympy.Rational(value.strip().replace(",", ""))
    except (TypeError, ValueError, ZeroDivisionError, SyntaxError, sympy.SympifyError):
        return None


def _equal_with_timeout(box, answer):
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(PARSE_TIMEOUT_S)
    try:
        got, want = _parse(box), _parse(answer)
        return got is not None and want is not None and got == want
    except ParseTimeout:
        return False
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def reward(completion, answer, **kwargs):
    boxes = _BOX.findall(_text(completion))
    return 1.0 if boxes and _equal_with_timeout(boxes[-1], answer) else 0.0


def reward_exploit(completion, answer, **kwargs):
    # Bug: any box equal to the answer counts, so a list of boxes pays.
    return 1.0 if any(_equal_with_timeout(box, answer) for box in _BOX.findall(_text(completion))) else 0.0


def reward_false_accept(completion, answer, **kwargs):
    # Bug: the first box is read, even one inside the reasoning.
    boxes = _BOX.findall(_text(completion))
    return 1.0 if boxes and _equal_with_timeout(boxes[0], answer) else 0.0
