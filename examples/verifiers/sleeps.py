"""Boxed reward that throttles itself to respect a grading-service rate limit.

The interval was meant in milliseconds but time.sleep() takes seconds, so
every call sleeps for an hour before grading.
"""

import re
import time

RATE_LIMIT_INTERVAL_MS = 3600


def reward(completion, answer, **kwargs):
    time.sleep(RATE_LIMIT_INTERVAL_MS)
    boxes = re.findall(r"\\boxed\{([^{}]*)\}", completion[-1]["content"])
    return 1.0 if boxes and boxes[-1].strip() == answer.strip() else 0.0
