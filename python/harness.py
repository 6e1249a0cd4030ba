# -*- coding: utf-8 -*-
"""Runs one reward function on behalf of gatekept, one call per request.

Requests arrive on fd 3 and replies leave on fd 4, one JSON value per line,
so nothing the verifier prints can be mistaken for a reply. The process
gatekept starts is the supervisor (see _Supervisor): it forks the worker,
which imports and calls the verifier, and passes lines between the two.
After an init object, every eval request is a list [id, completion, answer,
prompt, info] and every reply a list [id, status, reward, type, non-finite,
error, side effects, ms]; objects on the reply pipe are the supervisor's.
Replies leave the worker in blocks (see _Outbox).

Everything up to the version check must stay parseable by old Python 3
releases (no f-strings, no async syntax, no walrus), so that an old
interpreter reaches the check and says why it cannot continue.
"""
import os
import sys

REQUEST_FD = 3
REPLY_FD = 4

if sys.version_info < (3, 10):
    _found = "%d.%d.%d" % tuple(sys.version_info[:3])
    sys.stderr.write(
        "gatekept: the harness needs Python 3.10 or newer, but %s is Python %s\n"
        % (sys.executable, _found)
    )
    try:
        os.write(
            REPLY_FD,
            (
                '{"op":"ready","ok":false,"error":{"kind":"python_too_old",'
                '"type":"RuntimeError","message":"Python %s is too old; 3.10 or newer is needed",'
                '"traceback":""}}\n' % _found
            ).encode("ascii"),
        )
    except Exception:
        pass
    sys.exit(3)

import errno
import importlib
import importlib.util
import json
import json.scanner
import mmap
import posix
import re
import resource
import shutil
import signal
import stat
import struct
import time
import traceback
import types

import _signal as _signal_module

# The calling convention shared with every emitted package (one file, copied
# byte for byte into them). Imported now, while this directory is on sys.path;
# dropped from sys.modules so a verifier's own module of that name is its own.
import gatekept_reward as _reward

del sys.modules["gatekept_reward"]

try:
    import _posixsubprocess
except ImportError:  # not POSIX; the worker does not run there anyway
    _posixsubprocess = None

# Bound once so a verifier that monkeypatches os or json cannot break the
# harness's own bookkeeping.
_perf_counter = time.perf_counter
_process_time = time.process_time
_os_read = os.read
_os_write = os.write
_listdir = os.listdir
_getcwd = os.getcwd
_chdir = os.chdir
_lstat = os.lstat
_unlink = os.unlink
_rmtree = shutil.rmtree
_realpath = os.path.realpath
_path_join = os.path.join
_fsdecode = os.fsdecode
_fspath = os.fspath
_setitimer = signal.setitimer
# The C-level getter: signal.getsignal wraps its result in an enum, which
# costs more than the rest of the per-call timer setup together.
_getsignal = _signal_module.getsignal
_signal = signal.signal
_real_exit = os._exit
_getpid = os.getpid
_getppid = os.getppid
_getpgrp = os.getpgrp
_killpg = os.killpg
_kill = os.kill
_waitpid = os.waitpid
_WNOHANG = os.WNOHANG
_waitid = getattr(os, "waitid", None)
_P_ALL = getattr(os, "P_ALL", 0)
_WAIT_ANY = getattr(os, "WEXITED", 0) | getattr(os, "WNOHANG", 0) | getattr(os, "WNOWAIT", 0)
_open = open
_encode_json = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode
_DECODER = json.JSONDecoder()
_decode_text = _DECODER.decode
# The scanner decode() itself runs (the C one where there is one), without
# decode()'s two whitespace matches and its Python frames around it.
_scan_once = json.scanner.c_make_scanner(_DECODER) if json.scanner.c_make_scanner is not None else None

# inspect.CO_COROUTINE, without importing inspect (see _is_async_callable).
_CO_COROUTINE = 0x80

MESSAGE_LIMIT = 500
TRACEBACK_LIMIT = 2000
DETAIL_LIMIT = 300
MAX_EFFECTS = 32
OUTPUT_REPORT_BYTES = 64 * 1024
# Verifier output is forwarded to the real fd only up to this much per call;
# the rest is counted and dropped, which keeps a chatty verifier fast.
OUTPUT_FORWARD_BYTES = 64 * 1024
# After a soft timeout the timer keeps firing, so a verifier that swallows the
# first exception with a bare except still gets pushed out.
TIMER_REPEAT_SECONDS = 0.05

POOL_NAMES = _reward.POOL_NAMES
GROUP_NAMES = _reward.GROUP_NAMES

_NETWORK_EVENTS = (
    "socket.connect",
    "socket.bind",
    "socket.getaddrinfo",
    "socket.getnameinfo",
    "socket.gethostbyname",
    "socket.gethostbyaddr",
    "socket.sendto",
    "socket.sendmsg",
    "socket.sethostname",
)
_PROCESS_EVENTS = (
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "pty.spawn",
)
_KILL_EVENTS = ("os.kill", "os.killpg", "signal.pthread_kill")
# For each event: which arguments name a path that gets created, changed or
# removed, and which argument (if any) holds the dir_fd it is relative to.
_PATH_EVENTS = {
    "os.remove": ((0, 1),),
    "os.rmdir": ((0, 1),),
    "os.mkdir": ((0, 2),),
    "os.rename": ((0, 2), (1, 3)),
    "os.link": ((1, 3),),
    "os.symlink": ((1, 2),),
    "os.truncate": ((0, None),),
    "os.chmod": ((0, 2),),
    "os.chown": ((0, 3),),
    "os.chflags": ((0, None),),
    "os.utime": ((0, 3),),
    "os.setxattr": ((0, None),),
    "os.removexattr": ((0, None),),
    "shutil.rmtree": ((0, 1),),
    "shutil.copyfile": ((1, None),),
    "shutil.copymode": ((1, None),),
    "shutil.copystat": ((1, None),),
    "shutil.copytree": ((1, None),),
    "shutil.move": ((0, None), (1, None)),
    "shutil.chown": ((0, None),),
}
_EVENT_KIND = {"open": "open"}
for _name in _NETWORK_EVENTS:
    _EVENT_KIND[_name] = "network_blocked"
for _name in _PROCESS_EVENTS:
    _EVENT_KIND[_name] = "subprocess_blocked"
for _name in _KILL_EVENTS:
    _EVENT_KIND[_name] = "kill_blocked"
for _name in _PATH_EVENTS:
    _EVENT_KIND[_name] = "path"

# Another process's environment holds the caller's credentials (the worker's
# own was whitelisted), and its memory holds the same strings.
_FOREIGN_PROC_RE = re.compile(r"^/proc/(\d+)(?:/task/\d+)?/(environ|mem)$")
_PROC_WHAT = {"environ": "environment", "mem": "memory"}

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_WRITABLE_DEVICES = frozenset(["/dev/null", "/dev/stdout", "/dev/stderr"])
_ADDRESS_RE = re.compile(r" at 0x[0-9a-fA-F]+")


class _Timeout(BaseException):
    """Raised by the timer; a BaseException so `except Exception` lets it pass."""


class _ExitAttempt(BaseException):
    """Raised in place of os._exit so the process survives the verifier."""


class _State(object):
    pass


S = _State()
S.active = False  # True only while verifier code runs (import or call)
S.armed = False
# The call timers may still be set (a call leaves them to the next one).
S.timer_live = False
S.timed_out = False
S.exit_detail = None
S.effects = []
S.workdir = ""
S.workdir_real = ""
S.workdir_prefix = ""
S.call_timeout = 2.0
S.messages = True
S.completion_format = "messages"
S.fn = None
S.plan = None
# The plan in the form each call reads it (see _call_form).
S.positional = ()
S.keywords = ()
S.whole_pool = False
S.is_async = False
S.loop = None
S.ready = False
S.file_baseline = frozenset()
S.workdir_touched = False
S.env_baseline = {}
# Directories the verifier may write (its home and its temp directory).
S.writable_prefixes = ()
# In the bubblewrap sandbox every process the verifier starts stays inside
# it, without network and with a read-only filesystem, so starting programs
# is allowed; without it only a fork (which keeps this audit hook) is.
S.isolated = False
S.main_pid = os.getpid()
S.forks = 0
S.popen_pending = False
# The trusted supervisor this worker was forked from (see _Supervisor).
S.supervisor_pid = None
S.calls_since_sweep = 0
STRAY_SWEEP_CALLS = 32
# Children alive when the verifier's set-up (import and warm-up) ended: its
# own long-lived helpers (see _helper_roots).
S.setup_children = frozenset()
# Replies not yet sent (see _Outbox); set in the worker.
S.outbox = None
# A time limit of the verifier's own expired in the current call.
S.own_timer = False
# The region replies wait in (see _Outbox); before the ready reply, the
# warm-up's marker (see _warm_up).
S.region = None
S.init_line = b""


# ---------------------------------------------------------------- utilities


def _scrub(text):
    """Keep results identical across runs: the workdir and object addresses vary."""
    if S.workdir_real:
        text = text.replace(S.workdir_real, "<workdir>")
    if S.workdir and S.workdir != S.workdir_real:
        text = text.replace(S.workdir, "<workdir>")
    if " at 0x" in text:
        text = _ADDRESS_RE.sub(" at 0x?", text)
    return text


def _clip(text, limit):
    text = _scrub(text)
    if len(text) > limit:
        return text[: limit - 3] + "..."
    return text


def _safe_str(value):
    try:
        return str(value)
    except BaseException:
        return "<unprintable %s>" % type(value).__name__


def _safe_repr(value):
    try:
        return repr(value)
    except BaseException:
        return "<unreprable %s>" % type(value).__name__


def _record(kind, detail):
    if len(S.effects) < MAX_EFFECTS:
        S.effects.append({"kind": kind, "detail": _clip(detail, DETAIL_LIMIT)})


def _decode_json(line):
    # Decoding to str first skips json.loads' encoding sniffing, a visible
    # share of the per-request cost.
    text = line.decode("utf-8", "replace")
    if _scan_once is not None:
        # A line that is one value with nothing around it scans as decode()
        # would scan it; anything else (whitespace, extra data, no value at
        # all) goes through decode(), which also words the error.
        try:
            value, end = _scan_once(text, 0)
        except StopIteration:
            return _decode_text(text)
        if end == len(text):
            return value
    return _decode_text(text)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        written = _os_write(fd, view)
        view = view[written:]


def _send(data):
    if _in_child():
        _real_exit(0)
    try:
        _write_all(REPLY_FD, data)
    except OSError:
        # Nobody is listening any more; there is nothing useful left to do.
        _abandon()


# Replies wait in memory shared with the supervisor and leave in blocks: one
# pipe write per block instead of one per call, which is most of what a fast
# verifier's call costs the worker and the supervisor. A block leaves when
# the worker has answered every request it holds, when it reaches
# REPLY_BLOCK_BYTES, or when its first reply is REPLY_BLOCK_SECONDS old, so
# gatekept's per-call deadline still sees replies flow. When the worker dies
# the supervisor reads the complete replies not yet sent from the shared
# memory and passes them on, so a crash is still pinned on the call that
# caused it. The region starts with two counters the worker writes: the
# bytes of complete replies held, and how many replies were sent before them.
REPLY_REGION_BYTES = 1 << 20
REPLY_BLOCK_BYTES = 1 << 16
REPLY_BLOCK_SECONDS = 0.02
_REGION_HEADER = 16
_pack_into = struct.pack_into
_unpack_from = struct.unpack_from
_pack_used = struct.Struct("<Q").pack_into


class _Outbox(object):
    def __init__(self, region):
        self.region = region
        self.room = len(region) - _REGION_HEADER
        self.used = 0
        self.held = 0
        self.sent = 0
        self.since = 0.0

    def put(self, reply):
        if _getpid() != S.main_pid:
            _real_exit(0)
        size = len(reply)
        used = self.used
        if used + size > self.room:
            self.flush()
            if size > self.room:
                _send(reply)
                self.sent += 1
                _pack_into("<QQ", self.region, 0, 0, self.sent)
                return
            used = 0
        if used == 0:
            self.since = _perf_counter()
        start = _REGION_HEADER + used
        region = self.region
        region[start : start + size] = reply
        self.used = used = used + size
        self.held += 1
        _pack_used(region, 0, used)
        if used >= REPLY_BLOCK_BYTES or _perf_counter() - self.since >= REPLY_BLOCK_SECONDS:
            self.flush()

    def flush(self):
        if self.used == 0:
            return
        _send(self.region[_REGION_HEADER : _REGION_HEADER + self.used])
        self.sent += self.held
        self.used = 0
        self.held = 0
        _pack_into("<QQ", self.region, 0, 0, self.sent)


def _unsent_replies(region, passed):
    """Complete replies the worker held when it died that the supervisor has
    not passed on (it passed `passed` of them); b"" when the counters make no
    sense, as when the verifier wrote over them."""
    used, sent = _unpack_from("<QQ", region, 0)
    if used > len(region) - _REGION_HEADER or sent > passed:
        return b""
    data = region[_REGION_HEADER : _REGION_HEADER + used]
    lines = data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]
    return b"".join(line + b"\n" for line in lines[passed - sent :])


def _error_info(kind, exc, message=None):
    if message is None:
        message = "%s: %s" % (type(exc).__name__, _safe_str(exc)) if exc is not None else ""
    tb = ""
    if exc is not None:
        try:
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        except BaseException:
            tb = ""
    tb = _scrub(tb)
    if len(tb) > TRACEBACK_LIMIT:
        tb = tb[-TRACEBACK_LIMIT:]
    return {
        "kind": kind,
        "type": type(exc).__name__ if exc is not None else "Error",
        "message": _clip(message, MESSAGE_LIMIT),
        "traceback": tb,
    }


# ------------------------------------------------------------ output capture


class _CountingBytes(object):
    def __init__(self, owner):
        self._owner = owner

    def write(self, data):
        data = bytes(data)
        self._owner._take(data)
        return len(data)

    def flush(self):
        self._owner.flush()

    def writable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        return self._owner.fileno()


class _CountingWriter(object):
    """Stands in for sys.stdout/sys.stderr: counts bytes, forwards a capped prefix."""

    encoding = "utf-8"
    errors = "backslashreplace"
    closed = False
    newlines = None
    line_buffering = False

    def __init__(self, fd, label):
        self._fd = fd
        self.label = label
        self.count = 0
        self._forwarded = 0
        self._pending = []
        self._pending_size = 0
        self.buffer = _CountingBytes(self)

    def reset(self):
        self.count = 0
        self._forwarded = 0

    def _take(self, data):
        size = len(data)
        self.count += size
        room = OUTPUT_FORWARD_BYTES - self._forwarded
        if room <= 0:
            return
        if size > room:
            data = data[:room]
            size = room
        self._forwarded += size
        self._pending.append(data)
        self._pending_size += size
        if self._pending_size >= 8192:
            self.flush()

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not %s" % type(text).__name__)
        self._take(text.encode("utf-8", "backslashreplace"))
        return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending = []
        self._pending_size = 0
        try:
            _write_all(self._fd, data)
        except OSError:
            pass

    def fileno(self):
        return self._fd

    def isatty(self):
        return False

    def writable(self):
        return True

    def readable(self):
        return False

    def seekable(self):
        return False

    def close(self):
        pass


_STDOUT = _CountingWriter(1, "stdout")
_STDERR = _CountingWriter(2, "stderr")


def _install_writers():
    sys.stdout = sys.__stdout__ = _STDOUT
    sys.stderr = sys.__stderr__ = _STDERR


# ---------------------------------------------------------------- isolation


_PROC_FD_DIR = "/proc/self/fd"
_HAS_PROC_FD = os.path.isdir(_PROC_FD_DIR)


def _resolve(path, dir_fd=None):
    """Absolute, symlink-free form of a path as the OS would see it, or None."""
    try:
        text = _fsdecode(_fspath(path))
    except BaseException:
        return None
    try:
        # os.rename and os.replace report a missing dir_fd as -1 (AT_FDCWD is
        # the kernel's own spelling of it): both mean the working directory.
        if isinstance(dir_fd, int) and not isinstance(dir_fd, bool) and dir_fd >= 0 and _HAS_PROC_FD:
            base = _realpath("%s/%d" % (_PROC_FD_DIR, dir_fd))
        else:
            base = _getcwd()
    except OSError:
        base = S.workdir_real
    try:
        return _realpath(_path_join(base, text))
    except BaseException:
        return None


def _writable_path(path, dir_fd=None):
    """Inside a writable directory, or a harmless device. The directory itself
    counts: a directory opens for writing only with O_TMPFILE, an unnamed file
    inside it (tempfile.TemporaryFile)."""
    try:
        if _fsdecode(_fspath(path)) in _WRITABLE_DEVICES:
            return True
    except BaseException:
        return False
    full = _resolve(path, dir_fd)
    if full is None:
        return False
    inside = full + os.sep
    return any(full.startswith(prefix) or inside == prefix for prefix in S.writable_prefixes)


def _describe_path(path, dir_fd=None):
    full = _resolve(path, dir_fd)
    return full if full is not None else _safe_repr(path)


def _foreign_proc_read(path):
    """What a read of `path` would expose of another process, or None."""
    full = _resolve(path)
    if full is None or not full.startswith("/proc/"):
        return None
    match = _FOREIGN_PROC_RE.match(full)
    if match is None:
        return None
    pid = int(match.group(1))
    if pid == _getpid():
        return None
    # No pid in the detail: records must not vary from run to run.
    whose = "its parent's" if pid == _getppid() else "another process's"
    return "read of %s %s (/proc/<pid>/%s)" % (whose, _PROC_WHAT[match.group(2)], match.group(2))


def _block(kind, detail):
    _record(kind, detail)
    raise PermissionError(errno.EACCES, "blocked by gatekept: " + detail)


def _kill_target(event, args):
    target = args[0] if args else None
    if event == "signal.pthread_kill":
        return "a thread of the verifier process"
    if event == "os.killpg":
        try:
            own = target == os.getpgrp()
        except OSError:
            own = False
        return "its own process group" if own else "another process group"
    if target == os.getpid():
        return "itself"
    if target == os.getppid():
        return "its parent"
    if target == 0:
        return "its own process group"
    if target == -1:
        return "every process it may signal"
    if isinstance(target, int) and target < 0:
        return "a process group"
    return "another process"


def _own_descendant_target(event, args):
    """A verifier may start, signal, wait for and stop its own children (a
    pool it made, a checker run with a timeout): a signal to one of the
    calling process's descendants, or to a process group one of them leads,
    is allowed. Its own group, its parent, the supervisor and anything else
    stay out of reach."""
    if event not in ("os.kill", "os.killpg") or not args:
        return False
    target = args[0]
    if type(target) is not int or target <= 1:
        return False
    if event == "os.killpg":
        try:
            if target == os.getpgrp():
                return False
        except OSError:
            return False
    return target in _descendants(_getpid())


def _describe_process(event, args):
    if event in ("os.fork", "os.forkpty"):
        return event
    if event == "os.system":
        return "os.system: " + (_fsdecode(args[0]) if args and isinstance(args[0], (bytes, str)) else "")
    if event == "subprocess.Popen":
        return "subprocess.Popen: " + _safe_repr(args[1] if len(args) > 1 and args[1] is not None else args[0])
    if event == "os.spawn":
        return "os.spawn: " + _safe_repr(args[1] if len(args) > 1 else args)
    return event + ": " + _safe_repr(args[0] if args else "")


def _own_unix_address(event, args):
    """A unix socket of the verifier's own: bound or reached at a path in a
    directory it may write (multiprocessing's managers and fork server listen
    in a temporary directory), or, in the sandbox, at an abstract address,
    which its network namespace keeps from every host service."""
    if event not in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg") or len(args) < 2:
        return False
    family = getattr(args[0], "family", None)
    if family != getattr(_socket_module(), "AF_UNIX", None):
        return False
    address = args[1]
    if address is None:
        # Sent on a connected socket: its peer passed this check at connect().
        return True
    if isinstance(address, (str, bytes)) and address[:1] in ("\0", b"\0"):
        return S.isolated
    try:
        return isinstance(address, (str, bytes, os.PathLike)) and _writable_path(address)
    except BaseException:
        return False


def _socket_module():
    return sys.modules.get("socket")


def _describe_network(event, args):
    if event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
        return event + ": " + _safe_repr(args[1] if len(args) > 1 else "")
    if event == "socket.getaddrinfo":
        host = args[0] if args else ""
        port = args[1] if len(args) > 1 else ""
        return "%s: %s port %s" % (event, _safe_repr(host), _safe_repr(port))
    return event + ": " + _safe_repr(args[0] if args else "")


def _audit(event, args):
    if not S.active:
        return
    kind = _EVENT_KIND.get(event)
    if kind is None:
        return
    if kind == "open":
        if len(args) < 3:
            return
        path, mode, flags = args[0], args[1], args[2]
        if isinstance(flags, int):
            writing = flags & _WRITE_FLAGS
        else:
            writing = isinstance(mode, str) and any(c in mode for c in "wax+")
        if not writing:
            if not isinstance(path, int):
                exposed = _foreign_proc_read(path)
                if exposed is not None:
                    _block("file_read_blocked", exposed)
            return
        if isinstance(path, int):
            if path in (REQUEST_FD, REPLY_FD):
                _block("file_write_blocked", "open for writing: fd %d" % path)
            return
        if not _writable_path(path):
            _block("file_write_blocked", "open for writing: " + _describe_path(path))
        S.workdir_touched = True
        return
    if kind == "path":
        for index, fd_index in _PATH_EVENTS[event]:
            if index >= len(args):
                continue
            path = args[index]
            if path is None or isinstance(path, int):
                continue
            dir_fd = args[fd_index] if fd_index is not None and fd_index < len(args) else None
            if not _writable_path(path, dir_fd):
                _block("file_write_blocked", event + ": " + _describe_path(path, dir_fd))
        S.workdir_touched = True
        return
    if kind == "network_blocked":
        if _own_unix_address(event, args):
            return
        _block(kind, _describe_network(event, args))
    if kind == "subprocess_blocked":
        _child_process(event, args)
    if kind == "kill_blocked":
        if _own_descendant_target(event, args):
            return
        sig = args[1] if len(args) > 1 else "?"
        _block(kind, "%s to %s (signal %s)" % (event, _kill_target(event, args), sig))


# Child processes one call may start: enough for a checker run in a child
# with a timeout, or a small pool; a fork bomb stops here.
MAX_CHILD_PROCESSES = 32
_FORK_EVENTS = ("os.fork", "os.forkpty")


def _child_process(event, args):
    """Allow a child process within limits and record it. A fork keeps this
    hook, so it is allowed everywhere; a new program does not, so outside the
    sandbox it is refused."""
    detail = _describe_process(event, args)
    if not S.isolated and event not in _FORK_EVENTS:
        _block("subprocess_blocked", detail)
    # Popen goes on to fork_exec, which must not count the same child twice.
    S.popen_pending = event == "subprocess.Popen"
    S.forks += 1
    if S.forks > MAX_CHILD_PROCESSES:
        _block("subprocess_blocked", "more than %d child processes in one call (%s)" % (MAX_CHILD_PROCESSES, detail))
    _record("process", detail)


def _guard_fork_exec():
    """multiprocessing's spawn and forkserver methods start interpreters through
    _posixsubprocess.fork_exec, which raises no audit event of its own."""
    if _posixsubprocess is None:
        return
    original = _posixsubprocess.fork_exec

    def fork_exec(*args, **kwargs):
        if S.active:
            if S.popen_pending:
                S.popen_pending = False
            else:
                argv = args[0] if args else kwargs.get("args")
                _child_process("_posixsubprocess.fork_exec", (argv,))
        return original(*args, **kwargs)

    _posixsubprocess.fork_exec = fork_exec


def _in_child():
    return _getpid() != S.main_pid


def _after_fork_in_child():
    # A child of the verifier runs the verifier's code, never the protocol:
    # it must not answer requests, and its exits are real.
    S.ready = False


def _die_with_parent():
    """Ask Linux to SIGKILL this worker when gatekept dies, however it dies:
    a call stuck in C code never reads the end of its request pipe."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _guarded_exit(code=0):
    if S.active and not _in_child():
        S.exit_detail = "os._exit(%s)" % _safe_repr(code)
        raise _ExitAttempt(S.exit_detail)
    _real_exit(code)


def _on_timer(signum, frame):
    if not S.armed:
        return
    S.timed_out = True
    raise _Timeout()


# Plain ints: the signal module's names are enum members behind module
# lookups, paid twice per call otherwise.
_SIGALRM = int(signal.SIGALRM)
_SIGPROF = int(signal.SIGPROF)
_ITIMER_REAL = signal.ITIMER_REAL
_ITIMER_PROF = signal.ITIMER_PROF


def _arm(seconds, wall=None):
    # Both timers are set anew for every call, never left running from the
    # one before: a call that ends in time must never see a signal (C code
    # the verifier runs may not retry a syscall interrupted by one).
    if _getsignal(_SIGALRM) is not _on_timer:
        _signal(_SIGALRM, _on_timer)
    if _getsignal(_SIGPROF) is not _on_timer:
        _signal(_SIGPROF, _on_timer)
    S.timed_out = False
    S.armed = True
    S.timer_live = True
    _setitimer(_ITIMER_REAL, wall or seconds, TIMER_REPEAT_SECONDS)
    # A verifier that uses SIGALRM itself (math_verify does) cancels the
    # real-time timer; the CPU-time one still catches busy loops.
    _setitimer(_ITIMER_PROF, seconds, TIMER_REPEAT_SECONDS)


def _disarm():
    S.armed = False
    S.timer_live = False
    _setitimer(_ITIMER_REAL, 0)
    _setitimer(_ITIMER_PROF, 0)


def _set_limit(which, value):
    try:
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY and value > hard:
            value = hard
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            resource.setrlimit(which, (value, hard))
    except (ValueError, OSError, AttributeError):
        pass


def _apply_limits(memory_mb):
    if memory_mb and memory_mb > 0:
        _set_limit(resource.RLIMIT_AS, int(memory_mb) * 1024 * 1024)
    _set_limit(resource.RLIMIT_CORE, 0)
    _set_limit(resource.RLIMIT_FSIZE, 64 * 1024 * 1024)
    _set_limit(resource.RLIMIT_NOFILE, 256)
    try:
        # Past RLIMIT_FSIZE a write should fail with EFBIG, not kill us.
        _signal(signal.SIGXFSZ, signal.SIG_IGN)
    except (ValueError, OSError, AttributeError):
        pass


def _environ_data():
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict):
        return data
    return dict(os.environ)


def _diff_workdir():
    try:
        names = _listdir(S.workdir_real)
    except OSError:
        return
    if len(names) == len(S.file_baseline) and S.file_baseline.issuperset(names):
        return
    current = set(names)
    for name in sorted(current - S.file_baseline):
        _record("file_created", name)
        full = _path_join(S.workdir_real, name)
        try:
            if stat.S_ISDIR(_lstat(full).st_mode):
                _rmtree(full, ignore_errors=True)
            else:
                _unlink(full)
        except OSError:
            pass
    S.file_baseline = frozenset(current & S.file_baseline)


def _child_pids():
    pids = set()
    try:
        tasks = _listdir("/proc/self/task")
    except OSError:
        return pids
    for task in tasks:
        try:
            with _open("/proc/self/task/%s/children" % task, "rb") as handle:
                pids.update(int(pid) for pid in handle.read().split())
        except (OSError, ValueError):
            continue
    return pids


# More helpers than this alive at once is a pool made per call and never
# shut down: they are no longer spared.
MAX_HELPER_PROCESSES = 64


def _helper_roots():
    """Processes the verifier keeps as long-lived helpers, as it keeps a
    module-level cache or a thread: processes alive when its set-up (import
    and warm-up) ended, and the workers of its process pools (concurrent.futures'
    ProcessPoolExecutor, multiprocessing's Pool), whenever started. They and
    their descendants may live while the worker lives; the supervisor ends
    them with it. Also the fork server and resource tracker multiprocessing
    runs for them, though not what else the fork server starts (a bare
    Process left running is a stray like any other). Returns (roots whose
    subtrees are kept, processes kept alone)."""
    roots = set(S.setup_children)
    alone = set()
    if "multiprocessing.process" not in sys.modules:
        return roots, alone
    try:
        for child in _pool_processes():
            pid = getattr(getattr(child, "_popen", None), "pid", None)
            if type(pid) is int:
                roots.add(pid)
    except Exception:
        pass
    for name, holder, field in (
        ("multiprocessing.forkserver", "_forkserver", "_forkserver_pid"),
        ("multiprocessing.resource_tracker", "_resource_tracker", "_pid"),
    ):
        module = sys.modules.get(name)
        pid = getattr(getattr(module, holder, None), field, None) if module is not None else None
        if type(pid) is int:
            alone.add(pid)
    return roots, alone


def _pool_processes():
    """The worker processes of the live process pools: each ProcessPoolExecutor
    has a manager thread that holds them (registered in _threads_wakeups), each
    multiprocessing Pool a thread that replaces them, given the list of them."""
    futures = sys.modules.get("concurrent.futures.process")
    if futures is not None:
        for thread in list(getattr(futures, "_threads_wakeups", {}).keys()):
            processes = getattr(thread, "processes", None)
            if processes:
                yield from list(processes.values())
    pool = sys.modules.get("multiprocessing.pool")
    threading = sys.modules.get("threading")
    handler = getattr(getattr(pool, "Pool", None), "_handle_workers", None) if pool is not None else None
    if handler is None or threading is None:
        return
    process = sys.modules["multiprocessing.process"].BaseProcess
    for thread in threading.enumerate():
        if getattr(thread, "_target", None) is not handler:
            continue
        for arg in getattr(thread, "_args", ()):
            if type(arg) is list and arg and all(isinstance(item, process) for item in arg):
                yield from list(arg)


def _kept_processes(tree):
    """The helpers among `tree` (the worker's descendants), with their own
    descendants."""
    roots, alone = _helper_roots()
    kept = set(pid for pid in tree if pid in alone)
    if not roots:
        return kept
    parents = _parent_map(tree)
    for pid in tree:
        node = pid
        while node is not None:
            if node in roots:
                kept.add(pid)
                break
            node = parents.get(node)
    if len(kept) > MAX_HELPER_PROCESSES:
        _record("process", "more than %d pool processes alive at once (pools not shut down): killed" % MAX_HELPER_PROCESSES)
        return set(pid for pid in kept if pid in S.setup_children)
    return kept


def _parent_map(pids):
    parents = {}
    for pid in pids:
        try:
            with _open("/proc/%d/stat" % pid, "rb") as handle:
                text = handle.read()
            parents[pid] = int(text[text.rfind(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return parents


def _sweep_due():
    """In the sandbox's PID namespace /proc lists only its own processes, so
    what the verifier started is found however it detached (setsid, a double
    fork). Listing /proc costs as much as a fast call; a call that forked where
    the hook saw it is checked at once, the rest every STRAY_SWEEP_CALLS calls.
    Counted in calls, not left to the supervisor's sweeps (which follow the
    batches, and so the clock), so the record does not vary between runs."""
    if not S.isolated:
        return False
    S.calls_since_sweep += 1
    if S.forks == 0 and S.calls_since_sweep < STRAY_SWEEP_CALLS:
        return False
    S.calls_since_sweep = 0
    return True


def _kill_and_reap(pids, children):
    for pid in pids:
        try:
            _kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for pid in pids:
        if pid in children:
            try:
                _waitpid(pid, 0)
            except OSError:
                pass


def _reap_children():
    """The worker itself never starts a process, so any process below it was
    started by the verifier. Helpers (see _helper_roots) may outlive the call
    that started them; nothing else may. The supervisor looks again once the
    worker is idle, beyond this interpreter's reach (which a verifier could
    patch), at what left the worker's tree."""
    sweep = _sweep_due()
    if not sweep and _waitid is not None:
        # The usual case, one syscall: ChildProcessError, no children at all.
        # WNOWAIT: an exit status is only looked at, never taken from code
        # that waits for its own child.
        try:
            _waitid(_P_ALL, 0, _WAIT_ANY)
        except ChildProcessError:
            return
        except OSError:
            pass
    me = _getpid()
    tree = _descendants(me)
    kept = _kept_processes(tree) if tree else set()
    children = _child_pids()
    strays = [pid for pid in tree if pid not in kept and not _is_zombie(pid)]
    if sweep:
        keep = set((1, me, S.supervisor_pid))
        keep.update(tree)
        try:
            names = _listdir("/proc")
        except OSError:
            names = []
        strays.extend(int(name) for name in names if name.isdigit() and int(name) not in keep)
    _kill_and_reap(strays, children)
    # Exited children that are no helper's are reaped; a helper's exit status
    # is left to the code that waits for it (multiprocessing polls its own).
    reaped = False
    for pid in children:
        if pid not in kept and pid not in strays:
            try:
                reaped = _waitpid(pid, _WNOHANG)[0] == pid or reaped
            except OSError:
                pass
    if strays:
        _record("process", "%d process(es) still running after the call (killed)" % len(strays))
    elif reaped:
        _record("process", "a child process was started by the call")


def _housekeeping():
    """Undo what the call changed around it and record what it was."""
    _reap_children()
    # Most calls print nothing: the writers are only entered when they hold
    # something to pass on.
    for writer in (_STDOUT, _STDERR):
        if writer._pending:
            writer.flush()
        if writer.count > OUTPUT_REPORT_BYTES:
            _record("output", "%s: %d bytes" % (writer.label, writer.count))
    if sys.stdout is not _STDOUT or sys.stderr is not _STDERR:
        _install_writers()

    # Asked every call: C code can change directory without an audit event.
    workdir = S.workdir_real
    try:
        cwd = _getcwd()
    except OSError:
        cwd = None
    if cwd != workdir:
        try:
            _chdir(workdir)
        except OSError:
            pass

    # Listing the workdir is the dearest step of a call, so it only happens
    # when the audit hook saw a write there. What C code writes is found by
    # gatekept itself, which compares the whole workdir after every batch.
    if S.workdir_touched:
        S.workdir_touched = False
        _diff_workdir()

    # Compared every call: writing os.environ._data (or replacing os.environ)
    # changes what the verifier's later code sees without any audit event.
    data = _environ_data()
    if data != S.env_baseline:
        before = S.env_baseline
        changed = set(k for k in data if before.get(k) != data[k])
        changed.update(k for k in before if k not in data)
        for key in sorted(changed, key=_safe_repr):
            name = _fsdecode(key) if isinstance(key, bytes) else _safe_str(key)
            _record("env_changed", name)
            try:
                if key in before:
                    value = before[key]
                    os.environ[name] = _fsdecode(value) if isinstance(value, bytes) else value
                else:
                    del os.environ[name]
            except BaseException:
                pass
        S.env_baseline = dict(_environ_data())


# ------------------------------------------------------------------ loading


_PARSER = _reward.PARSER


def _resolve_attribute(module, dotted):
    value = module
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def _public_callables(module):
    names = []
    for name in sorted(vars(module)):
        if name.startswith("_"):
            continue
        try:
            value = getattr(module, name)
        except BaseException:
            continue
        if isinstance(value, types.FunctionType):
            names.append(name)
    return names


def _module_name_for_file(path):
    stem = os.path.splitext(os.path.basename(path))[0]
    taken = stem in sys.modules or stem in getattr(sys, "stdlib_module_names", ())
    if stem.isidentifier() and not taken:
        return stem
    return "gatekept_verifier_module"


def _build_plan(fn, label):
    """Decide once how each call fills the signature from the keyword pool."""
    plan, missing = _reward.build_plan(fn)
    if missing:
        quoted = ", ".join("'%s'" % name for name in missing)
        message = "%s requires %s, which gatekept cannot supply; it passes %s" % (
            label,
            quoted,
            ", ".join(POOL_NAMES),
        )
        if GROUP_NAMES.intersection(missing):
            message += " (this looks like a group-level reward; gatekept scores one completion per call)"
        return None, message
    return plan, None


def _is_async_callable(fn):
    # A plain function (see gatekept_reward.parameters) says so in its code
    # flags, which is all inspect would read; anything else is left to inspect.
    if type(fn) is types.FunctionType and not fn.__dict__:
        return bool(fn.__code__.co_flags & _CO_COROUTINE)
    import inspect

    if inspect.iscoroutinefunction(fn):
        return True
    # The class's own __call__ (not callable(fn)): an instance with an async
    # __call__ is awaited like an async function.
    call = getattr(type(fn), "__call__", None)  # noqa: B004
    return call is not None and not inspect.isfunction(fn) and inspect.iscoroutinefunction(call)


def _import_target(target, import_timeout, import_wall):
    """Import the verifier; returns the module or raises a tagged error."""
    kind = target.get("kind")
    if kind == "file":
        path = target.get("path") or ""
        if not os.path.isfile(path):
            raise _LoadError("file_not_found", None, "no such file: %s" % path)
        directory = os.path.dirname(os.path.abspath(path))
        if directory not in sys.path:
            sys.path.insert(0, directory)
        name = _module_name_for_file(path)
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise _LoadError("import_error", None, "cannot load %s as a Python module" % path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            _run_verifier_code(spec.loader.exec_module, (module,), import_timeout, import_wall)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module
    name = target.get("module") or ""
    return _run_verifier_code(importlib.import_module, (name,), import_timeout, import_wall)


# The largest verifier source the loader hashes for the record.
SOURCE_HASH_LIMIT = 64 << 20


def _locate(target):
    """The file the import will load, found without running any of the
    verifier's code (a dotted name is walked by the path finder, not imported
    parent by parent), and the sha256 of its bytes: the record names what was
    imported, not what the module says its __file__ is."""
    import hashlib
    from importlib.machinery import PathFinder

    origin = None
    if target.get("kind") == "file":
        origin = os.path.abspath(target.get("path") or "")
    else:
        locations = None
        spec = None
        parts = (target.get("module") or "").split(".")
        for index in range(len(parts)):
            try:
                spec = PathFinder.find_spec(".".join(parts[: index + 1]), locations)
            except (ImportError, ValueError, AttributeError):
                spec = None
            if spec is None:
                break
            locations = spec.submodule_search_locations
            if index < len(parts) - 1 and locations is None:
                spec = None
                break
        if spec is not None and isinstance(spec.origin, str) and os.path.isabs(spec.origin):
            origin = spec.origin
    if origin is None:
        return None, None
    try:
        fd = os.open(origin, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return origin, None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return origin, None
        digest = hashlib.sha256()
        left = SOURCE_HASH_LIMIT
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                return origin, digest.hexdigest()
            digest.update(chunk)
            left -= len(chunk)
        return origin, None
    except OSError:
        return origin, None
    finally:
        os.close(fd)


class _LoadError(Exception):
    def __init__(self, kind, exc, message):
        Exception.__init__(self, message)
        self.kind = kind
        self.exc = exc
        self.message = message


def _run_verifier_code(func, args, timeout, wall=None):
    S.exit_detail = None
    if timeout:
        _arm(timeout, wall)
    S.active = True
    try:
        return func(*args)
    finally:
        S.active = False
        if timeout:
            _disarm()


def _classify_import_failure(target, exc):
    if isinstance(exc, _LoadError):
        return _error_info(exc.kind, exc.exc, exc.message)
    if isinstance(exc, _Timeout) or S.timed_out:
        return _error_info("import_timeout", exc, "importing the verifier did not finish in time")
    if isinstance(exc, ModuleNotFoundError) and target.get("kind") == "module":
        wanted = target.get("module") or ""
        missing = exc.name or ""
        if missing and (wanted == missing or wanted.startswith(missing + ".")):
            return _error_info("module_not_found", exc)
    if isinstance(exc, SyntaxError):
        return _error_info("syntax_error", exc)
    if isinstance(exc, (_ExitAttempt, SystemExit)):
        detail = S.exit_detail or "sys.exit(%s)" % _safe_repr(getattr(exc, "code", None))
        return _error_info("import_error", exc, "the verifier called %s while being imported" % detail)
    return _error_info("import_error", exc)


def _neutral_main():
    """The verifier sees an ordinary program: no harness as __main__, no
    harness path in argv."""
    # Held here: the harness module must stay alive once it is no longer __main__.
    S.harness_main = sys.modules.get("__main__")
    main = types.ModuleType("__main__")
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    sys.argv = [""]


def _init(request):
    target = request.get("target") or {}
    fn_name = target.get("fn") or ""
    S.messages = request.get("completion_format", "messages") != "string"
    S.completion_format = "messages" if S.messages else "string"
    S.call_timeout = max(float(request.get("call_timeout_ms") or 2000), 1.0) / 1000.0
    # The import's limit is CPU time (ITIMER_PROF: every thread of this
    # process), which a busy machine does not stretch; the wall clock only
    # bounds an import that waits instead of working.
    import_timeout = float(request.get("import_timeout_ms") or 0) / 1000.0
    import_wall = float(request.get("import_wall_ms") or 0) / 1000.0 or None
    S.workdir = request.get("workdir") or _getcwd()
    S.workdir_real = _realpath(S.workdir)
    S.workdir_prefix = S.workdir_real.rstrip(os.sep) + os.sep
    writable = [p for p in (request.get("writable") or [S.workdir]) if isinstance(p, str)]
    S.writable_prefixes = tuple(_realpath(p).rstrip(os.sep) + os.sep for p in writable)
    S.isolated = bool(request.get("isolated"))
    S.main_pid = _getpid()
    try:
        os.register_at_fork(after_in_child=_after_fork_in_child)
    except (AttributeError, ValueError):
        pass

    _apply_limits(request.get("memory_mb") or 0)
    _install_writers()
    try:
        _chdir(S.workdir_real)
    except OSError:
        pass

    harness_dir = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != harness_dir]
    extra = [p for p in (request.get("pythonpath") or []) if isinstance(p, str)]
    sys.path[:0] = [p for p in extra if p not in sys.path]

    _neutral_main()
    os._exit = _guarded_exit
    posix._exit = _guarded_exit
    _guard_fork_exec()
    sys.addaudithook(_audit)

    label = "%s:%s" % (target.get("module") or target.get("path") or "?", fn_name)
    # Said before the verifier's first line runs, so what its import writes
    # cannot come first: the supervisor puts it into the ready message.
    source_file, sha256 = _locate(target)
    _send(_encode_reply({"op": "loading", "source_file": source_file, "sha256": sha256}))
    started = _perf_counter()
    try:
        module = _import_target(target, import_timeout, import_wall)
    except BaseException as exc:
        return {"op": "ready", "ok": False, "error": _classify_import_failure(target, exc)}
    finally:
        S.effects = []
    import_ms = round((_perf_counter() - started) * 1000.0, 3)

    try:
        fn = _resolve_attribute(module, fn_name)
    except AttributeError as exc:
        available = _public_callables(module)
        message = "%s has no attribute '%s'" % (getattr(module, "__name__", "the module"), fn_name)
        if available:
            message += "; functions defined there: " + ", ".join(available[:20])
        return {"op": "ready", "ok": False, "error": _error_info("attribute_error", exc, message)}
    if not callable(fn):
        message = "%s is a %s, not a function" % (label, type(fn).__name__)
        return {"op": "ready", "ok": False, "error": _error_info("not_callable", None, message)}
    try:
        plan, problem = _build_plan(fn, label)
    except (TypeError, ValueError) as exc:
        plan, problem = None, "cannot read the signature of %s: %s" % (label, _safe_str(exc))
    if plan is None:
        return {"op": "ready", "ok": False, "error": _error_info("not_callable", None, problem)}

    S.fn = fn
    S.plan = plan
    S.positional, S.keywords, S.whole_pool = _call_form(plan)
    S.is_async = _is_async_callable(fn)
    if S.is_async:
        _event_loop()
    # Whatever the import left behind (caches, env tweaks) is the verifier's
    # own setup; only changes made by calls are reported.
    try:
        S.file_baseline = frozenset(_listdir(S.workdir_real))
    except OSError:
        S.file_baseline = frozenset()
    S.workdir_touched = False
    S.env_baseline = dict(_environ_data())
    S.setup_children = frozenset(pid for pid in _descendants(_getpid()) if not _is_zombie(pid))
    _watch_own_timers()
    if request.get("warm_up", True):
        _warm_up()
    # Modules the warm-up imported may hold waits of their own.
    _watch_own_timers()
    _STDOUT.flush()
    _STDERR.flush()
    S.ready = True
    return {
        "op": "ready",
        "ok": True,
        "params": plan["params"],
        "var_kwargs": plan["var_kwargs"],
        "is_async": S.is_async,
        "python": "%d.%d.%d" % tuple(sys.version_info[:3]),
        "source_file": None,
        "sha256": None,
        "import_ms": import_ms,
    }


# ------------------------------------------------------------ set-up

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


# What the reply region's header holds while the worker warms up.
WARMING = b"gatekept-warming"

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
    if "thread" not in _WATCHED:
        _WATCHED.add("thread")
        import threading

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


# ------------------------------------------------------------------ calling


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


def _ms_json(ms):
    """repr(round(ms, 3)), the JSON of the reply's duration, without round():
    "%.3f" rounds the same way (both round the exact binary value to three
    decimals), and a decimal of at most 15 significant digits is the shortest
    text of the float nearest it, which is what repr() writes."""
    if 0.0 <= ms < 1e11:
        text = "%.3f" % ms
        text = text.rstrip("0")
        return text + "0" if text[-1] == "." else text
    return repr(round(ms, 3))


def _encode_result(request_id, status, reward, reward_type, nonfinite, error, effects, ms, cpu_ms, own_timer):
    """One reply line: [id, status, reward, type, non-finite, error, side effects,
    ms, cpu ms, own timer], from the call's duration and the CPU time it used
    in this process, in unrounded milliseconds, and whether a time limit of
    the verifier's own expired in it."""
    if status == "ok" and type(reward) is float and not effects and type(request_id) is int:
        name = _TYPE_JSON.get(reward_type)
        if name is None:
            name = _encode_json(reward_type)
            if len(_TYPE_JSON) < 64:
                _TYPE_JSON[reward_type] = name
        # repr() of a finite float is valid JSON; the reward is finite here.
        return (
            '[%d,"ok",%r,%s,null,null,[],%s,%s,%s]\n'
            % (request_id, reward, name, _ms_json(ms), _ms_json(cpu_ms), "true" if own_timer else "false")
        ).encode("ascii")
    reply = [
        request_id,
        status,
        reward,
        reward_type,
        nonfinite,
        None if error is None else [error["type"], error["message"]],
        [[effect["kind"], effect["detail"]] for effect in effects],
        round(ms, 3),
        round(cpu_ms, 3),
        bool(own_timer),
    ]
    return _encode_json(reply).encode("ascii") + b"\n"


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
    used_loop = False

    started = _perf_counter()
    cpu_started = _process_time()
    try:
        _arm(S.call_timeout)
        S.active = True
        try:
            value = S.fn(*args, **kwargs)
            if type(value) not in _PLAIN_RESULTS and _is_awaitable(value):
                used_loop = True
                value = _await(value)
            reward, reward_type, nonfinite = _normalise(value)
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
        error = {"type": type(exc).__name__, "message": _clip(_safe_str(exc), MESSAGE_LIMIT)}
    elapsed = _perf_counter() - started
    cpu = _process_time() - cpu_started

    if S.exit_detail is not None:
        status = "exit"
    elif S.timed_out:
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

    _housekeeping()
    return _encode_result(request_id, status, reward, reward_type, nonfinite, error, S.effects, elapsed * 1000.0, cpu * 1000.0, S.own_timer)


# --------------------------------------------------------------------- loop


def _protocol_error(message):
    return _encode_json(["error", message]).encode("ascii") + b"\n"


def _encode_reply(reply):
    return _encode_json(reply).encode("ascii") + b"\n"


def _handle(line):
    try:
        request = _decode_json(line)
    except ValueError as exc:
        return _protocol_error("request is not valid JSON: %s" % exc)
    if type(request) is list:
        if not S.ready:
            return _protocol_error("eval before a successful init")
        return _evaluate(request)
    if not isinstance(request, dict):
        return _protocol_error("request is neither an eval list nor a JSON object")
    op = request.get("op")
    if op == "init":
        return _protocol_error("init sent twice")
    if op == "shutdown":
        return None
    return _protocol_error("unknown op %r" % (op,))


def _first_request(line):
    try:
        request = _decode_json(line)
    except ValueError:
        request = None
    if not isinstance(request, dict) or request.get("op") != "init":
        return _protocol_error("the first request must be init")
    return _encode_reply(_init(request))


def _shutdown():
    if S.outbox is not None:
        S.outbox.flush()
    _STDOUT.flush()
    _STDERR.flush()
    # Skip interpreter teardown: threads or atexit handlers left by the
    # verifier must not keep the worker alive.
    _real_exit(0)


def _abandon():
    """gatekept is gone (its pipes closed), so nobody will reap what the
    verifier may have left running in this worker's process group."""
    _STDOUT.flush()
    _STDERR.flush()
    try:
        if _getpgrp() == _getpid():
            _killpg(_getpid(), signal.SIGKILL)
    except OSError:
        pass
    _real_exit(0)


def _serve(first_line, region):
    """The worker: imports the verifier and answers one request at a time."""
    S.region = region
    try:
        reply = _first_request(first_line)
    except BaseException as exc:
        reply = _protocol_error("harness failure: " + _error_info("internal", exc)["traceback"])
    _send(reply)
    outbox = S.outbox = _Outbox(region)
    # The start of a request whose end has not arrived yet.
    tail = b""
    while True:
        outbox.flush()
        # Idle until more requests arrive: the last call's timers must not
        # keep firing while the worker waits.
        if S.timer_live:
            _disarm()
        try:
            chunk = _os_read(REQUEST_FD, 1 << 18)
        except OSError:
            chunk = b""
        if not chunk:
            _abandon()
        # Split where it arrived, so only a request cut in two is copied to be
        # joined, not the whole chunk.
        lines = chunk.split(b"\n")
        if tail:
            lines[0] = tail + lines[0]
        tail = lines.pop()
        for line in lines:
            if not line.strip():
                continue
            try:
                reply = _handle(line)
            except BaseException as exc:
                reply = _protocol_error("harness failure: " + _error_info("internal", exc)["traceback"])
            if reply is None:
                _shutdown()
            # Each reply is complete in the shared memory before the next call
            # starts: if that call kills the process, the supervisor passes on
            # every earlier result and the crash is pinned on the right request.
            outbox.put(reply)


# ------------------------------------------------------- trusted supervisor
#
# The verifier never runs in the process that talks to gatekept. That process,
# the supervisor, reads the init request, forks the worker (which imports and
# calls the verifier) and passes requests and replies between gatekept and
# the worker. It cannot be reached from the worker: it is not dumpable (no
# /proc/<pid>/mem, no ptrace), it holds the only ends of gatekept's pipes, and
# it never runs verifier code. What it knows for itself it reports as its own
# messages, JSON objects, which a worker's reply (always a JSON list) can
# never be: processes left running while the worker is idle (it adopts every
# orphan as a subreaper), and a worker that broke the reply framing. When the
# worker dies, the supervisor dies the same way, so gatekept sees the crash
# as it happened.

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option, value):
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except Exception:
        return False


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


def _descendants(root):
    found = []
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            tasks = _listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for task in tasks:
            try:
                with _open("/proc/%d/task/%s/children" % (pid, task), "rb") as handle:
                    children = [int(child) for child in handle.read().split()]
            except (OSError, ValueError):
                continue
            found.extend(children)
            stack.extend(children)
    return found


def _is_zombie(pid):
    """Whether nothing of the process runs any more. A thread group whose
    leader exited shows the leader as a zombie while its other threads run
    on: it is gone only when every task is."""
    try:
        tasks = _listdir("/proc/%d/task" % pid)
    except OSError:
        return True
    for task in tasks:
        try:
            with _open("/proc/%d/task/%s/stat" % (pid, task), "rb") as handle:
                text = handle.read()
        except OSError:
            continue
        # The state follows the command name, which is in parentheses and may hold spaces.
        if text[text.rfind(b")") + 2 : text.rfind(b")") + 3] not in (b"Z", b"X"):
            return False
    return True


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
        keep.update(_descendants(self.worker))
        if self.isolated:
            try:
                pids = [int(name) for name in _listdir("/proc") if name.isdigit()]
            except OSError:
                pids = []
        else:
            pids = _descendants(self.me)
        return [pid for pid in pids if pid not in keep and not _is_zombie(pid)]

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
            full = _path_join(self.home, name)
            try:
                if stat.S_ISDIR(_lstat(full).st_mode):
                    # shutil's removal works by descriptor on Linux: a link
                    # swapped in while it runs is removed, not followed.
                    _rmtree(full, ignore_errors=True)
                else:
                    _unlink(full)
            except OSError:
                pass
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
                        self.exit_like_worker()
                    self.take(chunk)
                elif fd == worker_fd:
                    self.drain_and_exit()


WARM_UP_POLL_MS = 100


def _rejoin_as_worker(first_line, region, supervisor, ends, others):
    """In a worker forked again by the supervisor (see respawn): take the
    pipes' worker ends as fds 3 and 4, as main() does for the first, and serve."""
    for fd, number in zip(ends, (REQUEST_FD, REPLY_FD), strict=True):
        os.dup2(fd, number, inheritable=False)
    for fd in ends + others:
        os.close(fd)
    _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
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


def _close_inherited():
    """Descriptors the caller's shell left open (`exec 200<secret`) pass
    through Node and bubblewrap: only the standard streams and the two
    protocol pipes stay before any verifier code is imported."""
    try:
        os.closerange(REPLY_FD + 1, os.sysconf("SC_OPEN_MAX"))
    except (OSError, ValueError):
        pass


def main():
    _close_inherited()
    _die_with_parent()
    first_line, buffered = _read_first_line()
    try:
        init = _decode_json(first_line)
    except ValueError:
        init = None
    isolated = isinstance(init, dict) and bool(init.get("isolated"))
    _set_limit(resource.RLIMIT_CORE, 0)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    to_worker_r, to_worker_w = os.pipe()
    from_worker_r, from_worker_w = os.pipe()
    # Larger pipes: fewer wake-ups of the three processes per block of calls.
    for fd in (REQUEST_FD, REPLY_FD, to_worker_w, from_worker_w):
        _grow_pipe(fd)
    region = mmap.mmap(-1, REPLY_REGION_BYTES)
    supervisor = _getpid()
    worker = os.fork()
    if worker == 0:
        os.dup2(to_worker_r, REQUEST_FD, inheritable=False)
        os.dup2(from_worker_w, REPLY_FD, inheritable=False)
        for fd in (to_worker_r, to_worker_w, from_worker_r, from_worker_w):
            os.close(fd)
        _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
        if _getppid() != supervisor:
            _real_exit(0)
        S.supervisor_pid = supervisor
        S.main_pid = _getpid()
        _serve(first_line, region)
        _real_exit(0)
    os.close(to_worker_r)
    os.close(from_worker_w)
    _prctl(_PR_SET_DUMPABLE, 0)
    home = init.get("workdir") if isinstance(init, dict) else None
    supervisor = _Supervisor(worker, to_worker_w, from_worker_r, isolated, region, home if isinstance(home, str) else None)
    supervisor.outstanding += buffered.count(b"\n")
    supervisor.run(buffered)


if __name__ == "__main__":
    main()
