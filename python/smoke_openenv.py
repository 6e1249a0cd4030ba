"""The client side of `smoke.py openenv`: the `serve` child it starts, the
HTTP routes it reads and the episodes it plays over the server's WebSocket.
Only the standard library is imported at module level (websockets where
the episodes are played), as in smoke.py.
"""
import json
import os
import sys


def _observation_fields(message):
    data = message.get("data") if isinstance(message, dict) else None
    observation = data.get("observation") if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}, observation if isinstance(observation, dict) else {}


def _exchange(ws, message, timeout):
    ws.send(json.dumps(message))
    return json.loads(ws.recv(timeout=timeout))


def _summary(reply):
    """What the host judges of a reply to reset or step."""
    data, observation = _observation_fields(reply)
    return {"type": reply.get("type"), "keys": sorted(observation), "done": data.get("done"), "reward": data.get("reward")}


def play_episodes(url, timeout, probes):
    """Each probe as one episode (reset to its row, one step with its
    completion) over one WebSocket session, as a trainer plays them."""
    from websockets.sync.client import connect

    results = []
    with connect(url, open_timeout=timeout, max_size=None) as ws:
        for probe in probes:
            result = {"reset": None, "step": None, "error": None}
            try:
                reset = _exchange(ws, {"type": "reset", "data": {"index": probe["row"]}}, timeout)
                observation = _observation_fields(reset)[1]
                result["reset"] = {
                    **_summary(reset),
                    "question": observation.get("question"),
                    "row_index": observation.get("row_index"),
                    "message": (reset.get("data") or {}).get("message") if reset.get("type") == "error" else None,
                }
                if reset.get("type") != "observation":
                    result["error"] = "reset answered %s" % json.dumps(reset)[:400]
                    results.append(result)
                    continue
                step = _exchange(ws, {"type": "step", "data": {"answer": probe["completion"]}}, timeout)
                result["step"] = _summary(step)
                if step.get("type") != "observation":
                    result["error"] = "step answered %s" % json.dumps(step)[:400]
            except TimeoutError:
                result["error"] = "no reply within %gs" % timeout
                results.append(result)
                break
            except Exception as error:  # the connection is gone; later episodes cannot run
                result["error"] = "%s: %s" % (type(error).__name__, error)
                results.append(result)
                break
            results.append(result)
    return results


def describe_exit(code):
    import signal

    if code < 0:
        try:
            return "was killed by %s" % signal.Signals(-code).name
        except ValueError:
            return "was killed by signal %d" % -code
    return "exited with code %d" % code


def get(url, timeout):
    """GET `url`: its status and body (JSON where it parses), or the error."""
    import urllib.error
    import urllib.request

    # No proxy from the environment: the server is on this loopback.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as response:
            status, text = response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read().decode("utf-8", "replace")
    except Exception as error:
        return {"error": "%s: %s" % (type(error).__name__, error)}
    try:
        return {"status": status, "body": json.loads(text)}
    except ValueError:
        return {"status": status, "body": text}


class Server:
    """`serve` as a child process: its events read from its stdout, its
    stderr shared with ours, so the log shows what the package printed."""

    def __init__(self, script, prefix, directory, app, memory_mb, cpu_s):
        import queue
        import subprocess
        import threading

        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (directory, env.get("PYTHONPATH")) if p)
        self.prefix = prefix
        self.events = queue.Queue()
        self.process = subprocess.Popen(
            [sys.executable, script, "serve", directory, app, "--memory-mb", str(memory_mb), "--cpu-s", str(cpu_s)],
            cwd=directory,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=2,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        taken = False
        # Read to the end: a package that writes into the pipe must not block on it.
        for raw in self.process.stdout:
            line = raw.decode("utf-8", "replace")
            if taken or not line.startswith(self.prefix):
                continue
            try:
                event = json.loads(line[len(self.prefix) :])
            except ValueError:
                continue
            # Only what `serve` says before it runs the package's app is taken.
            if isinstance(event, dict) and event.get("event") in ("listening", "missing", "too_old"):
                self.events.put(event)
                taken = True
        if not taken:
            self.events.put(None)

    def first_event(self, deadline):
        import queue
        import time

        # Polled: a child the package started can hold the pipe open after the server exited.
        while time.monotonic() < deadline:
            exited = self.process.poll() is not None
            try:
                return self.events.get(timeout=0.5 if exited else min(0.2, max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                if exited:
                    return None
        return None

    def exit(self):
        code = self.process.poll()
        return None if code is None else describe_exit(code)

    def stop(self):
        import subprocess

        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(3)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
