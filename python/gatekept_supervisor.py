"""The trusted supervisor.

The verifier never runs in the process that talks to gatekept. That process,
the supervisor, reads the init request, forks the worker (which imports and
calls the verifier) and passes requests and replies between gatekept and
the worker. It cannot be reached from the worker: it is not dumpable (no
/proc/<pid>/mem, no ptrace), it holds the only ends of gatekept's pipes, and
it never runs verifier code. What it knows for itself it reports as its own
messages, JSON objects, which a worker's reply (always a JSON list) can
never be: processes left running while the worker is idle (it adopts every
orphan as a subreaper), and a worker that broke the reply framing. When the
worker dies, the supervisor dies the same way, so gatekept sees the crash
as it happened.
"""

import os
import signal
import sys
import time

from gatekept_output import _REGION_HEADER, WARMING, _unsent_replies
from gatekept_process import PR_SET_PDEATHSIG, descendants, is_zombie, prctl
from gatekept_state import (
    REPLY_FD,
    REQUEST_FD,
    S,
    _decode_json,
    _encode_json,
    _encode_reply,
    _getpid,
    _getppid,
    _kill,
    _listdir,
    _os_read,
    _os_write,
    _path_join,
    _perf_counter,
    _real_exit,
    _remove,
    _signal,
    _waitpid,
    _WNOHANG,
    _write_all,
)
from gatekept_worker import _serve


def _grow_pipe(fd):
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (ImportError, OSError):
        pass


def _read_first_line():
    pending = []
    while True:
        try:
            chunk = _os_read(REQUEST_FD, 1 << 18)
        except OSError:
            chunk = b""
        if not chunk:
            _real_exit(0)
        cut = chunk.find(b"\n")
        if cut >= 0:
            pending.append(chunk[:cut])
            # Kept for a worker started again without its warm-up (see _Supervisor.respawn).
            S.init_line = b"".join(pending)
            return S.init_line, chunk[cut + 1 :]
        pending.append(chunk)


# How many entries of the worker's home the supervisor lists after a batch,
# and how many of the new ones it names.
HOME_ENTRIES_CHECKED = 10000
HOME_ENTRIES_NAMED = 20


def _list_home(root):
    """Paths under root, relative to it, at most HOME_ENTRIES_CHECKED; links
    are listed, never followed."""
    found = set()
    stack = [""]
    while stack and len(found) < HOME_ENTRIES_CHECKED:
        relative = stack.pop()
        try:
            entries = os.scandir(_path_join(root, relative) if relative else root)
        except OSError:
            continue
        with entries:
            for entry in entries:
                name = relative + "/" + entry.name if relative else entry.name
                found.add(name)
                if len(found) >= HOME_ENTRIES_CHECKED:
                    break
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(name)
                except OSError:
                    pass
    return found


class _RespawnWorker(Exception):
    """The worker died, or hung, in its warm-up: start it again without one."""


class _Supervisor(object):
    def __init__(self, worker, to_worker, from_worker, isolated, region, home):
        self.respawned = False
        self.worker_fd = None
        # When the warm-up marker was first seen, and how long it may stay.
        self.warming_since = None
        self.warm_up_limit = _warm_up_limit()
        self.worker = worker
        # The worker's home, compared after every batch with what the import
        # left there. The supervisor runs no verifier code, so a verifier
        # cannot hide its writes from this look by patching the interpreter
        # it runs in; and in the sandbox the home is a file system of the
        # sandbox's own, so gatekept itself never lists or removes a path the
        # verifier could have planted a link in.
        self.home = home
        self.home_baseline = None
        # The worker's loading message, once it has come.
        self.loading = None
        self.region = region
        # Eval replies passed on to gatekept (the ready message not counted).
        self.passed = 0
        self.to_worker = to_worker
        self.from_worker = from_worker
        self.isolated = isolated
        self.me = _getpid()
        # The init request and those after it that have no reply yet.
        self.outstanding = 1
        self.tail = b""
        self.first_reply = True
        # Requests read from gatekept and not yet passed to the worker.
        self.outbox = bytearray()

    def strays(self):
        """Live processes outside the worker's own tree: in the sandbox every
        other process of its PID namespace, elsewhere every other descendant
        (orphans included, as this process is their subreaper). The worker's
        descendants are the verifier's helpers or the worker's to kill after
        each call (see _reap_children); what detached from it (a double fork,
        an orphan) has left that tree and ends here."""
        keep = set((1, self.me, self.worker))
        keep.update(descendants(self.worker))
        if self.isolated:
            try:
                pids = [int(name) for name in _listdir("/proc") if name.isdigit()]
            except OSError:
                pids = []
        else:
            pids = descendants(self.me)
        return [pid for pid in pids if pid not in keep and not is_zombie(pid)]

    def reap(self):
        while True:
            try:
                pid, _status = _waitpid(-1, _WNOHANG)
            except OSError:
                return
            if pid == 0 or pid == self.worker:
                return

    def sweep(self):
        strays = self.strays()
        for pid in strays:
            try:
                _kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if strays:
            self.reap()
        return len(strays)

    def clear_out(self):
        """Nothing the verifier started survives the supervisor."""
        try:
            _kill(self.worker, signal.SIGKILL)
        except OSError:
            pass
        for _round in range(5):
            if self.sweep() == 0:
                break
            time.sleep(0.01)

    def warming(self):
        return self.first_reply and not self.respawned and self.region[0:_REGION_HEADER] == WARMING

    def exit_like_worker(self):
        """Die as the worker died, so gatekept reads the same exit."""
        try:
            _pid, status = _waitpid(self.worker, 0)
        except OSError:
            status = 0
        if self.warming():
            self.clear_out()
            raise _RespawnWorker()
        self.pass_unsent()
        self.clear_out()
        if os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            try:
                # SIGKILL and SIGSTOP have no handler to reset.
                if number not in (signal.SIGKILL, signal.SIGSTOP):
                    _signal(number, signal.SIG_DFL)
                _kill(self.me, number)
            except (OSError, ValueError):
                pass
            _real_exit(128 + number)
        _real_exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)

    def reply_pipe_closed(self):
        """The worker's reply pipe has no writer left. A worker that exited
        closed it: die as it died. One still running closed it or put
        something else on it (a verifier that dup2s /dev/null over it): it
        can never answer again, so it is killed now rather than waited for,
        and gatekept is told, which ends the audit as could not audit."""
        if self.worker_exits_within(REPLY_CLOSED_GRACE_S):
            self.exit_like_worker()
        try:
            _kill(self.worker, signal.SIGKILL)
        except OSError:
            pass
        message = "the verifier closed or replaced the descriptor its answers go out on, so they could go nowhere"
        _send_supervised(_encode_reply({"op": "error", "message": message}))
        self.clear_out()
        _real_exit(3)

    def worker_exits_within(self, seconds):
        """Whether the worker exits within `seconds`: a dying process closes
        its pipes a moment before it can be waited for. Looked at, not
        reaped: exit_like_worker reads its status."""
        deadline = _perf_counter() + seconds
        while True:
            try:
                if os.waitid(os.P_PID, self.worker, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    return True
            except OSError:
                return True
            if _perf_counter() >= deadline:
                return False
            time.sleep(0.005)

    def pass_unsent(self):
        """The worker is dead: pass on the complete replies it still held,
        after everything it wrote to the pipe (see _Outbox)."""
        if self.first_reply:
            return
        unsent = _unsent_replies(self.region, self.passed)
        if unsent:
            # A reply cut short in the pipe is among them, whole.
            self.tail = b""
            self.take(unsent)

    def take(self, chunk):
        """Pass complete reply lines on, checking that none is the supervisor's kind."""
        data = self.tail + chunk if self.tail else chunk
        cut = data.rfind(b"\n") + 1
        self.tail = data[cut:]
        block = data[:cut]
        while self.first_reply and block:
            # The worker's first replies are objects: where it loads the
            # verifier from (written before any of the verifier's code ran),
            # then its ready message.
            end = block.find(b"\n") + 1
            line, block = block[:end], block[end:]
            message = self.provenance(line)
            if message is None:
                continue
            self.first_reply = False
            if self.home is not None:
                self.home_baseline = _list_home(self.home)
            _send_supervised(message)
            self.outstanding -= 1
        if not block:
            return
        lines = block.count(b"\n")
        # Every line of the worker's must open a list: no object, whatever precedes it.
        if block[:1] != b"[" or block.count(b"\n[") != lines - 1:
            message = "the verifier's process wrote a reply only the supervisor may write"
            _send_supervised(_encode_reply({"op": "error", "message": message}))
            self.clear_out()
            _real_exit(3)
        self.outstanding -= lines
        self.passed += lines
        if self.outstanding <= 0 and not self.outbox:
            # The worker has answered everything and waits, so nothing of the
            # verifier's may run. Said before the replies it goes with, so
            # gatekept pins it on this batch.
            if self.sweep():
                _send_supervised(_encode_reply({"op": "strays"}))
            created = self.check_home()
            if created is not None:
                _send_supervised(_encode_reply(created))
        _send_supervised(block)

    def provenance(self, line):
        """None for the loading line (kept); the ready line with what the
        supervisor vouches for put in: the interpreter's version and the
        loaded file with its hash, from the loading line. Whatever the
        verifier's import wrote in their place cannot change them."""
        try:
            message = _decode_json(line)
        except ValueError:
            return line
        if not isinstance(message, dict):
            return line
        if message.get("op") == "loading" and self.loading is None:
            self.loading = message
            return None
        if message.get("op") == "ready" and message.get("ok") is True:
            loading = self.loading or {}
            message["python"] = "%d.%d.%d" % tuple(sys.version_info[:3])
            message["source_file"] = loading.get("source_file") if isinstance(loading.get("source_file"), str) else None
            message["sha256"] = loading.get("sha256") if isinstance(loading.get("sha256"), str) else None
            return _encode_reply(message)
        return line

    def check_home(self):
        """What the calls left in the home, removed and named (None if nothing)."""
        if self.home_baseline is None:
            return None
        current = _list_home(self.home)
        added = current - self.home_baseline
        unchecked = len(current) >= HOME_ENTRIES_CHECKED
        if not added and not unchecked:
            return None
        # A new directory is removed with everything in it, and named once.
        planted = sorted(name for name in added if not any(name.startswith(other + "/") for other in added))
        for name in planted:
            _remove(_path_join(self.home, name))
        return {
            "op": "files",
            "created": planted[:HOME_ENTRIES_NAMED],
            "more": max(0, len(planted) - HOME_ENTRIES_NAMED),
            "unchecked": unchecked,
        }

    def drain_and_exit(self):
        """The worker is gone: pass on what it wrote before, then die like it."""
        os.set_blocking(self.from_worker, False)
        while True:
            try:
                chunk = _os_read(self.from_worker, 1 << 18)
            except OSError:
                break
            if not chunk:
                break
            self.take(chunk)
        self.exit_like_worker()

    def respawn(self):
        """Fork the worker again, told not to warm up; what gatekept sent
        after the init request waits in the outbox."""
        self.respawned = True
        # The new worker says again where it loads the verifier from.
        self.loading = None
        for fd in (self.to_worker, self.from_worker, self.worker_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.worker_fd = None
        init = _decode_json(S.init_line)
        init["warm_up"] = False
        line = _encode_json(init).encode("ascii")
        self.region[0:_REGION_HEADER] = bytes(_REGION_HEADER)
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        for fd in (to_worker_w, from_worker_w):
            _grow_pipe(fd)
        worker = os.fork()
        if worker == 0:
            _rejoin_as_worker(line, self.region, self.me, (to_worker_r, from_worker_w), (to_worker_w, from_worker_r))
        os.close(to_worker_r)
        os.close(from_worker_w)
        self.worker = worker
        self.to_worker = to_worker_w
        self.from_worker = from_worker_r
        self.tail = b""

    def run(self, outbox):
        while True:
            try:
                self.serve(outbox)
            except _RespawnWorker:
                outbox = self.outbox
                self.respawn()

    def check_warm_up(self):
        """A warm-up that outlasts its limit is stuck past the worker's own
        timers (signals blocked, say): kill it, and the worker starts again."""
        if not self.warming():
            self.warming_since = None
            return
        now = _perf_counter()
        if self.warming_since is None:
            self.warming_since = now
        elif now - self.warming_since > self.warm_up_limit:
            try:
                _kill(self.worker, signal.SIGKILL)
            except OSError:
                pass

    def serve(self, outbox):
        import select

        poller = select.poll()
        poller.register(REQUEST_FD, select.POLLIN)
        poller.register(self.from_worker, select.POLLIN)
        try:
            worker_fd = self.worker_fd = os.pidfd_open(self.worker)
            poller.register(worker_fd, select.POLLIN)
        except (AttributeError, OSError):
            worker_fd = None
        os.set_blocking(self.to_worker, False)
        self.outbox = outbox = bytearray(outbox)
        writing = False
        while True:
            if self.first_reply and not self.respawned:
                self.check_warm_up()
            if bool(outbox) != writing:
                writing = bool(outbox)
                if writing:
                    poller.register(self.to_worker, select.POLLOUT)
                else:
                    poller.unregister(self.to_worker)
            # Until the ready reply, woken now and then to watch the warm-up.
            for fd, _events in poller.poll(WARM_UP_POLL_MS if self.first_reply and not self.respawned else None):
                if fd == REQUEST_FD:
                    try:
                        chunk = _os_read(REQUEST_FD, 1 << 18)
                    except OSError:
                        chunk = b""
                    if not chunk:
                        self.clear_out()
                        _real_exit(0)
                    outbox += chunk
                    self.outstanding += chunk.count(b"\n")
                elif fd == self.to_worker:
                    try:
                        written = _os_write(self.to_worker, outbox[: 1 << 16])
                    except BlockingIOError:
                        written = 0
                    except OSError:
                        # The worker is gone; its pidfd or its pipe says so.
                        written = len(outbox)
                    del outbox[:written]
                elif fd == self.from_worker:
                    try:
                        chunk = _os_read(self.from_worker, 1 << 18)
                    except BlockingIOError:
                        continue
                    except OSError:
                        chunk = b""
                    if not chunk:
                        self.reply_pipe_closed()
                    self.take(chunk)
                elif fd == worker_fd:
                    self.drain_and_exit()


WARM_UP_POLL_MS = 100
# How long a worker whose reply pipe closed may take to exit before it is
# taken to have closed the pipe itself.
REPLY_CLOSED_GRACE_S = 1.0


def _rejoin_as_worker(first_line, region, supervisor, ends, others):
    """In a worker forked again by the supervisor (see respawn): take the
    pipes' worker ends as fds 3 and 4, as main() does for the first, and serve."""
    for fd, number in zip(ends, (REQUEST_FD, REPLY_FD), strict=True):
        os.dup2(fd, number, inheritable=False)
    for fd in ends + others:
        os.close(fd)
    prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if _getppid() == supervisor:
        S.supervisor_pid = supervisor
        S.main_pid = _getpid()
        _serve(first_line, region)
    _real_exit(0)


def _warm_up_limit():
    """Seconds the warm-up may hold the worker: one call timeout for all its
    calls, and a second of slack."""
    try:
        init = _decode_json(S.init_line)
        call_ms = float(init.get("call_timeout_ms") or 2000)
    except (ValueError, AttributeError, TypeError):
        call_ms = 2000.0
    return call_ms / 1000.0 + 1.0


def _send_supervised(data):
    try:
        _write_all(REPLY_FD, data)
    except OSError:
        _real_exit(0)
