"""What leaves the worker: its replies, which wait in memory shared with the
supervisor and leave in blocks (see _Outbox), and what the verifier prints,
counted and passed on up to a cap (see _CountingWriter)."""

import signal
import struct
import sys

from gatekept_state import REPLY_FD, S, _getpgrp, _getpid, _in_child, _killpg, _perf_counter, _real_exit, _write_all

# Verifier output is forwarded to the real fd only up to this much per call;
# the rest is counted and dropped, which keeps a chatty verifier fast.
OUTPUT_FORWARD_BYTES = 64 * 1024


def _send(data):
    if _in_child():
        _real_exit(0)
    try:
        _write_all(REPLY_FD, data)
    except OSError:
        # Nobody is listening any more; there is nothing useful left to do.
        _abandon()


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


# What the reply region's header holds while the worker warms up.
WARMING = b"gatekept-warming"


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
