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

This script only starts the two processes; the rest lives beside it:
gatekept_supervisor.py (the supervisor), gatekept_worker.py (the worker's
import of the verifier and its request loop), gatekept_calls.py (one call
and the warm-up), gatekept_isolation.py (the audit hook, timers and limits
the verifier runs under), gatekept_containment.py (what is undone after each
call), gatekept_output.py (replies and the verifier's prints),
gatekept_state.py (what they share) and gatekept_process.py (process
helpers, shared with env_loader.py and smoke.py).

Everything up to the version check must stay parseable by old Python 3
releases (no f-strings, no async syntax, no walrus), so that an old
interpreter reaches the check and says why it cannot continue.
"""
import os
import sys

if sys.version_info < (3, 10):
    _found = "%d.%d.%d" % tuple(sys.version_info[:3])
    sys.stderr.write(
        "gatekept: the harness needs Python 3.10 or newer, but %s is Python %s\n"
        % (sys.executable, _found)
    )
    try:
        # fd 4: the reply pipe (REPLY_FD in gatekept_state, which this Python
        # might not even parse).
        os.write(
            4,
            (
                '{"op":"ready","ok":false,"error":{"kind":"python_too_old",'
                '"type":"RuntimeError","message":"Python %s is too old; 3.10 or newer is needed",'
                '"traceback":""}}\n' % _found
            ).encode("ascii"),
        )
    except Exception:
        pass
    sys.exit(3)

import mmap
import resource
import signal

# The calling convention shared with every emitted package (one file, copied
# byte for byte into them) and the harness's own modules, imported now,
# while this directory is on sys.path.
import gatekept_reward as _reward
from gatekept_isolation import _die_with_parent
from gatekept_output import REPLY_REGION_BYTES
from gatekept_process import PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE, PR_SET_PDEATHSIG, close_inherited, prctl, set_limit
from gatekept_state import REPLY_FD, REQUEST_FD, S, _decode_json, _getpid, _getppid, _real_exit
from gatekept_supervisor import _grow_pipe, _read_first_line, _Supervisor
from gatekept_worker import _serve

# Dropped from sys.modules, so that a verifier's own module of one of these
# names is its own. A new module of the harness belongs here and in
# COMPILED_SOURCES (src/runtime/runtime-cache.ts).
for _name in (
    _reward.__name__,
    "gatekept_state",
    "gatekept_process",
    "gatekept_output",
    "gatekept_isolation",
    "gatekept_containment",
    "gatekept_calls",
    "gatekept_worker",
    "gatekept_supervisor",
):
    del sys.modules[_name]


def main():
    # Only the standard streams and the two protocol pipes stay open before
    # any verifier code is imported.
    close_inherited(REQUEST_FD, REPLY_FD)
    _die_with_parent()
    first_line, buffered = _read_first_line()
    try:
        init = _decode_json(first_line)
    except ValueError:
        init = None
    isolated = isinstance(init, dict) and bool(init.get("isolated"))
    set_limit(resource.RLIMIT_CORE, 0)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
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
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
        if _getppid() != supervisor:
            _real_exit(0)
        S.supervisor_pid = supervisor
        S.main_pid = _getpid()
        _serve(first_line, region)
        _real_exit(0)
    os.close(to_worker_r)
    os.close(from_worker_w)
    prctl(PR_SET_DUMPABLE, 0)
    home = init.get("workdir") if isinstance(init, dict) else None
    supervisor = _Supervisor(worker, to_worker_w, from_worker_r, isolated, region, home if isinstance(home, str) else None)
    supervisor.outstanding += buffered.count(b"\n")
    supervisor.run(buffered)


if __name__ == "__main__":
    main()
