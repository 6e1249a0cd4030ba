"""After each call, what the verifier left around it is found, recorded and
undone (see _housekeeping): processes still running, files created in its
working directory, a changed environment or working directory, replaced
standard streams."""

import os
import signal
import sys

from gatekept_output import _STDERR, _STDOUT, _install_writers
from gatekept_process import child_pids, descendants, is_zombie, parent_map
from gatekept_state import (
    S,
    _chdir,
    _fsdecode,
    _getcwd,
    _getpid,
    _kill,
    _listdir,
    _P_ALL,
    _path_join,
    _record,
    _remove,
    _safe_repr,
    _safe_str,
    _WAIT_ANY,
    _waitid,
    _waitpid,
    _WNOHANG,
)

OUTPUT_REPORT_BYTES = 64 * 1024
# The most calls between two sweeps of every process in the sandbox (see _sweep_due).
STRAY_SWEEP_CALLS = 32


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
        _remove(_path_join(S.workdir_real, name))
    S.file_baseline = frozenset(current & S.file_baseline)


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
    parents = parent_map(tree)
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
    tree = descendants(me)
    kept = _kept_processes(tree) if tree else set()
    children = child_pids()
    strays = [pid for pid in tree if pid not in kept and not is_zombie(pid)]
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
