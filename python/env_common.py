"""What the environment loader and its adapters share.

The failure that stops an environment from loading and how an exception is
described; a row's gold as the gate substitutes another (`_under_gold`,
`_coerce`); a rollout's text and token counts; and the watch on the rewards
and weights an environment scores with (`RewardWatch`, `RewardsChanged`).
Stdlib only: it is copied, with env_loader.py and env_adapters.py, beside the
gate's shim.
"""

import traceback


class LoadFailure(Exception):
    """A problem that stops the environment from loading, with the stage it hit."""

    def __init__(self, stage, message, missing_module=None):
        Exception.__init__(self, message)
        self.stage = stage
        self.message = message
        self.missing_module = missing_module


def _describe(exc):
    text = str(exc)
    if text:
        return "%s: %s" % (type(exc).__name__, text)
    # An exception without a message (EOFError from a child process that
    # died, a bare AssertionError) says nothing alone: where it was raised does.
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ is not None else []
    if not frames:
        return type(exc).__name__
    last = frames[-1]
    return "%s, raised in %s (%s line %d)" % (type(exc).__name__, last.name, last.filename, last.lineno)


def _same_gold(value, gold):
    return isinstance(value, str) and " ".join(value.split()).casefold() == " ".join(str(gold).split()).casefold()


def _under_gold(value, gold, alternate, depth=3):
    """A row's field as it would be under another gold, as the gate gives a
    row's info to an alternate gold: a string that is the gold becomes the
    alternate, and a list holding it (aliases) the alternate alone, since the
    true gold's aliases would pay it under every gold. Anything else stays."""
    if _same_gold(value, gold):
        return alternate
    if isinstance(value, (list, tuple)):
        return [alternate] if any(_same_gold(item, gold) for item in value) else value
    if depth > 0 and isinstance(value, dict):
        return {key: _under_gold(inner, gold, alternate, depth - 1) for key, inner in value.items()}
    return value


def _text_of(value):
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        parts = []
        for message in value:
            try:
                role = message.get("role") if hasattr(message, "get") else getattr(message, "role", None)
                content = message.get("content") if hasattr(message, "get") else getattr(message, "content", None)
            except Exception:
                continue
            if role in (None, "user") and isinstance(content, str):
                parts.append(content)
        return "\n\n".join(parts)
    return str(value)


def _coerce(answer, like):
    """The gold as the type the row stores its answer in (numbers stay numbers)."""
    if isinstance(like, bool):
        return answer.strip().lower() in ("true", "yes", "1")
    if isinstance(like, int):
        try:
            return int(answer)
        except ValueError:
            return answer
    if isinstance(like, float):
        try:
            return float(answer)
        except ValueError:
            return answer
    return answer


# The model a rollout names. Rewards see it (a classic state's `model`, a 0.4
# trace's model call) as they would in training, where it is the policy's.
ROLLOUT_MODEL = "Qwen/Qwen3-8B"


def _token_estimate(text):
    """A token count for a rollout's usage record: no tokenizer is at hand offline."""
    return max(1, len(text or "") // 4)


def _code_identity(fn):
    """What a reward function runs: its code object, so that a function swapped
    for another under the same name is told apart."""
    target = getattr(fn, "__func__", fn)
    code = getattr(target, "__code__", None)
    return id(code) if code is not None else id(target)


class RewardsChanged(RuntimeError):
    """The environment changed its reward functions or weights after loading."""


def _describe_change(old, new):
    olds = dict(_flatten_config(old))
    news = dict(_flatten_config(new))
    changes = []
    for key, value in news.items():
        if key not in olds:
            changes.append("%s added" % key)
        elif olds[key] != value:
            changes.append("%s %s -> %s" % (key, olds[key], value))
    changes.extend("%s removed" % key for key in olds if key not in news)
    return "; ".join(changes[:5]) or "the rubric was replaced"


def _flatten_config(config):
    """(reward name, what it is) pairs of a reward configuration, for the message."""
    out = []
    for owner, entries in config:
        for index, (name, code, weight) in enumerate(entries):
            label = "%s (%s #%d)" % (name, owner, index) if owner else name
            out.append(("weight of " + label, weight))
            out.append(("function " + label, "code@%x" % code if code is not None else "-"))
    return out


class RewardWatch(object):
    """The rewards and weights an environment scores with, compared at every
    call with those it loaded with. Training scores with whatever they are at
    that moment, so a reward or weight the environment changes after loading
    (on its first scoring, say) makes its reward depend on what was scored
    before, not on the completion: the call that finds the change raises,
    once for each change, and later calls score with the new set."""

    def __init__(self, read):
        self.read = read
        self.expected = read()

    def check(self, when):
        current = self.read()
        if current == self.expected:
            return
        previous, self.expected = self.expected, current
        raise RewardsChanged(
            "the environment changed its rewards or weights after loading (%s, found %s): its reward is not a function of the completion"
            % (_describe_change(previous, current), when)
        )
