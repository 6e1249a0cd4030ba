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
is scored by building a `Trace` around it and awaiting `Task.score`, so the
rewards see exactly what they see in training. A classic 0.3 environment is
loaded with `load_environment()` and scored with its rubric's own functions,
keyword objects and parser; unlike `Rubric.score_rollout`, an exception is
raised instead of being hidden as a zero, so the gate can report it.
"""

import inspect
import json
import math
import os
import sys
import traceback

# Loading must work offline: nothing may reach a hub.
for _name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(_name, "1")

# How to load the environment beyond its id (JSON, see load_options): set by
# `audit --env` for the inspecting process; the gate's shim passes its own.
LOAD_VARIABLE = "GATEKEPT_ENV_LOAD"
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
    return "%s: %s" % (type(exc).__name__, exc)


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

    async def score(self, row, answer, text, reward=None):
        vf = self.vf
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
        trace = vf.Trace(
            task=vf.TraceTask(type=type(task).__name__, data=task.data),
            verifiers=self.version_info,
            agent=vf.AgentInfo(config=vf.AgentConfig()),
            nodes=[vf.MessageNode(message=vf.AssistantMessage(content=text), sampled=True)],
        )
        await task.score(trace)
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
        self.funcs = []
        self.rewards = []
        for owner in self._flatten(rubric):
            for func, weight in zip(owner._get_reward_funcs(), owner._get_reward_weights(), strict=False):
                name = getattr(func, "__name__", repr(func))
                entry = {"name": name, "weight": weight, "callable": callable(func), "group": bool(owner._is_group_func(func))}
                # Weight-0 functions are metrics: they never reach the training signal.
                if weight == 0:
                    continue
                self.rewards.append(entry)
                self.funcs.append((name, weight, func, owner))

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

    async def score(self, row, answer, text, reward=None):
        vf = self.vf
        data = dict(self.dataset[row])
        if self.answer_field is not None:
            gold = data.get(self.answer_field)
            if gold is not None and not _same_gold(str(answer), gold):
                data = {key: value if key == self.answer_field else _under_gold(value, gold, answer) for key, value in data.items()}
            data[self.answer_field] = _coerce(answer, gold)
        try:
            from verifiers.types import AssistantMessage

            completion = [AssistantMessage(content=text)]
        except ImportError:
            completion = [{"role": "assistant", "content": text}]
        state = vf.State(input=data)
        state["completion"] = completion
        state["trajectory"] = []
        total = 0.0
        for name, weight, func, owner in self.funcs:
            if reward is not None and name != reward:
                continue
            objects = owner.score_objects(state)
            params = inspect.signature(func).parameters
            if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
                objects = {key: value for key, value in objects.items() if key in params}
            value = func(**objects)
            if inspect.isawaitable(value):
                value = await value
            score = float(value)
            if reward is not None:
                return score
            total += score * weight
        if reward is not None:
            raise RuntimeError("the rubric has no reward %s" % reward)
        return total


def load_options(raw=None):
    """The load settings: `env_args` (keyword arguments for the loader),
    `datasets` (name -> local file), `hf_datasets_cache` and `hf_hub_cache`
    (the user's cache directories, read-only)."""
    if raw is None:
        text = os.environ.get(LOAD_VARIABLE) or "{}"
        raw = json.loads(text)
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


def _limit_memory(megabytes):
    if megabytes <= 0:
        return
    try:
        import resource

        limit = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass


def main(argv):
    if len(argv) not in (3, 4) or argv[0] != "inspect":
        sys.stderr.write("usage: env_loader.py inspect SPEC OUT.json [MEMORY_MB]\n")
        return 2
    _limit_memory(int(argv[3]) if len(argv) == 4 else 0)
    result = inspect_env(argv[1])
    with open(argv[2], "w", encoding="utf-8") as handle:
        json.dump(result, handle, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
