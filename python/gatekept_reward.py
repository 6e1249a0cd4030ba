"""Call a reward function exactly the way the gatekept gate calls it.

gatekept's harness imports this module to call the verifier under audit, and
every package gatekept emits carries a byte-for-byte copy next to the audited
verifier, so the reward in training receives what the verifier received while
it was audited. The convention:
- one keyword pool: completion, answer, prompt, info, state, task, parser;
- in "messages" mode completion is [{"role": "assistant", "content": reply}]
  and prompt is [{"role": "user", "content": question}], both plain dicts
  ([] without a question); in "string" mode they are the reply and the
  question ("" without one) themselves;
- info is a deep copy of the row's info ({} if none), state is
  {"answer": answer}, task is "default", parser is a minimal Parser
  (parse, parse_answer);
- a function gets the pool names its signature asks for (positional-only
  ones by position), or all of them if it takes **kwargs;
- sync or async; the reward is float(value), as verifiers records it (the
  gate rejects a verifier that returns NaN or an infinity; a package passes
  one on as verifiers would). A value that is not a number (None, a string,
  a list) is an error.
Errors are raised to the caller, never turned into a reward here.
"""

from __future__ import annotations

import copy
import math
import numbers
import types
from collections.abc import Awaitable, Mapping

# Names for annotations only: importing typing (and inspect, below) costs
# every worker's start a visible share of a short audit.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

POOL_NAMES = ("completion", "answer", "prompt", "info", "state", "task", "parser")
# Names a group-level (batched) reward asks for; one completion per call cannot fill them.
GROUP_NAMES = frozenset(["completions", "answers", "states", "prompts", "tasks", "infos"])
COMPLETION_FORMATS = ("messages", "string")


class Parser(object):
    """The least a verifiers-style reward expects from `parser`: the reply text, unparsed."""

    def parse(self, text: Any) -> Any:
        return text

    def parse_answer(self, completion: Any) -> Any:
        if isinstance(completion, str):
            return completion
        if isinstance(completion, (list, tuple)):
            for message in reversed(completion):
                try:
                    if message.get("role") == "assistant":
                        return message.get("content")
                except AttributeError:
                    continue
            return None
        return completion

    def __repr__(self) -> str:
        return "Parser()"


PARSER = Parser()


def keyword_pool(
    completion_format: str,
    text: str,
    answer: str,
    question: "str | None",
    info: "Mapping[str, Any] | None",
) -> "dict[str, Any]":
    """Fresh objects on every call, so a verifier that mutates its arguments cannot leak state."""
    if completion_format == "messages":
        completion: Any = [{"role": "assistant", "content": text}]
        prompt: Any = [] if question is None else [{"role": "user", "content": question}]
    elif completion_format == "string":
        completion = text
        prompt = "" if question is None else question
    else:
        raise ValueError("unknown completion format %r" % (completion_format,))
    return {
        "completion": completion,
        "answer": answer,
        "prompt": prompt,
        "info": copy.deepcopy(dict(info)) if isinstance(info, Mapping) and info else {},
        "state": {"answer": answer},
        "task": "default",
        "parser": PARSER,
    }


_POSITIONAL_ONLY = "positional-only"
_ORDINARY = "ordinary"
_VAR_POSITIONAL = "*args"
_VAR_KEYWORD = "**kwargs"
_EMPTY = object()
_CO_VARARGS = 0x04
_CO_VARKEYWORDS = 0x08


def parameters(fn: Callable[..., Any]) -> "list[tuple[str, str, Any]]":
    """(name, kind, default or _EMPTY) per parameter, in inspect.signature's order.

    A plain function (nothing set on it: no functools.wraps, no __signature__)
    is read from its code object, as inspect reads it; anything else is left
    to inspect, which is imported only then.
    """
    if type(fn) is types.FunctionType and not fn.__dict__:
        code = fn.__code__
        names = code.co_varnames
        positional = code.co_argcount
        keyword_only = code.co_kwonlyargcount
        defaults = fn.__defaults__ or ()
        kwdefaults = fn.__kwdefaults__ or {}
        first_default = positional - len(defaults)
        found = []
        for index in range(positional):
            kind = _POSITIONAL_ONLY if index < code.co_posonlyargcount else _ORDINARY
            found.append((names[index], kind, defaults[index - first_default] if index >= first_default else _EMPTY))
        rest = positional + keyword_only
        if code.co_flags & _CO_VARARGS:
            found.append((names[rest], _VAR_POSITIONAL, _EMPTY))
            rest += 1
        for name in names[positional : positional + keyword_only]:
            found.append((name, _ORDINARY, kwdefaults.get(name, _EMPTY)))
        if code.co_flags & _CO_VARKEYWORDS:
            found.append((names[rest], _VAR_KEYWORD, _EMPTY))
        return found
    import inspect

    kinds = {
        inspect.Parameter.POSITIONAL_ONLY: _POSITIONAL_ONLY,
        inspect.Parameter.VAR_POSITIONAL: _VAR_POSITIONAL,
        inspect.Parameter.VAR_KEYWORD: _VAR_KEYWORD,
    }
    return [
        (param.name, kinds.get(param.kind, _ORDINARY), _EMPTY if param.default is param.empty else param.default)
        for param in inspect.signature(fn).parameters.values()
    ]


def is_awaitable(value: Any) -> bool:
    """inspect.isawaitable, without importing inspect."""
    return (
        isinstance(value, types.CoroutineType)
        or (isinstance(value, types.GeneratorType) and bool(value.gi_code.co_flags & 0x100))
        or isinstance(value, Awaitable)
    )


def build_plan(fn: Callable[..., Any]) -> "tuple[dict[str, Any] | None, list[str]]":
    """Decide once how each call fills the signature from the pool.

    Returns (plan, []) or (None, the required parameters the pool cannot fill).
    A plan's "positional" holds (True, pool name) or (False, default value).
    """
    params = []
    positional: "list[tuple[bool, Any]]" = []
    keywords: "list[str]" = []
    pending_defaults: "list[tuple[bool, Any]]" = []
    missing: "list[str]" = []
    var_kwargs = False
    for name, kind, default in parameters(fn):
        if kind == _VAR_KEYWORD:
            var_kwargs = True
            continue
        if kind == _VAR_POSITIONAL:
            continue
        params.append(name)
        available = name in POOL_NAMES
        if kind == _POSITIONAL_ONLY:
            if available:
                positional.extend(pending_defaults)
                pending_defaults = []
                positional.append((True, name))
            elif default is not _EMPTY:
                pending_defaults.append((False, default))
            else:
                missing.append(name)
        elif available:
            keywords.append(name)
        elif default is _EMPTY:
            missing.append(name)
    if missing:
        return None, missing
    if var_kwargs:
        bound = set(name for is_pool, name in positional if is_pool)
        bound.update(keywords)
        keywords.extend(name for name in POOL_NAMES if name not in bound)
    return {"params": params, "var_kwargs": var_kwargs, "positional": positional, "keywords": keywords}, []


def call_arguments(plan: "Mapping[str, Any]", pool: "Mapping[str, Any]") -> "tuple[list[Any], dict[str, Any]]":
    args = [pool[item] if is_pool else item for is_pool, item in plan["positional"]]
    return args, {name: pool[name] for name in plan["keywords"]}


_FAST_NUMBERS = (float, int)


def normalise(value: Any) -> "tuple[float | None, str, str | None]":
    """(reward, type name, non-finite tag) for what a reward function returned.

    The reward is float(value), the conversion verifiers applies when it
    records a reward, for every value that is a number (bools, ints, floats,
    numpy scalars, Decimal, Fraction). Strings, bytes, complex numbers, None
    and containers are not numbers: (None, name, None). A NaN or an infinity,
    including an int too large for a float, gives (None, name, "nan" | "inf" | "-inf").
    """
    kind = type(value)
    name = kind.__name__
    # A Decimal has __float__: the last test takes it.
    if kind in _FAST_NUMBERS or isinstance(value, numbers.Real) or (
        hasattr(kind, "__float__") and not isinstance(value, (str, bytes, complex))
    ):
        try:
            number = float(value)
        except OverflowError:
            try:
                negative = value < 0
            except BaseException:
                negative = False
            return None, name, "-inf" if negative else "inf"
        except Exception:
            return None, name, None
        if number != number:
            return None, name, "nan"
        if number in (math.inf, -math.inf):
            return None, name, "inf" if number > 0 else "-inf"
        return number, name, None
    return None, name, None


_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def to_reward(value: Any) -> float:
    """float(value), as verifiers records a reward (NaN and infinities included);
    an error naming the type for a value that is not a number.

    float() is taken once, in normalise, exactly as the gate takes it: a
    value whose __float__ answers differently on a second call must not
    score one way in the audit and another in the package."""
    reward, name, nonfinite = normalise(value)
    if reward is not None:
        return reward
    if nonfinite is None:
        raise TypeError("the verifier returned %s, not a number" % name)
    return _NON_FINITE[nonfinite]


def _prepare(fn: Callable[..., Any], completion_format: str, row: "Mapping[str, Any]") -> Any:
    plan, missing = build_plan(fn)
    if plan is None:
        raise TypeError("the verifier requires %s, which the gate never passes" % ", ".join(missing))
    args, kwargs = call_arguments(plan, keyword_pool(completion_format, **row))
    return fn(*args, **kwargs)


async def score_async(fn: Callable[..., Any], completion_format: str, **row: Any) -> float:
    """Score one reply; row is text, answer, question and info."""
    result = _prepare(fn, completion_format, row)
    if is_awaitable(result):
        result = await result
    return to_reward(result)


def score(fn: Callable[..., Any], completion_format: str, **row: Any) -> float:
    """score_async for synchronous callers, also from inside a running event loop."""
    result = _prepare(fn, completion_format, row)
    if is_awaitable(result):
        result = _finish(result)
    return to_reward(result)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _finish(awaitable: Any) -> Any:
    # Imported here: the gate's harness loads this module on every start, and
    # most verifiers are synchronous.
    import asyncio
    import threading

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(awaitable))
    # This thread already runs a loop it cannot block on; finish on a private one.
    outcome: "dict[str, Any]" = {}

    def run() -> None:
        try:
            outcome["value"] = asyncio.run(_awaited(awaitable))
        except BaseException as error:  # re-raised in the caller's thread
            outcome["error"] = error

    worker = threading.Thread(target=run, name="gatekept-verifier")
    worker.start()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
