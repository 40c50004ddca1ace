"""Runs launched as a user launches them, then stopped as a user stops them: a signal to the whole process group.

Test code. :func:`run_then_signal` starts a command in a new session (its own process group, as a terminal's
foreground job is), waits until ``ready()`` says the run is where the test wants it, sends ``sig`` to the group
(Ctrl-C sends SIGINT to the foreground group; ``kill``, systemd and Kubernetes send SIGTERM), and measures how long
the command takes to exit. It fails the test when the command is still running ``stop_within`` seconds later (and
then kills the group), or when any process of the group is left once the command has exited. With
``watch_descendants``, the same holds for every descendant alive at the signal, in whatever session it runs
(``torchrun`` starts each worker in a session of its own and forwards the signal to them).

With ``ended_line``, the limit is split in two. The run must be over -- the command has printed ``ended_line``, e.g.
Dagster's "resulted in failure", after the run's steps stopped and its end was recorded -- within ``stop_within``
seconds, and the process must then be gone within ``exit_within`` seconds of the signal. What comes between is the
interpreter's own teardown (its final garbage collections over every object of Dagster, torch and transformers:
``py-spy dump --native`` shows ``gc_collect_main``), about 1 s on an idle 2-core machine and over 10 s when the
test suite's four workers share its two cores; no code of this project runs there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.celery_cluster import _members_of_group


@dataclass(frozen=True)
class SignalledRun:
    """How the signalled command ended: its exit status, seconds from the signal to its exit, its output, seconds
    from the signal to its ``ended_line`` (None when not asked for), and (with ``watch_descendants``) the command's
    descendants alive at the signal."""

    returncode: int
    seconds_to_stop: float
    output: str
    seconds_to_end: float | None = None
    descendants: tuple[int, ...] = ()


def _alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def descendants(root: int) -> list[int]:
    """Live pids below ``root`` in the process tree (Linux /proc parent ids)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def run_then_signal(
    command: Sequence[str],
    *,
    env: dict[str, str],
    cwd: Path,
    log: Path,
    ready: Callable[[], bool],
    sig: signal.Signals,
    ready_timeout: float = 240,
    stop_within: float = 30,
    ended_line: str | None = None,
    exit_within: float = 60,
    watch_descendants: bool = False,
) -> SignalledRun:
    """Start ``command``, wait for ``ready()``, signal its process group, wait for its exit (module docstring)."""
    with log.open("wb") as out:
        child = subprocess.Popen(
            list(command), cwd=cwd, env={**env, "PYTHONUNBUFFERED": "1"}, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    group = child.pid
    below: tuple[int, ...] = ()
    try:
        deadline = time.monotonic() + ready_timeout
        while not ready():
            if child.poll() is not None:
                raise AssertionError(f"the run ended before it was signalled:\n{log.read_text(errors='replace')}")
            if time.monotonic() > deadline:
                raise AssertionError(f"not ready after {ready_timeout} s:\n{log.read_text(errors='replace')[-5000:]}")
            time.sleep(0.1)
        below = tuple(descendants(child.pid)) if watch_descendants else ()
        os.killpg(group, sig)
        signalled = time.monotonic()
        ended = None
        if ended_line is not None:
            _wait_for_line(child, log, ended_line, signalled + stop_within, sig)
            ended = time.monotonic() - signalled
        try:
            returncode = child.wait(
                timeout=max(0.0, signalled + (exit_within if ended_line else stop_within) - time.monotonic())
            )
        except subprocess.TimeoutExpired:
            limit = exit_within if ended_line else stop_within
            raise AssertionError(
                f"still running {limit} s after {sig.name}:\n{log.read_text(errors='replace')[-5000:]}"
            ) from None
        seconds = time.monotonic() - signalled
        left_deadline = time.monotonic() + 5
        while (left := _members_of_group(group) + [p for p in below if _alive(p)]) and time.monotonic() < left_deadline:
            time.sleep(0.1)
        assert not left, f"processes of the run left after it exited: {left}"
        return SignalledRun(returncode, seconds, log.read_text(errors="replace"), ended, below)
    finally:
        if child.poll() is None or _members_of_group(group):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        for pid in [p for p in below if _alive(p)]:  # workers in sessions of their own, left behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if child.poll() is None:
            child.wait(timeout=10)


def _wait_for_line(child: subprocess.Popen[bytes], log: Path, line: str, deadline: float, sig: signal.Signals) -> None:
    """Wait until ``line`` is in ``log`` or the command has exited; fail the test once ``deadline`` has passed."""
    while line not in log.read_text(errors="replace") and child.poll() is None:
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{line!r} not printed in time after {sig.name}:\n{log.read_text(errors='replace')[-5000:]}"
            )
        time.sleep(0.05)
