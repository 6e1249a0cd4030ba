"""The in-process reference for benchmarks: one plain Python loop calling the
verifier on the same requests the gate sends, with no isolation or protocol.

usage: python reference-loop.py path/to/verifier.py:fn requests.jsonl
"""
import importlib.util
import inspect
import json
import sys
import time


def main() -> None:
    spec, requests_path = sys.argv[1], sys.argv[2]
    file, fn_name = spec.rsplit(":", 1)
    module_spec = importlib.util.spec_from_file_location("reference_verifier", file)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    fn = getattr(module, fn_name)
    params = inspect.signature(fn).parameters
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    with open(requests_path, encoding="utf-8") as handle:
        requests = [json.loads(line) for line in handle if line.strip()]
    started = time.perf_counter()
    for request in requests:
        pool = {
            "completion": [{"role": "assistant", "content": request["completion"]}],
            "answer": request["answer"],
            "prompt": [],
            "info": request.get("info") or {},
            "state": {},
            "task": "default",
            "parser": None,
        }
        kwargs = pool if takes_all else {k: v for k, v in pool.items() if k in params}
        try:
            fn(**kwargs)
        except Exception:
            pass
    print(json.dumps({"calls": len(requests), "loop_s": time.perf_counter() - started}))


if __name__ == "__main__":
    main()
