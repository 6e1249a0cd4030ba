"""Load an existing verifiers environment and score through its own path.

Used two ways by `gatekept audit --env`:

    env_loader.py inspect SPEC OUT.json
        Load the environment (a package directory or an installed module name)
        and write what the offline checks need: the library and kind, the
        rows (prompt, answer), the reward functions and weights, and every
        problem found while loading. Exit 0 whenever OUT.json was written.

    env_shim.py (a verifier for the gate) imports `open_env` and calls
        `Env.score(row, answer, text, reward)` for each candidate.

A verifiers 0.4 environment is loaded the way `vf-eval` does (the module's
exported Taskset subclass, its config type, `load_taskset`) and a completion
is scored by `Task.score` on the `Trace` a one-turn rollout leaves: the
prompt and the reply as message nodes and the model call recorded. A classic
0.3 environment is loaded with `load_environment()` and each completion is
rolled out through the environment's own rollout (a client that answers the
model's turn with the completion) and scored by its rubric, as training
does; unlike the library, a reward's exception is raised instead of being
hidden as a zero, so the gate can report it. Both read the rewards and
weights afresh at every call, as training does, and a call that finds them
changed since loading raises (`RewardsChanged`).
"""

import copy
import inspect
import json
import math
import os
import sys
import time
import traceback
import uuid

# Loading must work offline: nothing may reach a hub.
for _name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(_name, "1")

# How to load the environment beyond its id (JSON, see load_options): read
# from stdin by `main` before any of the environment's code runs, so neither
# the environment nor /proc/self/environ shows it; the gate's shim passes its own.
_LOAD_CONFIG = {}
DATASET_BUILDERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}

ANSWER_FIELDS = ("answer", "solution", "target", "label", "ground_truth", "gold", "expected", "reference")
MAX_ROWS = 100000


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


def _module_for(spec):
    """(module name, directory to import from or None) for a directory or a module name."""
    if os.path.isdir(spec):
        directory = os.path.abspath(spec)
        name = None
        pyproject = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(pyproject):
            try:
                import tomllib

                with open(pyproject, "rb") as handle:
                    name = ((tomllib.load(handle).get("project") or {}).get("name")) or None
            except Exception as exc:
                raise LoadFailure("exports", "cannot read %s: %s" % (pyproject, _describe(exc))) from exc
        if name is None:
            name = os.path.basename(directory.rstrip(os.sep))
        return name.replace("-", "_").lower(), directory
    # A hub id `owner/name@version` names the module `name`, as verifiers resolves it.
    name = spec.rsplit("/", 1)[-1].split("@", 1)[0]
    return name.replace("-", "_").lower(), None


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


def _modules_hint(directory):
    """The modules a package directory does hold: the module name is read from
    pyproject.toml's [project] name, which may not be the module's own."""
    if directory is None:
        return ""
    try:
        entries = sorted(os.listdir(directory))
    except OSError:
        return ""
    found = []
    for entry in entries:
        path = os.path.join(directory, entry)
        if entry.endswith(".py") and entry != "setup.py" and os.path.isfile(path):
            found.append(entry[:-3])
        elif os.path.isfile(os.path.join(path, "__init__.py")):
            found.append(entry)
    if not found:
        return ""
    return " (the name comes from pyproject.toml's [project] name, - read as _; the directory holds %s)" % ", ".join(found[:5])


def _import(module_name, directory):
    import importlib

    if directory is not None and directory not in sys.path:
        sys.path.insert(0, directory)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing == module_name:
            where = "in %s" % directory if directory else "installed for this Python"
            raise LoadFailure("import", "no module %s %s%s" % (module_name, where, _modules_hint(directory)), missing) from exc
        raise LoadFailure("import", "importing %s failed: %s" % (module_name, _describe(exc)), missing or None) from exc
    except BaseException as exc:
        raise LoadFailure("import", "importing %s failed: %s" % (module_name, _describe(exc))) from exc


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


class V1Env(object):
    """A verifiers 0.4 Taskset, scored with `Task.score` on a `Trace`."""

    kind = "verifiers-v1"

    def __init__(self, module_name, module, env_args):
        import verifiers
        import verifiers.v1 as vf
        from verifiers.v1.utils.loaders import taskset_class

        self.vf = vf
        self.library_version = getattr(verifiers, "__version__", None)
        try:
            taskset_class(module_name)
        except (AttributeError, TypeError, ValueError) as exc:
            raise LoadFailure("exports", _describe(exc)) from exc
        try:
            # vf-eval's `--env.taskset.KEY value`: env args are the config's fields.
            config = vf.taskset_config_type(module_name)(**{**env_args, "id": module_name})
            taskset = vf.load_taskset(config)
            if not taskset.bounded:
                taskset = taskset.take(MAX_ROWS)
            self.tasks = list(taskset)
        except LoadFailure:
            raise
        except BaseException as exc:
            raise LoadFailure("load", "loading the taskset failed: %s" % _describe(exc)) from exc
        if not self.tasks:
            raise LoadFailure("dataset", "the taskset yields no tasks")
        first = self.tasks[0]
        self.answer_field = self._answer_field(first.data)
        self.system_prompt = first.data.system_prompt
        # Trace() would otherwise ask git for the library's commit (a subprocess) on every call.
        from verifiers.v1.trace import VersionInfo

        self.version_info = VersionInfo(version=self.library_version or "0")
        self.rewards = []
        for fn in first.hooks("reward"):
            param = inspect.signature(fn).parameters.get("runtime")
            self.rewards.append(
                {
                    "name": fn.__name__,
                    "weight": getattr(fn, "_vf_weight", 1.0),
                    "callable": callable(fn),
                    "needs_runtime": param is not None and param.default is inspect.Parameter.empty,
                    "is_async": inspect.iscoroutinefunction(fn),
                }
            )
        for judge in first.config.judges:
            self.rewards.append({"name": getattr(judge, "id", "judge"), "weight": getattr(judge, "weight", 1.0), "callable": True, "needs_runtime": True, "judge": True})
        # One task of each kind (class and config) stands for the rest when the rewards are compared.
        kinds = {}
        for task in self.tasks:
            kinds.setdefault((type(task), id(task.config)), task)
        self.config_tasks = list(kinds.values())
        self.watch = RewardWatch(self.reward_config)

    def _answer_field(self, data):
        from verifiers.v1.task import TaskData

        base = set(TaskData.model_fields)
        own = [name for name in type(data).model_fields if name not in base]
        for name in ANSWER_FIELDS:
            if name in own:
                return name
        return None

    def rows(self):
        out = []
        for task in self.tasks:
            answer = getattr(task.data, self.answer_field, None) if self.answer_field else None
            out.append({"prompt": task.data.prompt_text, "answer": None if answer is None else str(answer)})
        return out

    def reward_config(self):
        """The rewards, weights and judges `Task.score` would use now, for each
        kind of task the taskset holds: compared at every call with what was
        loaded, so an environment that changes them is caught."""
        out = []
        for task in self.config_tasks:
            entries = [(fn.__name__, _code_identity(fn), repr(getattr(fn, "_vf_weight", 1.0))) for fn in task.hooks("reward")]
            entries += [(getattr(judge, "id", "judge"), None, repr(getattr(judge, "weight", 1.0))) for judge in task.config.judges]
            out.append((type(task).__name__, tuple(entries)))
        return tuple(out)

    def _prompt_messages(self, data):
        from verifiers.v1.types import SystemMessage, UserMessage

        messages = []
        if data.system_prompt is not None:
            messages.append(SystemMessage(content=data.system_prompt))
        if isinstance(data.prompt, str):
            messages.append(UserMessage(content=data.prompt))
        elif data.prompt is not None:
            messages.extend(data.prompt)
        return messages

    async def rollout_trace(self, task, text):
        """The `Trace` a one-turn rollout of `task` leaves for scoring: the
        prompt and the reply as message nodes, the model call recorded as the
        interception server records it, the phase timings, and the stop a
        harness that exits after its reply gets (`agent_completed`). The
        task's trace `@stop`s run before the model call, as they do there."""
        from verifiers.v1.graph import MessageNode
        from verifiers.v1.session import call_hook, hook_boundary
        from verifiers.v1.state import state_cls
        from verifiers.v1.trace import ModelCall, TimeSpan
        from verifiers.v1.types import AssistantMessage, SamplingConfig, Usage

        vf = self.vf
        trace = vf.Trace(
            task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
            state=state_cls(type(task))(),
            verifiers=self.version_info,
            agent=vf.AgentInfo(config=vf.AgentConfig()),
        )
        timing = trace.timing
        timing.boot.start = time.time()
        timing.boot.end = timing.setup.start = time.time()
        timing.setup.end = timing.agent.start = time.time()
        for stop in task.hooks("stop"):
            if hook_boundary(stop, allow_trace=True) is not vf.Trace:
                continue
            if await call_hook(stop, {vf.Trace: trace}) is True:
                raise RuntimeError("the task's @stop %s ends the rollout before the model's turn" % stop.__name__)
        messages = self._prompt_messages(task.data)
        started = time.time()
        usage = Usage(prompt_tokens=_token_estimate(_text_of(messages)), completion_tokens=_token_estimate(text))
        # The nodes a tokenless turn commits: the prompt's messages in a chain,
        # then the sampled reply. (Built here rather than by the graph's commit,
        # which hashes the text and so refuses a reply that is not valid UTF-8,
        # one a model served over HTTP cannot send, but the gate tries.)
        for message in messages:
            trace.nodes.append(MessageNode(parent=len(trace.nodes) - 1 if trace.nodes else None, message=message))
        trace.nodes.append(MessageNode(parent=len(trace.nodes) - 1 if trace.nodes else None, message=AssistantMessage(content=text), sampled=True))
        node = len(trace.nodes) - 1
        trace.calls.append(
            ModelCall(
                node=node,
                model=ROLLOUT_MODEL,
                sampling=SamplingConfig(),
                endpoint="/chat/completions",
                finish_reason="stop",
                usage=usage,
                time=TimeSpan(start=started, end=time.time()),
            )
        )
        trace.stop("agent_completed")
        timing.agent.end = timing.finalize.start = time.time()
        timing.finalize.end = timing.scoring.start = time.time()
        return trace

    async def score(self, row, answer, text, reward=None, track=True):
        task = self.tasks[row]
        if self.answer_field is not None:
            gold = getattr(task.data, self.answer_field)
            update = {self.answer_field: _coerce(answer, gold)}
            if gold is not None and not _same_gold(str(answer), gold):
                for name, value in vars(task.data).items():
                    swapped = _under_gold(value, gold, answer)
                    if name != self.answer_field and swapped is not value:
                        update[name] = swapped
            task = task.with_data(**update)
        if track:
            self.watch.check("before scoring this completion")
        trace = await self.rollout_trace(task, text)
        await task.score(trace)
        trace.timing.scoring.end = time.time()
        if track:
            self.watch.check("after scoring this completion")
        if reward is None:
            return trace.reward
        value = trace.rewards.get(reward)
        if value is None:
            raise RuntimeError("reward %s was not recorded by Task.score" % reward)
        return value.score


class V0Env(object):
    """A classic verifiers 0.3 environment, scored with its rubric's functions and parser."""

    kind = "verifiers-v0"

    def __init__(self, module_name, module, env_args):
        import verifiers as vf

        self.vf = vf
        self.library_version = getattr(vf, "__version__", None)
        load = getattr(module, "load_environment", None)
        if not callable(load):
            raise LoadFailure("exports", "%s defines no load_environment()" % module_name)
        try:
            # As `vf-eval ENV -a '{"k": v}'` calls it.
            self.env = load(**env_args)
        except BaseException as exc:
            called = "load_environment(**%s)" % json.dumps(env_args) if env_args else "load_environment()"
            raise LoadFailure("load", "%s failed: %s" % (called, _describe(exc))) from exc
        dataset = None
        for getter in ("get_eval_dataset", "get_dataset"):
            try:
                dataset = getattr(self.env, getter)()
            except Exception:
                dataset = None
            if dataset is not None:
                break
        if dataset is None:
            raise LoadFailure("dataset", "the environment has no dataset")
        self.dataset = [dict(row) for row in dataset]
        self.system_prompt = getattr(self.env, "system_prompt", None)
        self.answer_field = "answer" if any("answer" in row for row in self.dataset) else None
        rubric = getattr(self.env, "rubric", None)
        if rubric is None:
            raise LoadFailure("exports", "the environment has no rubric")
        self.rewards = []
        for owner in self._flatten(rubric):
            for func, weight in zip(owner._get_reward_funcs(), owner._get_reward_weights(), strict=False):
                name = getattr(func, "__name__", repr(func))
                entry = {"name": name, "weight": weight, "callable": callable(func), "group": bool(owner._is_group_func(func))}
                # Weight-0 functions are metrics: they never reach the training signal.
                if weight == 0:
                    continue
                self.rewards.append(entry)
        self.watch = RewardWatch(self.reward_config)

    def _flatten(self, rubric):
        inner = getattr(rubric, "rubrics", None)
        if isinstance(inner, (list, tuple)):
            out = []
            for item in inner:
                out.extend(self._flatten(item))
            return out
        return [rubric]

    def rows(self):
        out = []
        for row in self.dataset:
            prompt = row.get("question")
            if not isinstance(prompt, str):
                prompt = _text_of(row.get("prompt"))
            answer = row.get(self.answer_field) if self.answer_field else None
            out.append({"prompt": prompt, "answer": None if answer is None else str(answer)})
        return out

    def reward_config(self):
        """The rubric's reward functions and weights as scoring would read them now."""
        rubric = getattr(self.env, "rubric", None)
        out = [("environment", (("rubric " + type(rubric).__name__, id(rubric), repr(getattr(self.env, "score_rollouts", True))),))]
        for owner in self._flatten(rubric):
            funcs = list(getattr(owner, "funcs", None) or [])
            weights = list(getattr(owner, "weights", None) or [])
            entries = tuple(
                (getattr(func, "__name__", repr(func)), _code_identity(func), repr(weights[index]) if index < len(weights) else "missing")
                for index, func in enumerate(funcs)
            )
            out.append((type(owner).__name__, entries))
        return tuple(out)

    async def score(self, row, answer, text, reward=None, track=True):
        """Roll the row out as training does, with a client that answers the
        model's turn with `text`, and score the state with the rubric the
        environment holds at this moment (`Environment._run_rollout_state`:
        the rollout, then `Rubric.score_rollout`, or `score_group` on a group
        of one where the rubric has group rewards). The total is the state's
        reward; one reward is its metric. A reward that raises is reported,
        not scored 0 as the library would."""
        data = dict(self.dataset[row])
        if self.answer_field is not None:
            gold = data.get(self.answer_field)
            if gold is not None and not _same_gold(str(answer), gold):
                data = {key: value if key == self.answer_field else _under_gold(value, gold, answer) for key, value in data.items()}
            data[self.answer_field] = _coerce(answer, gold)
        if track:
            self.watch.check("before scoring this completion")
        env = self.env
        client = _replay_client(text)
        sampling_args = copy.deepcopy(getattr(env, "sampling_args", None) or {})
        with _RewardErrors(self._flatten(env.rubric) + [env.rubric]) as errors:
            if getattr(env.rubric, "has_group_rewards", False) and hasattr(env, "_run_group_states"):
                state = (await env._run_group_states([data], client, ROLLOUT_MODEL, sampling_args))[0]
            elif hasattr(env, "_run_rollout_state"):
                state = await env._run_rollout_state(data, client, ROLLOUT_MODEL, sampling_args)
            else:
                state = await env.rollout(data, client, ROLLOUT_MODEL, sampling_args)
                await env.rubric.score_rollout(state)
        if track:
            self.watch.check("after scoring this completion")
        if client.turns > 1:
            raise RuntimeError("the environment asks the model for another turn after its reply; gatekept scores one-turn rollouts")
        if state.get("error") is not None:
            raise RuntimeError("the rollout failed: %s" % _describe(state["error"]))
        if errors:
            raise RuntimeError(errors[0])
        if reward is None:
            return float(state["reward"])
        metrics = state.get("metrics") or {}
        if reward not in metrics:
            raise RuntimeError("the rubric has no reward %s" % reward)
        return float(metrics[reward])


class _RewardErrors(object):
    """The reward errors a rubric logs while scoring. `Rubric.score_rollout`
    catches a reward's exception, logs it and scores 0; listening on the
    rubrics' loggers brings it back so the gate can report it. The loggers
    stop propagating meanwhile: the error is reported once, by the gate."""

    def __init__(self, rubrics):
        import logging

        self.loggers = []
        for rubric in rubrics:
            found = getattr(rubric, "logger", None)
            if isinstance(found, logging.Logger) and all(found is not seen for seen in self.loggers):
                self.loggers.append(found)
        self.errors = []
        self.handler = None
        self.propagate = []

    def __enter__(self):
        import logging

        errors = self.errors

        class Collect(logging.Handler):
            def emit(self, record):
                if record.levelno >= logging.ERROR:
                    try:
                        errors.append(record.getMessage())
                    except Exception:
                        errors.append(str(record.msg))

        self.handler = Collect()
        for found in self.loggers:
            self.propagate.append(found.propagate)
            found.propagate = False
            found.addHandler(self.handler)
        return errors

    def __exit__(self, *exc):
        for found, propagate in zip(self.loggers, self.propagate, strict=False):
            found.removeHandler(self.handler)
            found.propagate = propagate
        return False


def _replay_client(text):
    """A verifiers client whose model answers the rollout's first request
    with `text` and fails any later one (a multi-turn environment would
    otherwise be answered the same reply forever); it counts the requests.
    Its response carries what a chat completion does (an id, the model,
    usage, a stop reason)."""
    from verifiers.clients import Client
    from verifiers.types import Response, ResponseMessage, Usage

    class ReplayClient(Client):
        def __init__(self):
            Client.__init__(self, None)
            self.turns = 0

        def setup_client(self, config):
            return None

        async def to_native_tool(self, tool):
            return tool

        async def to_native_prompt(self, messages):
            return messages, {}

        async def get_native_response(self, prompt, model, sampling_args, tools=None, **kwargs):
            self.turns += 1
            if self.turns > 1:
                # The library records this as the rollout's error, which ends it.
                raise RuntimeError("a rollout here has one model turn")
            prompt_tokens = _token_estimate(_text_of(prompt))
            completion_tokens = _token_estimate(text)
            return Response(
                id="chatcmpl-%s" % uuid.uuid4().hex[:24],
                created=int(time.time()),
                model=model,
                usage=Usage(prompt_tokens=prompt_tokens, reasoning_tokens=0, completion_tokens=completion_tokens, total_tokens=prompt_tokens + completion_tokens),
                message=ResponseMessage(role="assistant", content=text, finish_reason="stop", is_truncated=False),
            )

        async def raise_from_native_response(self, response):
            return None

        async def from_native_response(self, response):
            return response

        async def close(self):
            return None

    return ReplayClient()


def load_options(raw=None):
    """The load settings: `env_args` (keyword arguments for the loader),
    `datasets` (name -> local file), `hf_datasets_cache` and `hf_hub_cache`
    (the user's cache directories, read-only)."""
    if raw is None:
        raw = _LOAD_CONFIG
    return {
        "env_args": dict(raw.get("env_args") or {}),
        "datasets": dict(raw.get("datasets") or {}),
        "hf_datasets_cache": raw.get("hf_datasets_cache"),
        "hf_hub_cache": raw.get("hf_hub_cache"),
    }


def _shadow_cache(readonly):
    """A writable copy of a read-only datasets cache made of links: `datasets`
    takes a lock file beside every prepared dataset and writes `.map()`
    results next to its Arrow files, so it cannot read a cache it may not
    write. Directories are made anew, files are symbolic links into the
    user's cache; downloads and locks are left out (loading offline reads
    only the prepared Arrow files)."""
    import tempfile

    shadow = tempfile.mkdtemp(prefix="hf-datasets-")
    for root, dirs, files in os.walk(readonly):
        relative = os.path.relpath(root, readonly)
        if relative == ".":
            dirs[:] = [name for name in dirs if name != "downloads"]
        target = os.path.join(shadow, relative)
        os.makedirs(target, exist_ok=True)
        for name in files:
            if not name.endswith(".lock"):
                os.symlink(os.path.join(root, name), os.path.join(target, name))
    return shadow


def _split_of_file(split):
    """The split to read from a local file standing for a named dataset: it
    has one, `train`, and stands for whichever the environment asks for
    (`test[:100]` reads `train[:100]`)."""
    if not isinstance(split, str):
        return split
    bracket = split.find("[")
    return "train" if bracket < 0 else "train" + split[bracket:]


def _serve_local_datasets(files):
    """Serve `datasets.load_dataset(NAME, ...)` from a local file for each
    NAME given, whatever configuration or split it asks for; any other name
    goes to the real function. Patched before the environment (or verifiers)
    imports, so `from datasets import load_dataset` binds the patched one."""
    try:
        import datasets
    except ImportError as exc:
        raise LoadFailure("load", "--local-dataset needs the datasets library in this Python: %s" % _describe(exc), "datasets") from exc
    import tempfile

    original = datasets.load_dataset
    # Reading a local file writes Arrow files into a cache: a private, writable one.
    cache_dir = tempfile.mkdtemp(prefix="local-datasets-")

    class AnySplit(datasets.DatasetDict):
        """Every split name reads the file: an environment asking for all splits then picking `test` gets it."""

        def __missing__(self, key):
            return dict.__getitem__(self, "train")

    def load_dataset(path, *args, **kwargs):
        file = files.get(path) if isinstance(path, str) else None
        if file is None:
            return original(path, *args, **kwargs)
        builder = DATASET_BUILDERS[os.path.splitext(file)[1].lower()]
        split = _split_of_file(kwargs.get("split"))
        loaded = original(builder, data_files={"train": file}, split=split, cache_dir=cache_dir)
        return AnySplit(loaded) if isinstance(loaded, datasets.DatasetDict) else loaded

    load_dataset.__wrapped__ = original
    datasets.load_dataset = load_dataset


def _apply_load(load):
    """Set up what load_options names before anything imports `datasets`,
    which reads its cache settings once, at import."""
    if load["hf_hub_cache"]:
        os.environ["HF_HUB_CACHE"] = load["hf_hub_cache"]
    if load["hf_datasets_cache"]:
        os.environ["HF_DATASETS_CACHE"] = _shadow_cache(load["hf_datasets_cache"])
    if load["datasets"]:
        _serve_local_datasets(load["datasets"])


def open_env(spec, load=None):
    load = load_options(load)
    _apply_load(load)
    module_name, directory = _module_for(spec)
    module = _import(module_name, directory)
    if callable(getattr(module, "load_environment", None)):
        try:
            import verifiers  # noqa: F401
        except ImportError as exc:
            raise LoadFailure("import", "verifiers is not installed: %s" % _describe(exc), "verifiers") from exc
        return V0Env(module_name, module, load["env_args"]), module
    try:
        import verifiers.v1  # noqa: F401
    except ImportError:
        raise LoadFailure(
            "exports",
            "%s defines no load_environment() and verifiers 0.4 (verifiers.v1) is not installed" % module_name,
        ) from None
    return V1Env(module_name, module, load["env_args"]), module


def kind_hint(spec):
    """The library an environment that failed to load was written for, read from its source without running it."""
    import importlib.util

    try:
        module_name, directory = _module_for(spec)
        if directory is not None and directory not in sys.path:
            sys.path.insert(0, directory)
        found = importlib.util.find_spec(module_name)
    except Exception:
        return None
    if found is None or not found.origin or not os.path.isfile(found.origin):
        return None
    paths = [found.origin]
    for location in found.submodule_search_locations or []:
        paths.extend(os.path.join(location, name) for name in sorted(os.listdir(location)) if name.endswith(".py"))
    text = ""
    for path in paths[:50]:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text += handle.read(200000)
        except OSError:
            continue
    if "def load_environment" in text:
        return "verifiers-v0"
    if "Taskset" in text:
        return "verifiers-v1"
    return None


def inspect_env(spec):
    try:
        env, module = open_env(spec)
    except LoadFailure as failure:
        return {
            "ok": False,
            "stage": failure.stage,
            "error": failure.message,
            "missing_module": failure.missing_module,
            "kind": kind_hint(spec),
        }
    except BaseException as exc:
        return {
            "ok": False,
            "stage": "load",
            "error": _describe(exc),
            "missing_module": None,
            "kind": kind_hint(spec),
            "traceback": traceback.format_exc()[-2000:],
        }
    rows = env.rows()
    for reward in env.rewards:
        weight = reward.get("weight")
        reward["finite_weight"] = isinstance(weight, (int, float)) and math.isfinite(float(weight))
        if not reward["finite_weight"]:
            reward["weight"] = None if weight is None else str(weight)
    return {
        "ok": True,
        "kind": env.kind,
        "library_version": env.library_version,
        "module": module.__name__,
        "module_file": getattr(module, "__file__", None),
        "answer_field": env.answer_field,
        "system_prompt": env.system_prompt if isinstance(env.system_prompt, str) else None,
        "rows": rows,
        "rewards": env.rewards,
    }


# The result goes back on this descriptor, a pipe gatekept reads: never a
# file in a directory the environment's code could write (a FIFO there would
# block the reader, a link would point it at a host file).
RESULT_FD = 4


def main(argv):
    if len(argv) not in (2, 3) or argv[0] != "inspect":
        sys.stderr.write("usage: env_loader.py inspect SPEC [MEMORY_MB]  (result on fd 4)\n")
        return 2

    # Beside this script; imported here, not at the top, as the gate's shim
    # imports this module from a copy of it alone.
    from gatekept_process import PR_SET_CHILD_SUBREAPER, close_inherited, limit_memory, prctl, sweep_descendants

    # Descriptors the caller's shell left open reach every child: only the
    # standard streams and the result pipe stay before the environment's code runs.
    close_inherited(RESULT_FD)
    global _LOAD_CONFIG
    _LOAD_CONFIG = json.loads(sys.stdin.read() or "{}")
    result_pipe = os.fdopen(os.dup(RESULT_FD), "w", encoding="utf-8")
    os.close(RESULT_FD)
    memory_mb = int(argv[2]) if len(argv) == 3 else 0
    limit_memory(memory_mb)
    # The subreaper of what the environment starts: a daemon that double-forks
    # at import is re-parented here, not to init, so the sweep below finds it
    # even without the sandbox's PID namespace.
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    result = inspect_env(argv[1])
    # Nothing the environment started outlives the loader.
    sweep_descendants()
    result_pipe.write(json.dumps(result, default=str) + "\n")
    result_pipe.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
