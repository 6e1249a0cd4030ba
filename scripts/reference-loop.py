"""The reference the benchmark holds the gate to: one plain Python process that
imports the verifier and calls it in a loop on exactly the requests the gate
sent, with no isolation, no protocol and no judging.

The calls are made the way the gate makes them (python/gatekept_reward.py: the
same keyword pool, argument plan and float() of the result), so the only
difference left is what gatekept adds around them. Requests are read in
chunks and only the calls are timed, so a million of them fit in memory and
parsing JSON is not counted as the verifier's cost. When all the calls take
less than a fifth of a second, they are made again (up to that time) and the
best pass gives the per-call cost, which a single short pass measures poorly;
loop_s stays the first pass, the one the gate is compared with.

usage: python reference-loop.py path/to/verifier.py:fn requests.jsonl [messages|string]
prints one JSON line: {"calls", "import_s", "loop_s", "per_call_us", "errors",
"repeated_s", "read_s"}; the last two are time the reference itself does not
include (repeats of a short loop, reading the requests).
"""

import asyncio
import importlib.util
import inspect
import json
import os
import sys
import time

STARTED = time.perf_counter()
CHUNK = 10000
SHORT_S = 0.2


def load_verifier(spec):
    file, fn_name = spec.rsplit(":", 1)
    module_spec = importlib.util.spec_from_file_location("reference_verifier", file)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules["reference_verifier"] = module
    module_spec.loader.exec_module(module)
    return getattr(module, fn_name)


def chunks(path):
    with open(path, encoding="utf-8") as handle:
        batch = []
        for line in handle:
            if line.strip():
                batch.append(json.loads(line))
                if len(batch) == CHUNK:
                    yield batch
                    batch = []
        if batch:
            yield batch


def main():
    spec, requests_path = sys.argv[1], sys.argv[2]
    completion_format = sys.argv[3] if len(sys.argv) > 3 else "messages"
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    from gatekept_reward import build_plan, call_arguments, keyword_pool, to_reward

    fn = load_verifier(spec)
    plan, missing = build_plan(fn)
    if plan is None:
        raise SystemExit("the verifier requires %s" % ", ".join(missing))
    import_s = time.perf_counter() - STARTED
    loop = asyncio.new_event_loop() if inspect.iscoroutinefunction(fn) else None

    def run(batch):
        errors = 0
        for request in batch:
            pool = keyword_pool(completion_format, request["completion"], request["answer"], request.get("prompt"), request.get("info"))
            args, kwargs = call_arguments(plan, pool)
            try:
                value = fn(*args, **kwargs)
                if loop is not None:
                    value = loop.run_until_complete(value)
                to_reward(value)
            except Exception:
                errors += 1
        return errors

    calls = errors = 0
    loop_s = 0.0
    kept = []
    read_s = 0.0
    batches = chunks(requests_path)
    while True:
        started = time.perf_counter()
        batch = next(batches, None)
        read_s += time.perf_counter() - started
        if batch is None:
            break
        started = time.perf_counter()
        errors += run(batch)
        loop_s += time.perf_counter() - started
        calls += len(batch)
        if calls <= CHUNK:
            kept.append(batch)
    best_s = loop_s
    repeated_s = 0.0
    if loop_s < SHORT_S and calls <= CHUNK:
        while repeated_s < SHORT_S:
            started = time.perf_counter()
            for batch in kept:
                run(batch)
            elapsed = time.perf_counter() - started
            best_s = min(best_s, elapsed)
            repeated_s += elapsed
    print(
        json.dumps(
            {
                "calls": calls,
                "import_s": import_s,
                "loop_s": loop_s,
                "per_call_us": 1e6 * best_s / max(calls, 1),
                "errors": errors,
                "repeated_s": repeated_s,
                "read_s": read_s,
            }
        )
    )


if __name__ == "__main__":
    main()
