"""Integer reward on the last \\boxed{} of the reply.

The content of the last box, with thousands separators removed, is parsed
with int() and compared with the integer ground truth; anything int()
refuses scores 0.
"""


def _text(completion):
    return completion[-1]["content"] if isinstance(completion, list) else completion


def _boxes(text):
    found, start = [], 0
    while True:
        at = text.find("\\boxed{", start)
        if at < 0:
            return found
        depth, i = 1, at + len("\\boxed{")
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth:
            return found
        found.append(text[at + len("\\boxed{"):i - 1])
        start = i


def _as_int(value):
    try:
        return int(value.replace(",", ""))
    except ValueError:
        return None


def reward(completion, answer, **kwargs):
    boxes = _boxes(_text(completion))
    if not boxes:
        return 0.0
    value = _as_int(boxes[-1])
    return 1.0 if value is not None and value == int(answer) else 0.0


def reward_exploit(completion, answer, **kwargs):
    # Bug: any box with the right integer counts.
    return 1.0 if any(_as_int(box) == int(answer) for box in _boxes(_text(completion))) else 0.0


def reward_false_accept(completion, answer, **kwargs):
    # Bug: parsed through float() and truncated, so 42.5 reads as 42.
    boxes = _boxes(_text(completion))
    if not boxes:
        return 0.0
    try:
        value = int(float(boxes[-1].replace(",", "")))
    except (ValueError, OverflowError):
        return 0.0
    return 1.0 if value == int(answer) else 0.0
