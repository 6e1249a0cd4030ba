"""Numeric reward that cleans tokenizer artefacts out of the answer.

Decoded text carries invisible format characters (zero-width spaces, BOMs,
soft hyphens) and odd spacing ("1 024", tabs, no-break spaces), which made
exact matches fail; all of it is deleted before comparing. The answer is the
last \\boxed{}, else the last "Answer:" line, else the whole reply.
"""

import re
import unicodedata


def _sanitize(s):
    return "".join(ch for ch in s if not ch.isspace() and unicodedata.category(ch) != "Cf")


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"]
    boxes = re.findall(r"\\boxed\{([^{}]*)\}", text)
    lines = re.findall(r"(?im)^\s*answer\s*:\s*(.+)$", text)
    candidates = boxes or lines or [text]
    return 1.0 if _sanitize(candidates[-1]) == _sanitize(answer) else 0.0
