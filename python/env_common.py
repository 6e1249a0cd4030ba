"""What the environment loader and its adapters share.

The failure that stops an environment from loading and how an exception is
described; where a scoring call failed (`library_failure`: in the
library's own machinery, or in the environment's code); a row's gold as the gate substitutes another (`_under_gold`,
`_coerce`); a rollout's text and token counts; and the watch on the rewards
and weights an environment scores with (`RewardWatch`, `RewardsChanged`);
whether an environment plays later turns from a row's data, and a digest
of that data; and a digest of every row, to compare one load of the rows
with another. Stdlib only at import: it is copied, with env_loader.py,
env_adapters.py and env_classic.py, beside the gate's shim.
"""

import inspect
import os
import re
import sys
import sysconfig
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


class LibraryFailed(Exception):
    """A scoring call that failed in the library's own code around the rewards
    (verifiers building the rollout's state, say), with no frame of the
    environment's code or of a reward on the stack. args: the original
    exception's type name and message, and the innermost library frame as
    (path relative to its import root, line, function). The gate's worker
    reports the original type and message with that frame (see
    gatekept_calls._library_frame), so the audit names the library, not the
    reward, as what fails."""


class CodeOwners(object):
    """Which code a frame belongs to: the environment's own (its module or
    package, the directory it was loaded from, a reward function's code, even
    one the library defines), the gate's (the shim's directory), the standard
    library's, or a library's: any other file under an import root."""

    def __init__(self, module, directory, reward_codes, harness_dir):
        self.own_files = set()
        self.own_dirs = []
        source = getattr(module, "__file__", None)
        if isinstance(source, str):
            self.own_files.add(os.path.realpath(source))
        for location in getattr(module, "__path__", None) or []:
            self.own_dirs.append(os.path.realpath(location))
        if directory:
            self.own_dirs.append(os.path.realpath(directory))
        self.reward_codes = set(id(code) for code in reward_codes)
        self.harness_dir = os.path.realpath(harness_dir)
        stdlib = [sysconfig.get_paths().get(name) for name in ("stdlib", "platstdlib")]
        self.stdlib = set(os.path.realpath(entry) for entry in stdlib if entry)
        # The longest import root holding a file is where it was imported
        # from: site-packages inside a stdlib directory, an environment's own
        # .venv inside its directory, are told apart.
        roots = set(os.path.realpath(entry) for entry in sys.path if entry)
        self.roots = sorted(roots | self.stdlib | set(self.own_dirs), key=len, reverse=True)

    @staticmethod
    def _under(path, root):
        return path == root or path.startswith(root.rstrip(os.sep) + os.sep)

    def kind(self, code):
        """'own', 'harness', 'stdlib', ('library', relative path) or None (no file: generated code)."""
        if id(code) in self.reward_codes:
            return "own"
        name = code.co_filename
        if not name or name.startswith("<"):
            return None
        path = os.path.realpath(name)
        if path in self.own_files:
            return "own"
        root = next((entry for entry in self.roots if self._under(path, entry)), None)
        if root is None:
            return None
        if self._under(path, self.harness_dir):
            return "harness"
        if root in self.own_dirs or any(self._under(path, entry) and not self._under(root, entry) for entry in self.own_dirs):
            return "own"
        if root in self.stdlib:
            return "stdlib"
        return ("library", os.path.relpath(path, root))


def _chain(exc, depth=8):
    """The exception and those it was raised from or while handling, nearest first."""
    seen = []
    while exc is not None and len(seen) < depth and all(exc is not other for other in seen):
        seen.append(exc)
        exc = exc.__cause__ if exc.__cause__ is not None else exc.__context__
    return seen


def library_failure(exc, owners):
    """A LibraryFailed for an exception no frame of the environment's code or
    a reward raised or passed through (in it or in any exception it was
    raised from or while handling) and some library frame did, naming the
    innermost library frame of the nearest exception that has one; else None:
    a failure with the environment's code on the stack is the environment's
    (a reward that calls a library that raises is that reward's failure)."""
    found = None
    for link in _chain(exc):
        frames = []
        tb = link.__traceback__
        while tb is not None:
            frames.append((tb.tb_frame.f_code, tb.tb_lineno))
            tb = tb.tb_next
        innermost = None
        for code, line in frames:
            kind = owners.kind(code)
            if kind == "own":
                return None
            if isinstance(kind, tuple):
                innermost = (kind[1], line, code.co_name)
        if found is None and innermost is not None:
            found = (link, innermost)
    if found is None:
        return None
    link, frame = found
    try:
        message = str(link)
    except Exception:
        message = ""
    return LibraryFailed(type(link).__name__, message, frame)


def _same_gold(value, gold):
    return isinstance(value, str) and " ".join(value.split()).casefold() == " ".join(str(gold).split()).casefold()


def _decoration(value, gold):
    """(before, after) when a string is the gold with only punctuation or
    spaces around it (`(D)` for D, `$42` for 42), else None. A sign is no
    decoration: `-42` is another number than 42."""
    if not isinstance(value, str):
        return None
    match = _AROUND.match(value)
    before, core, after = match.group(1), match.group(2), match.group(3)
    if not core or (not before and not after) or not _same_gold(core, gold):
        return None
    if before.rstrip().endswith(("-", "+", "\u2212")):
        return None
    return before, after


_AROUND = re.compile(r"^(\W*?)(\w.*?\w|\w)?(\W*)$", re.S)


def _under_gold(value, gold, alternate, depth=3, prompt=None):
    """A row's field as it would be under another gold, as the gate gives a
    row's info to an alternate gold: a string that is the gold becomes the
    alternate (written as the gold is there: `(D)` becomes `(B)`), and a list
    holding it (aliases) the alternate alone, since the true gold's aliases
    would pay it under every gold. A list that already holds the alternate
    stays (it is that answer's too: a question's other options, or the
    alternate's own aliases), and so does a list whose every item the prompt
    shows (`_shown_list`): the question's options, which another gold does not
    change; made `[alternate]`, a reward that reads a label as the option at
    its place would pay the gold's label under every alternate, which no row
    of the environment does. Anything else stays."""
    if _same_gold(value, gold):
        return alternate
    decorated = _decoration(value, gold)
    if decorated is not None:
        return decorated[0] + str(alternate) + decorated[1]
    if isinstance(value, (list, tuple)):
        if not any(_same_gold(item, gold) for item in value):
            return value
        if any(_same_gold(item, alternate) for item in value) or _shown_list(value, prompt):
            return value
        return [alternate]
    if depth > 0 and isinstance(value, dict):
        return {key: _under_gold(inner, gold, alternate, depth - 1, prompt) for key, inner in value.items()}
    return value


def _shown_form(text):
    return " ".join(text.split()).casefold()


def _shown_list(items, prompt):
    """Whether the prompt's text shows every item of a list of two or more
    different strings, each whole (not inside a longer word): the options a
    question offers. A gold's aliases are not in its prompt, or the prompt
    would state the answer."""
    if not isinstance(prompt, str) or len(items) < 2:
        return False
    if not all(isinstance(item, str) and item.strip() for item in items):
        return False
    texts = {_shown_form(item) for item in items}
    if len(texts) < 2:
        return False
    shown = _shown_form(prompt)
    return all(re.search(r"(?<![^\W_])%s(?![^\W_])" % re.escape(text), shown) for text in texts)


def _field(item, name):
    """A field of a message or content part: a dict's key or a model's attribute."""
    try:
        return item.get(name) if hasattr(item, "get") else getattr(item, name, None)
    except Exception:
        return None


def _part_text(part):
    """The text of a content part that is text ({"type": "text", "text": ...}), else None."""
    if isinstance(part, str):
        return part
    text = _field(part, "text")
    kind = _field(part, "type")
    return text if isinstance(text, str) and kind in (None, "text") else None


def _content_parts(content):
    """A message's content as a list of parts: a string is one text part."""
    if content is None:
        return []
    if isinstance(content, (list, tuple)):
        return list(content)
    return [content]


def _text_of(value):
    """The text of the user's turns: a string content, or the text parts of a
    list of parts (images and other parts left out), one message a paragraph."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        parts = []
        for message in value:
            if _field(message, "role") not in (None, "user"):
                continue
            texts = [text for text in map(_part_text, _content_parts(_field(message, "content"))) if text is not None]
            if texts:
                parts.append("\n".join(texts))
        return "\n\n".join(parts)
    return str(value)


# 128 bits of SHA-256: enough to tell prompts apart, half the size in the rows' JSON.
_DIGEST_CHARS = 32


def _feed(hasher, value, depth=0):
    """Feed `value` to `hasher` in a canonical form: equal values (a dict's
    keys in any order, a missing key or one set to None) feed the same bytes,
    bytes and images by their content. Nothing is kept: an image payload is
    read into the hash and dropped."""
    if depth > 32:
        hasher.update(b"!deep")
    elif value is None:
        hasher.update(b"N")
    elif isinstance(value, bool):
        hasher.update(b"T" if value else b"F")
    elif isinstance(value, (int, float)):
        hasher.update(b"n%r;" % (value,))
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        hasher.update(b"s%d:" % len(data))
        hasher.update(data)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        hasher.update(b"b%d:" % len(data))
        hasher.update(data)
    elif isinstance(value, dict):
        items = sorted(((str(key), inner) for key, inner in value.items() if inner is not None), key=lambda item: item[0])
        hasher.update(b"d%d:" % len(items))
        for key, inner in items:
            _feed(hasher, key, depth + 1)
            _feed(hasher, inner, depth + 1)
    elif isinstance(value, (list, tuple)):
        hasher.update(b"l%d:" % len(value))
        for inner in value:
            _feed(hasher, inner, depth + 1)
    elif callable(getattr(value, "model_dump", None)):
        # A pydantic message or content part (verifiers 0.4 types them).
        _feed(hasher, value.model_dump(), depth + 1)
    elif callable(getattr(value, "tobytes", None)) and (hasattr(value, "mode") or hasattr(value, "dtype")):
        # A PIL image or an array (an image column a datasets row decodes): its pixels, shape and mode.
        shape = getattr(value, "size", None) if hasattr(value, "mode") else getattr(value, "shape", None)
        _feed(hasher, [type(value).__name__, str(getattr(value, "mode", getattr(value, "dtype", ""))), repr(shape)], depth + 1)
        _feed(hasher, value.tobytes(), depth + 1)
    else:
        _feed(hasher, "%s:%s" % (type(value).__name__, value), depth + 1)


def _prompt_hashes(prompt):
    """(every part, the parts that are not text) of a prompt as two digests,
    or (None, None) when every part is text, whose text tells it apart. Each
    message's role and each content part (text, image, audio, any other) go
    in, in order, so prompts differing only in an image differ here, and
    prompts alike in text and image bytes are alike."""
    if prompt is None or isinstance(prompt, str):
        return None, None
    import hashlib

    every, media = hashlib.sha256(), hashlib.sha256()
    others = 0
    messages = list(prompt) if isinstance(prompt, (list, tuple)) else [prompt]
    for message in messages:
        _feed(every, "role:%s" % _field(message, "role"))
        for part in _content_parts(_field(message, "content")):
            text = _part_text(part)
            if text is not None:
                _feed(every, "text")
                _feed(every, text)
            else:
                others += 1
                _feed(every, "part")
                _feed(every, part)
                _feed(media, part)
    if others == 0:
        return None, None
    return every.hexdigest()[:_DIGEST_CHARS], media.hexdigest()[:_DIGEST_CHARS]


def _info_hash(value):
    """A digest of a row's data beside its prompt and answer (`info`), in the
    canonical form of `_feed`: rows of a multi-turn environment alike in it
    play alike later turns. None where there is none."""
    if value is None or (isinstance(value, (dict, list, tuple, str)) and len(value) == 0):
        return None
    import hashlib

    hasher = hashlib.sha256()
    _feed(hasher, value)
    return hasher.hexdigest()[:_DIGEST_CHARS]


# Hex characters of each field's digest in `row_digests`: 32 bits, enough to
# tell whether a row is the same in two loads, small beside the rows.
ROW_DIGEST_CHARS = 8


def row_digests(rows):
    """Each row as the offline checks read it (see env_adapters._row_entry),
    as one string: per row, in order, a digest of its prompt (every part,
    where some are not text, else its text), of its answer, and of the data
    a multi-turn environment plays later turns from: the identity dataset
    health tells duplicates by, plus the answer. The loader and each process
    that loads the environment to score it send theirs, so that a dataset
    built differently on each load (choices shuffled without a seed) is seen."""
    import hashlib

    def short(text):
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:ROW_DIGEST_CHARS]

    out = []
    for row in rows:
        prompt = "parts:%s" % row["prompt_hash"] if row.get("prompt_hash") else "text:%s" % (row.get("prompt") or "")
        answer = row.get("answer")
        out.append(short(prompt) + short("none" if answer is None else "answer:%s" % answer) + short(row.get("info_hash") or ""))
    return "".join(out)


def v1_later_turns(module_name):
    """What plays a verifiers 0.4 taskset's turns after the first, or None:
    the `Env` the library pairs with the taskset (`environment_class`, as
    `vf-eval` resolves it: the package's exported Env subclass, else
    `SingleAgentEnv`) when its `run` is its own. `SingleAgentEnv.run` hands
    the task to the agent and adds no turns; an Env with its own `run` (a
    scripted user revealing more each turn, a game stepping an engine, a
    user simulator) writes the later user turns, from the task's data."""
    from verifiers.v1.envs.single_agent import SingleAgentEnv
    from verifiers.v1.utils.loaders import environment_class

    env = environment_class(module_name)
    run = getattr(env, "run", None)
    if run is None or run is SingleAgentEnv.run:
        return None
    return "%s.run" % env.__name__


def v1_episode_rewards(module_name):
    """The rewards a verifiers 0.4 taskset's Env records itself, or None: its
    own `finalize` (the base one records nothing) calling `record_reward`.
    They judge the finished episode (its rollouts compared with each other),
    which one reply scored offline is not: they are named, never gated. The
    names are those it passes as a constant; others are only known once an
    episode has run."""
    import dis

    from verifiers.v1.env import Env
    from verifiers.v1.utils.loaders import environment_class

    env = environment_class(module_name)
    finalize = getattr(env, "finalize", None)
    code = getattr(finalize, "__code__", None)
    if finalize is Env.finalize or code is None:
        return None
    records, names, pending = False, [], [code]
    while pending:
        code = pending.pop()
        pending.extend(const for const in code.co_consts if inspect.iscode(const))
        if "record_reward" not in code.co_names:
            continue
        records = True
        steps = list(dis.get_instructions(code))
        for step, after in zip(steps, steps[1:], strict=False):
            if step.argval == "record_reward" and after.opname == "LOAD_CONST" and isinstance(after.argval, str) and after.argval not in names:
                names.append(after.argval)
    return {"by": "%s.finalize" % env.__name__, "names": names} if records else None


def v0_later_turns(env):
    """What plays a classic 0.3 environment's turns after the first, or None:
    a `MultiTurnEnv` that is not a `SingleTurnEnv` answers the model with its
    `env_response`, which reads the row's `info` from the state; an
    `EnvGroup` has later turns where one of its environments does."""
    import verifiers as vf

    group = getattr(vf, "EnvGroup", None)
    if group is not None and isinstance(env, group):
        for inner in getattr(env, "envs", None) or []:
            found = v0_later_turns(inner)
            if found is not None:
                return found
        return None
    if isinstance(env, vf.MultiTurnEnv) and not isinstance(env, vf.SingleTurnEnv):
        return "%s.env_response" % type(env).__name__
    return None


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
