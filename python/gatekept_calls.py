"""One call of the verifier (see _evaluate): its arguments filled from the
request, its result, error and side effects written as one reply line; the
warm-up calls made before the first audited one; and the watch on time
limits of the verifier's own."""

import os
import signal
import sys

import gatekept_reward as _reward
from gatekept_containment import _housekeeping
from gatekept_isolation import _arm_call, _on_timer
from gatekept_output import _REGION_HEADER, _STDERR, _STDOUT, WARMING
from gatekept_state import (
    MESSAGE_LIMIT,
    REPLY_FD,
    S,
    _clip,
    _encode_json,
    _ExitAttempt,
    _perf_counter,
    _process_time,
    _protocol_error,
    _record,
    _safe_repr,
    _safe_str,
    _Timeout,
)

# Inputs of the warm-up calls: an honest reply in common layouts. What the
# verifier does once per process (lazy imports, a pool's first processes,
# compiled patterns) happens here, not in the first audited call, where a
# time limit of the verifier's own would make the same completion score
# differently in a fresh process.
_WARM_UP = (
    ("The product is 42.\n\\boxed{42}", "42", "What is 6 times 7?"),
    ("<answer>42</answer>", "42", "What is 6 times 7?"),
    ("6 * 7 = 42\n#### 42", "42", "What is 6 times 7?"),
)


def _warm_up():
    """Call the verifier on _WARM_UP before the first audited call, within
    one call timeout in all; their results and side effects are dropped, as
    the import's are. A warm-up that kills the worker or hangs past every
    timer costs no audit: the supervisor sees WARMING in the reply region
    (free until the ready reply) and starts the worker again without one."""
    budget = S.call_timeout
    if S.region is not None:
        S.region[0:_REGION_HEADER] = WARMING
    # Before the ready reply the supervisor takes the first line on the reply
    # pipe for it: what the verifier writes there while it warms up goes
    # nowhere (a forgery in a later call is caught as one).
    saved = os.dup(REPLY_FD)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, REPLY_FD, inheritable=False)
    os.close(null)
    try:
        _warm_up_calls(budget)
    finally:
        os.dup2(saved, REPLY_FD, inheritable=False)
        os.close(saved)
        if S.region is not None:
            S.region[0:_REGION_HEADER] = bytes(_REGION_HEADER)


def _warm_up_calls(budget):
    started = _perf_counter()
    call_timeout = S.call_timeout
    # A call in which a time limit of the verifier's own expired (a lazy
    # import cut short by its parse timeout, say) is made again: warm means
    # the calls run as they will from now on.
    queue = list(_WARM_UP)
    index = 0
    try:
        while queue:
            text, answer, prompt = queue[0]
            # Each call gets what is left of the one budget, so that the
            # whole warm-up ends within it.
            S.call_timeout = budget - (_perf_counter() - started)
            if S.call_timeout <= 0.001:
                break
            index += 1
            try:
                _evaluate([-index, text, answer, prompt, None])
            except BaseException:
                pass
            if S.timed_out:
                break
            if not S.own_timer:
                queue.pop(0)
    finally:
        S.call_timeout = call_timeout
    S.effects = []
    S.timed_out = False
    # How many warm-up calls ran depends on the clock; the sweeps that
    # follow (see _sweep_due) must not.
    S.calls_since_sweep = 0


_TIMER_SIGNALS = frozenset((int(signal.SIGALRM), int(signal.SIGVTALRM), int(signal.SIGPROF)))
_WATCHED = set()


def _mark_own_timer():
    S.own_timer = True


def _watch_own_timers():
    """Notice when a time limit of the verifier's own expires in a call: a
    handler it set for SIGALRM, SIGVTALRM or SIGPROF runs, a future's result
    or a thread's join runs out of time. Such a call may score differently on
    a slower moment; gatekept runs it again alone before it counts, and tells
    a reward that changed that way apart from one that changes by itself."""
    if "signal" not in _WATCHED:
        _WATCHED.add("signal")
        original_signal = signal.signal
        original_getsignal = signal.getsignal

        def watched_signal(signalnum, handler):
            if int(signalnum) in _TIMER_SIGNALS and callable(handler) and handler is not _on_timer:
                inner = handler

                def handler(signum, frame):
                    _mark_own_timer()
                    return inner(signum, frame)

                handler.gatekept_inner = inner
            previous = original_signal(signalnum, handler)
            return getattr(previous, "gatekept_inner", previous)

        def watched_getsignal(signalnum):
            current = original_getsignal(signalnum)
            return getattr(current, "gatekept_inner", current)

        signal.signal = watched_signal
        signal.getsignal = watched_getsignal
    # Like the pools below, watched once the verifier (or its warm-up) has
    # imported it: importing it here would cost every start a few ms.
    threading = sys.modules.get("threading")
    if threading is not None and "thread" not in _WATCHED:
        _WATCHED.add("thread")
        join = threading.Thread.join

        def watched_join(self, timeout=None):
            join(self, timeout)
            if timeout is not None and self.is_alive():
                _mark_own_timer()

        threading.Thread.join = watched_join
    futures = sys.modules.get("concurrent.futures._base")
    if futures is not None and "futures" not in _WATCHED:
        _WATCHED.add("futures")
        futures.Future.result = _watched_wait(futures.Future.result, futures.TimeoutError)
    pool = sys.modules.get("multiprocessing.pool")
    if pool is not None and "pool" not in _WATCHED:
        _WATCHED.add("pool")
        pool.ApplyResult.get = _watched_wait(pool.ApplyResult.get, sys.modules["multiprocessing"].TimeoutError)


def _watched_wait(wait, expired):
    """`wait` (a method taking a timeout), noting when it runs out of time."""

    def watched(self, timeout=None):
        try:
            return wait(self, timeout)
        except expired:
            _mark_own_timer()
            raise

    return watched


def _event_loop():
    if S.loop is None:
        import asyncio

        S.loop = asyncio.new_event_loop()
    return S.loop


def _drop_event_loop():
    loop = S.loop
    S.loop = None
    if loop is None:
        return
    try:
        import asyncio

        for task in asyncio.all_tasks(loop):
            task.cancel()
        loop.close()
    except BaseException:
        pass


def _await(value):
    was_active = S.active
    S.active = False
    try:
        loop = _event_loop()
    finally:
        S.active = was_active
    return loop.run_until_complete(value)


def _is_awaitable(value):
    return hasattr(type(value), "__await__") or _reward.is_awaitable(value)


_PLAIN_RESULTS = (float, int, bool, type(None), str)
_normalise = _reward.normalise


def _keyword_pool(text, answer, prompt, info):
    if not isinstance(text, str):
        text = "" if text is None else _safe_str(text)
    if not isinstance(answer, str):
        answer = "" if answer is None else _safe_str(answer)
    if prompt is not None and not isinstance(prompt, str):
        prompt = _safe_str(prompt)
    if not isinstance(info, dict):
        info = None
    return _reward.keyword_pool(S.completion_format, text, answer, prompt, info)


def _call_form(plan):
    """The positional arguments' sources as a tuple, and whether the pool
    itself can be passed as the keyword arguments: when the plan asks for
    every name in the pool, in the pool's order, the dict built from it per
    call would be a copy of it."""
    positional = tuple(plan["positional"])
    keywords = tuple(plan["keywords"])
    whole_pool = not positional and keywords == tuple(_keyword_pool("", "", None, None))
    return positional, keywords, whole_pool


# Long completions, as gatekept's LongTextCodec (src/runtime/python-session.ts)
# remembers them: numbered in the order they were sent, the last 256 kept.
LONG_TEXTS_KEPT = 256
_LONG_TEXTS = {}
_LONG_COUNT = [0]


def _completion_text(field):
    """["k", text]: remember text; [number, start, middle, end]: the remembered
    text of that number's first `start` characters, then middle, then its last
    `end`; [number, head, start, stop, tail]: head, that text's characters from
    start to stop, then tail (remembered in turn)."""
    if len(field) == 2 and field[0] == "k" and type(field[1]) is str:
        text = field[1]
    elif len(field) == 5 and type(field[1]) is str and type(field[4]) is str:
        number, start, stop = field[0], field[2], field[3]
        if type(number) is not int or type(start) is not int or type(stop) is not int or not 0 <= start <= stop:
            raise ValueError("bad offsets")
        base = _LONG_TEXTS[number]
        if stop > len(base):
            raise ValueError("offsets past the remembered text")
        text = field[1] + base[start:stop] + field[4]
    elif len(field) == 4 and type(field[2]) is str:
        number, start, end = field[0], field[1], field[3]
        if type(number) is not int or type(start) is not int or type(end) is not int or min(start, end) < 0:
            raise ValueError("bad offsets")
        base = _LONG_TEXTS[number]
        if start + end > len(base):
            raise ValueError("offsets past the remembered text")
        text = base[:start] + field[2] + base[len(base) - end :]
    else:
        raise ValueError("unknown form")
    number = _LONG_COUNT[0]
    _LONG_COUNT[0] = number + 1
    _LONG_TEXTS[number] = text
    _LONG_TEXTS.pop(number - LONG_TEXTS_KEPT, None)
    return text


# JSON of the reward type names seen so far: the common reply is formatted
# directly, without a JSON encoder, and this is the one string in it.
_TYPE_JSON = {}


# The reply's two durations are written with three decimals ("%.3f"), which
# JSON reads as the same number round(ms, 3) is: both round the exact binary
# value to three decimals, and the text is read back as the float nearest it.
# Beyond this bound "%.3f" would write digits past what a double holds.
_MS_JSON_LIMIT = 1e11


def _encode_result(request_id, status, reward, reward_type, nonfinite, error, effects, ms, cpu_ms, own_timer, values=None):
    """One reply line: [id, status, reward, type, non-finite, error, side effects,
    ms, cpu ms, own timer], the error [type, message] or, for a failure in an
    environment's library, [type, message, [path, line, function]], from the call's duration and the CPU time it used
    in this process, in unrounded milliseconds, and whether a time limit of
    the verifier's own expired in it; then, only where the call scored every
    reward of an environment (see _reward_values), their values."""
    if (
        status == "ok"
        and type(reward) is float
        and not effects
        and type(request_id) is int
        and values is None
        and 0.0 <= ms < _MS_JSON_LIMIT
        and 0.0 <= cpu_ms < _MS_JSON_LIMIT
    ):
        name = _TYPE_JSON.get(reward_type)
        if name is None:
            name = _encode_json(reward_type)
            if len(_TYPE_JSON) < 64:
                _TYPE_JSON[reward_type] = name
        # repr() of a finite float is valid JSON; the reward is finite here.
        return (
            '[%d,"ok",%r,%s,null,null,[],%.3f,%.3f,%s]\n'
            % (request_id, reward, name, ms, cpu_ms, "true" if own_timer else "false")
        ).encode("ascii")
    reply = [
        request_id,
        status,
        reward,
        reward_type,
        nonfinite,
        None if error is None else [error["type"], error["message"]] + ([error["library"]] if "library" in error else []),
        [[effect["kind"], effect["detail"]] for effect in effects],
        round(ms, 3),
        round(cpu_ms, 3),
        bool(own_timer),
    ]
    if values is not None:
        reply.append(values)
    return _encode_json(reply).encode("ascii") + b"\n"


def _library_failure(exc):
    """The error of a call `gatekept audit --env`'s shim found failing in the
    library's own code (env_common.LibraryFailed): the original exception's
    type and message, and the library frame [path, line, function]; else None.
    Its args are read through BaseException's own descriptor, so no code of
    the exception's class runs. A verifier that raised one of its own would
    only have its failure named the environment's: a refusal either way."""
    if type(exc).__name__ != "LibraryFailed":
        return None
    try:
        args = BaseException.args.__get__(exc)
    except BaseException:
        return None
    if len(args) != 3 or type(args[0]) is not str or type(args[1]) is not str or type(args[2]) is not tuple:
        return None
    frame = args[2]
    if len(frame) != 3 or type(frame[0]) is not str or type(frame[1]) is not int or type(frame[2]) is not str:
        return None
    return {
        "type": _clip(args[0], MESSAGE_LIMIT),
        "message": _clip(args[1], MESSAGE_LIMIT),
        "library": [_clip(frame[0], MESSAGE_LIMIT), frame[1], _clip(frame[2], MESSAGE_LIMIT)],
    }


def _take_values(fn):
    """The rewards' values the call left on the function it called, as
    `gatekept_values` (see env_shim.reward), removed so no later call reads them."""
    attributes = getattr(fn, "__dict__", None)
    if type(attributes) is not dict:
        return None
    return attributes.pop("gatekept_values", None)


def _reward_values(values):
    """Each reward's value as the reply carries it: [reward, type, non-finite]
    as normalise reads a returned value, or [type, message] for a reward the
    call could not read (an exception in its place). None unless the call left
    a dict of them (see _take_values); a name that is not text is dropped."""
    if type(values) is not dict:
        return None
    out = {}
    for name, value in values.items():
        if type(name) is not str:
            continue
        if isinstance(value, BaseException):
            out[name] = [type(value).__name__, _clip(_safe_str(value), MESSAGE_LIMIT)]
        else:
            out[name] = list(_normalise(value))
    return out


def _evaluate(request):
    """request: [id, completion, answer, prompt, info]."""
    if len(request) != 5:
        return _protocol_error("an eval request has 5 fields, not %d" % len(request))
    request_id, text, answer, prompt, info = request
    if type(text) is list:
        try:
            text = _completion_text(text)
        except (KeyError, TypeError, ValueError):
            return _protocol_error("malformed long completion in request %r" % (request_id,))
    pool = _keyword_pool(text, answer, prompt, info)
    keywords = S.keywords
    if S.whole_pool and len(pool) == len(keywords):
        args = ()
        kwargs = pool
    else:
        args = [pool[item] if is_pool else item for is_pool, item in S.positional]
        kwargs = {}
        for name in keywords:
            kwargs[name] = pool[name]

    S.effects = []
    S.exit_detail = None
    S.forks = 0
    S.own_timer = False
    if _STDOUT.count or _STDOUT._forwarded:
        _STDOUT.reset()
    if _STDERR.count or _STDERR._forwarded:
        _STDERR.reset()
    status = "ok"
    reward = None
    reward_type = ""
    nonfinite = None
    error = None
    values = None
    # Only `audit --env`'s requests ask for every reward's value (see env_shim.reward).
    wants_values = type(info) is dict and "gatekept_rewards" in info
    used_loop = False

    started = _perf_counter()
    cpu_started = _process_time()
    try:
        _arm_call(S.call_timeout, started, cpu_started)
        S.active = True
        try:
            value = S.fn(*args, **kwargs)
            if type(value) not in _PLAIN_RESULTS and _is_awaitable(value):
                used_loop = True
                value = _await(value)
            reward, reward_type, nonfinite = _normalise(value)
            if wants_values:
                # Read while the call is still timed and guarded: the attribute
                # and float() of a reward's value may run the verifier's code.
                values = _reward_values(_take_values(S.fn))
        finally:
            # The timers stay set: the next call resets them, and the worker
            # stops them before it waits for requests (two syscalls a call).
            S.armed = False
            S.active = False
    except _Timeout:
        status = "timeout"
    except _ExitAttempt:
        status = "exit"
    except SystemExit as exc:
        status = "exit"
        S.exit_detail = "sys.exit(%s)" % _safe_repr(exc.code)
    except BaseException as exc:
        status = "raised"
        error = _library_failure(exc) or {"type": type(exc).__name__, "message": _clip(_safe_str(exc), MESSAGE_LIMIT)}
    elapsed = _perf_counter() - started
    cpu = _process_time() - cpu_started

    if S.exit_detail is not None:
        status = "exit"
    elif S.timed_out:
        status = "timeout"
    elif status != "timeout" and (elapsed >= S.call_timeout or cpu >= S.call_timeout):
        # Past the timeout before the timers fired (they may be set up to
        # _arm_call's slack later): a timeout, as it is when they fire.
        S.timed_out = True
        status = "timeout"
    if status == "timeout":
        error = {
            "type": "Timeout",
            "message": "the verifier did not return within %d ms" % round(S.call_timeout * 1000),
        }
    elif status == "exit":
        _record("exit_attempt", S.exit_detail or "exit")
        error = {"type": "SystemExit", "message": _clip(S.exit_detail or "exit", MESSAGE_LIMIT)}
    if status != "ok":
        reward = None
        reward_type = ""
        nonfinite = None
        if used_loop and status in ("timeout", "exit"):
            _drop_event_loop()

    if status != "ok":
        values = None

    _housekeeping()
    return _encode_result(request_id, status, reward, reward_type, nonfinite, error, S.effects, elapsed * 1000.0, cpu * 1000.0, S.own_timer, values)
