"""The Ray driver: gatekept's verifier workers, run by actors of a Ray cluster.

Node starts this script (in the `ray` venv) with the same two protocol pipes
as a worker: requests on fd 3, replies on fd 4, one JSON object a line. It
connects to the cluster, creates a pool of actors, and tunnels each worker's
protocol bytes: Node still plans, encodes, reads and judges every call; an
actor only starts, on its node, the worker command Node prepared (the same
one the local pool runs, bubblewrap and all), writes what Node sends to the
worker's fd 3 and hands back what the worker writes on its fd 4.

An actor that dies takes its workers with it: each is reported `lost`, so
Node runs the call in flight again on a worker of another actor, and the
actor is replaced. The actor class lives in this file, not in a module:
Ray ships a class defined in the driver's __main__ by value, so the nodes
need Ray and the worker's own files, not gatekept's driver.
"""

import base64
import codecs
import json
import os
import signal
import subprocess
import sys
import threading
import time

REQUEST_FD = 3
REPLY_FD = 4
SECCOMP_FD = 5
NAMESPACE = "gatekept"

_out_lock = threading.Lock()
_replies = []  # the reply pipe, opened by main()


def send(message):
    line = json.dumps(message, separators=(",", ":")) + "\n"
    with _out_lock:
        _replies[0].write(line)
        _replies[0].flush()


def _child_setup(fds):
    """In the worker's child, before exec: the pipes on the fd numbers the worker expects."""

    def setup():
        for source, target in fds:
            os.dup2(source, target)
        try:
            import ctypes

            # Dies with the actor, however the actor ends (bubblewrap's
            # --die-with-parent does the same inside the sandbox).
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except Exception:  # noqa: BLE001, S110 - best effort outside Linux
            pass

    return setup


class _Tail:
    """The last `cap` bytes of a stream, for the exit report."""

    def __init__(self, stream, cap):
        self.cap = cap
        self.data = bytearray()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        while True:
            chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not chunk:
                return
            self.data += chunk
            if len(self.data) > self.cap:
                del self.data[: len(self.data) - self.cap]

    def text(self):
        return bytes(self.data).decode("utf-8", "replace")


class _Process:
    """One worker process on the actor's node, and its two protocol pipes."""

    def __init__(self, spec, created):
        request_read, self.request_write = os.pipe()
        self.reply_read, reply_write = os.pipe()
        fds = [(request_read, REQUEST_FD), (reply_write, REPLY_FD)]
        seccomp_read = None
        if spec.get("seccomp"):
            # The filter travels as bytes and reaches bubblewrap through a
            # pipe, which it reads whole and closes: no file on the node.
            program = base64.b64decode(spec["seccomp"])
            seccomp_read, seccomp_write = os.pipe()
            os.write(seccomp_write, program)
            os.close(seccomp_write)
            fds.append((seccomp_read, SECCOMP_FD))
        self._materialise(spec.get("files") or {}, created)
        try:
            self.proc = subprocess.Popen(  # noqa: S603 - the command Node prepared
                spec["argv"],
                cwd=spec["cwd"],
                env=spec["env"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                pass_fds=[target for _, target in fds] + [source for source, _ in fds],
                preexec_fn=_child_setup(fds),  # noqa: PLW1509 - dup2 and prctl only
            )
        finally:
            for source, _ in fds:
                os.close(source)
        cap = int(spec.get("output_cap", 65536))
        self.stdout = _Tail(self.proc.stdout, cap)
        self.stderr = _Tail(self.proc.stderr, cap)
        self.lock = threading.Lock()
        # Replies are decoded as Node decodes a local worker's pipe: a
        # character split across two reads is whole, invalid bytes become U+FFFD.
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.next_seq = 0
        self.held = {}

    @staticmethod
    def _materialise(files, created):
        """Files the launch names (the sandbox's account files, the compiled
        harness...), written where Node wrote them when this node lacks them;
        the topmost directory made for them is noted, to go with the actor."""
        for target, encoded in files.items():
            if os.path.exists(target):
                continue
            parent = os.path.dirname(target)
            top = parent
            while not os.path.exists(os.path.dirname(top)):
                top = os.path.dirname(top)
            if not os.path.exists(top):
                created.add(top)
            os.makedirs(parent, mode=0o700, exist_ok=True)
            with open(target, "wb") as handle:
                handle.write(base64.b64decode(encoded))

    def write(self, seq, data):
        # Writes may arrive out of order on the actor's threads: sequenced here.
        with self.lock:
            self.held[seq] = data
            while self.next_seq in self.held:
                chunk = self.held.pop(self.next_seq).encode("utf-8")
                self.next_seq += 1
                try:
                    view = memoryview(chunk)
                    while view:
                        written = os.write(self.request_write, view)
                        view = view[written:]
                except OSError:
                    return  # the worker is gone: its exit says why

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.kill()
        except OSError:
            pass


class WorkerHost:
    """An actor: starts workers on its node and tunnels their protocol pipes."""

    def __init__(self):
        self.processes = {}
        # Work directories this actor wrote on its node (see _materialise).
        self.created = set()

    def node(self):
        import ray

        return {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    def start(self, key, spec):
        self.processes[key] = _Process(spec, self.created)
        return os.getpid()

    def write(self, key, seq, data):
        process = self.processes.get(key)
        if process is not None:
            process.write(seq, data)

    def read(self, key, wait_s):
        """What the worker wrote since, waiting up to wait_s for the first byte; its exit once it is gone."""
        import select

        process = self.processes.get(key)
        if process is None:
            return {"data": "", "exit": {"code": None, "signal": "SIGKILL", "stdout": "", "stderr": ""}}
        ready, _, _ = select.select([process.reply_read], [], [], wait_s)
        chunks = []
        while ready:
            chunk = os.read(process.reply_read, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            ready, _, _ = select.select([process.reply_read], [], [], 0)
        else:
            return {"data": process.decoder.decode(b"".join(chunks)), "exit": None}
        # The reply pipe closed: the worker has exited (or is about to).
        try:
            code = process.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.proc.wait()
        process.stdout.thread.join(1)
        process.stderr.thread.join(1)
        os.close(process.reply_read)
        os.close(process.request_write)
        del self.processes[key]
        exit_info = {
            "code": code if code >= 0 else None,
            "signal": signal.Signals(-code).name if code < 0 else None,
            "stdout": process.stdout.text(),
            "stderr": process.stderr.text(),
        }
        return {"data": process.decoder.decode(b"".join(chunks), final=True), "exit": exit_info}

    def kill(self, key):
        process = self.processes.get(key)
        if process is not None:
            process.kill()

    def kill_all(self):
        import shutil

        for process in list(self.processes.values()):
            process.kill()
        for directory in self.created:
            shutil.rmtree(directory, ignore_errors=True)
        self.created.clear()


class Driver:
    def __init__(self, ray, remote_class, size, max_replacements):
        self.ray = ray
        self.remote_class = remote_class
        self.actors = []  # [name, handle, alive, workers]
        self.workers = {}  # key -> actor entry
        self.lock = threading.Lock()
        self.created = 0
        self.replacements_left = max_replacements
        self.prefix = f"gatekept-{os.getpid()}-{int(time.time() * 1000)}"
        for _ in range(size):
            self.actors.append(self._new_actor())

    def _new_actor(self):
        name = f"{self.prefix}-{self.created}"
        self.created += 1
        handle = self.remote_class.options(name=name, namespace=NAMESPACE).remote()
        return {"name": name, "handle": handle, "alive": True, "workers": 0}

    def describe(self, timeout_s):
        nodes = self.ray.get([entry["handle"].node.remote() for entry in self.actors], timeout=timeout_s)
        return [{"name": entry["name"], "node": info["node"], "pid": info["pid"]} for entry, info in zip(self.actors, nodes, strict=True)]

    def _pick(self, preferred):
        with self.lock:
            alive = [entry for entry in self.actors if entry["alive"]]
            # A worker started anew (after a crash, a timeout, a stop) goes
            # back to its actor: the golds it serves keep running on one node.
            for entry in alive:
                if entry["name"] == preferred:
                    entry["workers"] += 1
                    return entry
            if not alive:
                if self.replacements_left <= 0:
                    return None
                self.replacements_left -= 1
                entry = self._new_actor()
                self.actors.append(entry)
                alive = [entry]
            entry = min(alive, key=lambda item: item["workers"])
            entry["workers"] += 1
            return entry

    def _lost(self, entry, reason):
        with self.lock:
            if not entry["alive"]:
                return
            entry["alive"] = False
            replacement = None
            if self.replacements_left > 0:
                self.replacements_left -= 1
                replacement = self._new_actor()
                self.actors.append(replacement)
        send({"op": "actor_lost", "actor": entry["name"], "reason": reason, "replacement": replacement and replacement["name"]})

    def start(self, key, spec, timeout_s, preferred=None):
        for _attempt in range(3):
            entry = self._pick(preferred)
            if entry is None:
                send({"op": "start_failed", "id": key, "message": "no actor of the cluster is left"})
                return
            try:
                pid = self.ray.get(entry["handle"].start.remote(key, spec), timeout=timeout_s)
            except self.ray.exceptions.RayActorError as error:
                self._lost(entry, _reason(error))
                continue
            except Exception as error:  # noqa: BLE001 - reported to Node, which names it
                send({"op": "start_failed", "id": key, "message": f"{type(error).__name__}: {error}"})
                return
            with self.lock:
                self.workers[key] = {"entry": entry, "seq": 0}
            send({"op": "started", "id": key, "actor": entry["name"], "pid": pid})
            threading.Thread(target=self._pump, args=(key, entry), daemon=True).start()
            return
        send({"op": "start_failed", "id": key, "message": "every actor tried was lost"})

    def _pump(self, key, entry):
        handle = entry["handle"]
        while True:
            try:
                reply = self.ray.get(handle.read.remote(key, 0.2))
            except self.ray.exceptions.RayActorError as error:
                reason = _reason(error)
                self._lost(entry, reason)
                send({"op": "exit", "id": key, "code": None, "signal": None, "stdout": "", "stderr": "", "lost": f"actor {entry['name']} was lost: {reason}"})
                break
            if reply["data"]:
                send({"op": "data", "id": key, "data": reply["data"]})
            if reply["exit"] is not None:
                send({"op": "exit", "id": key, **reply["exit"], "lost": None})
                break
        with self.lock:
            self.workers.pop(key, None)
            entry["workers"] -= 1

    def write(self, key, data):
        with self.lock:
            worker = self.workers.get(key)
            if worker is None:
                return
            seq = worker["seq"]
            worker["seq"] += 1
        worker["entry"]["handle"].write.remote(key, seq, data)

    def kill(self, key):
        with self.lock:
            worker = self.workers.get(key)
        if worker is not None:
            worker["entry"]["handle"].kill.remote(key)

    def kill_actor(self, name):
        """Kill one actor as a node failure would (for the tests and the benchmark of a loss)."""
        for entry in self.actors:
            if entry["name"] == name and entry["alive"]:
                self.ray.kill(entry["handle"], no_restart=True)

    def shutdown(self):
        for entry in self.actors:
            if entry["alive"]:
                try:
                    self.ray.get(entry["handle"].kill_all.remote(), timeout=2)
                except Exception:  # noqa: BLE001, S110 - it is killed next either way
                    pass
                try:
                    self.ray.kill(entry["handle"], no_restart=True)
                except Exception:  # noqa: BLE001, S110 - already gone
                    pass


def _reason(error):
    text = str(error).strip().splitlines()
    return text[0][:300] if text else type(error).__name__


def connect(request):
    """ray.init within a bounded time: an unreachable cluster is an answer, never a hang."""
    address = request.get("address") or "auto"
    timeout_s = float(request.get("connect_timeout_s", 30))
    outcome = {}

    def attempt():
        try:
            import ray

            ray.init(
                address=address,
                namespace=NAMESPACE,
                log_to_driver=False,
                logging_level="ERROR",
                configure_logging=True,
                include_dashboard=False,
            )
            outcome["ray"] = ray
        except BaseException as error:  # noqa: BLE001 - reported to Node
            outcome["error"] = f"{type(error).__name__}: {_reason(error)}"

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        return None, f"no answer within {timeout_s:g} s"
    if "error" in outcome:
        return None, outcome["error"]
    return outcome["ray"], None


def main():
    _replies.append(os.fdopen(REPLY_FD, "w", encoding="utf-8", buffering=1))
    requests = os.fdopen(REQUEST_FD, "r", encoding="utf-8")
    first = json.loads(requests.readline() or "{}")
    if first.get("op") != "connect":
        send({"op": "error", "message": "the first request must be connect"})
        return 1
    ray, problem = connect(first)
    if ray is None:
        send({"op": "connect_failed", "message": problem})
        # A connect still under way in its thread must not hold the exit.
        os._exit(0)
    timeout_s = float(first.get("connect_timeout_s", 30))
    # No more actors than the cluster has CPUs: the rest could never be placed.
    cpus = int(ray.cluster_resources().get("CPU", 1))
    size = max(1, min(int(first["actors"]), cpus))
    remote_class = ray.remote(num_cpus=float(first.get("cpus_per_actor", 1)), max_concurrency=64)(WorkerHost)
    driver = Driver(ray, remote_class, size, max_replacements=size * 2)
    try:
        actors = driver.describe(timeout_s)
    except Exception as error:  # noqa: BLE001 - reported to Node
        send({"op": "connect_failed", "message": f"the cluster did not place {size} actors within {timeout_s:g} s ({_reason(error)})"})
        driver.shutdown()
        os._exit(0)
    send({"op": "connected", "actors": actors, "nodes": len({actor["node"] for actor in actors})})
    try:
        for line in requests:
            message = json.loads(line)
            op = message["op"]
            if op == "write":
                driver.write(message["id"], message["data"])
            elif op == "start":
                args = (message["id"], message["spec"], timeout_s, message.get("actor"))
                threading.Thread(target=driver.start, args=args, daemon=True).start()
            elif op == "kill":
                driver.kill(message["id"])
            elif op == "kill_actor":
                driver.kill_actor(message["actor"])
            elif op == "shutdown":
                break
    finally:
        driver.shutdown()
        try:
            ray.shutdown()
        except Exception:  # noqa: BLE001, S110 - on the way out
            pass
    send({"op": "bye"})
    _replies[0].close()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
