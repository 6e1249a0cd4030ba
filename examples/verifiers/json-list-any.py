"""Short-answer reward for JSON output: {"answer": ...}.

The object is taken from the first "{" to the last "}" of the reply. Some
models return a list of candidate answers ranked by confidence, or an object
with the value and its unit; any candidate matching the reference counts.
"""

import json


def _norm(value):
    return str(value).strip().lower().rstrip(".")


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"]
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return 0.0
    try:
        data = json.loads(text[start:end + 1])
    except json.JSONDecodeError:
        return 0.0
    if not isinstance(data, dict):
        return 0.0
    value = data.get("answer")
    if isinstance(value, dict):
        # {"answer": {"value": ..., "unit": ...}}: the answer is among the values.
        value = list(value.values())
    candidates = value if isinstance(value, list) else [value]
    return 1.0 if any(_norm(c) == _norm(answer) for c in candidates if c is not None) else 0.0
