"""Training processes that never outlive their launcher, and one live run per model folder (no Dagster import).

**Parent watch** (:func:`watch_parent`). A training process dies within seconds of the process that launched it:
the Pipes process (``pipelines.pipes_train``) when the Dagster process dies, the ``torchrun`` launcher
(:mod:`training.launch`) likewise, and each rank when the launcher dies (torchrun's agent, SIGKILLed, leaves its
ranks running: nothing else tells them). Two mechanisms, on Linux both:

- ``prctl(PR_SET_PDEATHSIG, SIGTERM)`` (libc through :mod:`ctypes`): the kernel sends SIGTERM the moment the parent
  dies. It fires on the death of the parent *thread* that started the process, not its process; the launchers here
  start their children from the thread that then waits for them, so that thread lives as long as the child;
- a daemon thread that polls :func:`os.getppid`: once it changes (the process was re-parented to init or a
  subreaper), the parent is gone; the process sends itself SIGTERM and, should it still run ``grace_s`` later (a
  handler stuck behind native code), leaves with :func:`os._exit`.

The parent may die before either is set up. A launcher names the parent it expects in :data:`SUPERVISOR_ENV` (its
own pid) and the child checks it right after the ``prctl``; without it, the parent at the time of the call is
expected. The variable is removed from the environment once read, so that it never reaches a grandchild.

**Folder lock** (:func:`hold_folder`). A training holds an exclusive ``flock`` on ``<output>.lock`` (beside the
model folder) for its whole length; a second training of the same folder is refused with :class:`FolderInUse`, one
line naming the folder and the pid that holds it. The operating system releases the lock when the holder dies,
however it dies: a killed run never leaves a stale lock. The ``.lock`` file itself stays (removing a lock file
while another process may open it is a known race); it holds the pid of its last holder.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

SUPERVISOR_ENV = "CONTEB_SUPERVISOR_PID"
"""The parent a launched training process expects: ``<pid> <pid namespace and boot>`` (:func:`supervisor_value`, set by
the launcher, read once by the child)."""

_PR_SET_PDEATHSIG = 1


class FolderInUse(RuntimeError):
    """A model folder another live training holds; the message is one line naming the folder and the pid."""


def _set_death_signal(sig: signal.Signals) -> bool:
    """``prctl(PR_SET_PDEATHSIG, sig)`` on Linux; False where it is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _terminate(reason: str, grace_s: float) -> None:
    """SIGTERM to this process (its handlers run, as for ``kill``); ``os._exit`` if it still runs ``grace_s`` later."""
    with contextlib.suppress(OSError, ValueError):  # stderr may be a pipe the dead parent read
        print(f"{reason}: stopping (pid {os.getpid()})", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace_s)
    os._exit(128 + signal.SIGTERM)


def _watch(parent: int, poll_s: float, grace_s: float) -> None:
    while os.getppid() == parent:
        time.sleep(poll_s)
    _terminate(f"the launching process {parent} is gone", grace_s)


def _pid_space() -> str:
    """Where a pid names a process: this pid namespace on this boot of this machine ("" where unknown)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{os.readlink('/proc/self/ns/pid')}@{boot}"
    except OSError:
        return ""


def supervisor_value(pid: int | None = None) -> str:
    """The :data:`SUPERVISOR_ENV` value that names ``pid`` (default: this process) as its children's parent."""
    return f"{os.getpid() if pid is None else pid} {_pid_space()}"


def expected_parent() -> int:
    """The parent this process should have: the pid :data:`SUPERVISOR_ENV` names (the variable is then removed from
    the environment) when it names one of this machine's pid namespace, else the current parent (a variable that
    crossed into a container or onto another machine names nobody there)."""
    pid, _, space = os.environ.pop(SUPERVISOR_ENV, "").partition(" ")
    if pid.isdigit() and space and space == _pid_space():
        return int(pid)
    return os.getppid()


def watch_parent(poll_s: float = 1.0, grace_s: float = 10.0, death_signal: bool = True) -> int:
    """Make this process stop when its launcher dies (module docstring); returns the parent pid it watches.

    ``death_signal``: also ask the kernel for SIGTERM on the parent's death (Linux); the polling thread runs either
    way. A parent already gone (this process already re-parented) stops the process at once. An inherited ignored
    SIGTERM is set back to the default (in the main thread).
    """
    parent = expected_parent()
    if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN and threading.current_thread() is threading.main_thread():
        # inherited ignored (a launcher started in the background: SIGINT ignored, and Dagster maps SIGTERM to
        # SIGINT's disposition): the death signal and the stop below must end this process
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if death_signal:
        _set_death_signal(signal.SIGTERM)
    # a parent that died before the prctl is signalled by no kernel: the thread's first look finds it gone
    threading.Thread(target=_watch, args=(parent, poll_s, grace_s), name="parent-watch", daemon=True).start()
    return parent


def lock_path(output: Path) -> Path:
    """The lock file of model folder ``output``: ``<output>.lock`` beside it."""
    output = Path(output)
    return output.parent / f"{output.name}.lock"


def _holder(fd: int) -> str:
    """The pid written in the lock file, as text ("unknown" when not yet written)."""
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 64).decode(errors="replace").strip()
    return text if text.isdigit() else "unknown"


def folder_holder(output: Path) -> str | None:
    """The pid (as text) of the live process that holds ``output``'s lock, or None when it is free. Reads only."""
    path = lock_path(output)
    if not path.is_file():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(fd)
        return None
    finally:
        os.close(fd)  # releases the shared lock taken for the test


def in_use_message(output: Path, holder: str) -> str:
    """The one line that refuses a second training of ``output``."""
    return (
        f"{output} is in use by a live training (pid {holder}); one training a model folder at a time: wait for it "
        "to end or stop it"
    )


@contextlib.contextmanager
def hold_folder(output: Path) -> Iterator[None]:
    """Hold ``output``'s lock for the block; :class:`FolderInUse` at once when a live process holds it."""
    path = lock_path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by exec'd children
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FolderInUse(in_use_message(Path(output), _holder(fd))) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
