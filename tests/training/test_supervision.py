"""training/supervision.py: a training process stops when its launcher dies; one live training a model folder.

Real processes: a parent that starts a watching child and is then SIGKILLed (as the OOM killer kills the Dagster
process), a child started with a parent that is not its own (the parent died before the watch was set up), a process
that holds a folder's lock, and one real ``torchrun`` (``python -m training.launch``) whose launcher is SIGKILLed: its
two ranks (``tests/support/watched_rank.py``: the parent watch, then sleep) must stop by themselves.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from training.supervision import (
    SUPERVISOR_ENV,
    FolderInUse,
    expected_parent,
    folder_holder,
    hold_folder,
    in_use_message,
    lock_path,
    supervisor_value,
)

STOP_WITHIN_S = 30  # generous: a loaded 2-core machine; the watch polls every 0.2 s here, the kernel signals at once
CHILD = """
import sys, time
from training.supervision import watch_parent
watch_parent(poll_s=float(sys.argv[1]), death_signal=sys.argv[2] == "1")
print("watching", flush=True)
time.sleep(600)
"""
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], *sys.argv[2:]], stderr=subprocess.PIPE)  # never read
print(child.pid, flush=True)
time.sleep(600)
"""
HOLDER = """
import sys, time
from pathlib import Path
from training.supervision import hold_folder
with hold_folder(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(600)
"""


def env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != SUPERVISOR_ENV}, "PYTHONPATH": str(ROOT)}


def alive(pid: int) -> bool:
    """A live process (a zombie, dead but not yet reaped by its new parent, is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def gone_within(pids: list[int], seconds: float) -> list[int]:
    """The pids of ``pids`` still alive after up to ``seconds`` (polled)."""
    deadline = time.monotonic() + seconds
    while (left := [pid for pid in pids if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(("poll_s", "death_signal"), [(0.2, False), (3600.0, True)], ids=["ppid-poll", "pdeathsig"])
def test_a_sigkilled_parent_stops_its_watching_child(poll_s: float, death_signal: bool) -> None:
    """Each mechanism alone: the polling thread (no death signal), the kernel's death signal (a poll too slow to
    matter). The child's stderr is a pipe that only the parent read (as a launcher that captures the output): the
    child's last words go nowhere, and must not stop it from stopping."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, CHILD, str(poll_s), "1" if death_signal else "0"],
        env=env(), cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        assert parent.stdout.readline().strip() == "watching"
        parent.kill()
        parent.wait(timeout=30)
        assert not gone_within([child], STOP_WITHIN_S), f"the child outlived its SIGKILLed parent by {STOP_WITHIN_S} s"
    finally:
        kill_all([child])
        parent.kill()
        parent.wait(timeout=30)


def _ignore_sigterm() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


@pytest.mark.parametrize("sigterm_ignored", [False, True], ids=["sigterm-default", "sigterm-inherited-ignored"])
def test_a_child_whose_parent_died_before_the_watch_stops_at_once(sigterm_ignored: bool) -> None:
    """The launcher names the parent it expects; a child that finds another parent (its own died, it was
    re-parented before the watch was set up) stops, though no death signal will come and the poll is slow; it is
    ended by SIGTERM itself (not the forced exit a grace period later) even when it inherited SIGTERM ignored, as a
    Dagster run started in the background passes it on."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, "3600", "1"], env={**env(), SUPERVISOR_ENV: supervisor_value(1)}, cwd=ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        preexec_fn=_ignore_sigterm if sigterm_ignored else None,
    )  # fmt: skip
    try:
        _, stderr = child.communicate(timeout=STOP_WITHIN_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate(timeout=30)
        raise AssertionError(f"still running {STOP_WITHIN_S} s after it found another parent") from None
    assert child.returncode == -signal.SIGTERM
    assert "the launching process 1 is gone: stopping" in stderr


def test_a_parent_named_in_another_pid_namespace_names_nobody(monkeypatch: pytest.MonkeyPatch) -> None:
    """A variable that crossed into a container or onto another machine (a Pipes launch moved to a pod) is ignored:
    the process watches its own parent rather than stop at once."""
    monkeypatch.setenv(SUPERVISOR_ENV, f"1 pid:[1]@{'0' * 8}-0000-0000-0000-{'0' * 12}")
    assert expected_parent() == os.getppid() and SUPERVISOR_ENV not in os.environ
    monkeypatch.setenv(SUPERVISOR_ENV, supervisor_value(1))
    assert expected_parent() == 1 and SUPERVISOR_ENV not in os.environ


@contextlib.contextmanager
def held_elsewhere(output: Path) -> Iterator[subprocess.Popen[str]]:
    """Another live process holds ``output``'s lock for the block."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(output)], env=env(), cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_a_folder_is_held_by_one_live_process_and_freed_when_it_dies(tmp_path: Path) -> None:
    output = tmp_path / "models" / "insent_model"
    with held_elsewhere(output) as holder:
        assert folder_holder(output) == str(holder.pid)
        with pytest.raises(FolderInUse) as refused, hold_folder(output):
            pass
        assert str(refused.value) == in_use_message(output, str(holder.pid))
        assert str(output) in str(refused.value) and f"pid {holder.pid}" in str(refused.value)
        holder.kill()  # as the OOM killer would: no clean-up runs
        holder.wait(timeout=30)
        assert folder_holder(output) is None  # the system released it: no stale lock
        with hold_folder(output):
            assert lock_path(output).read_text().strip() == str(os.getpid())
    assert not output.exists()  # the lock lives beside the model folder, not in it


def test_sigkilled_torchrun_launcher_leaves_no_rank_behind(tmp_path: Path) -> None:
    """torchrun's agent, SIGKILLed, stops no worker: each rank watches it (``training.launch`` names it to them)."""
    command = [
        sys.executable, "-m", "training.launch", "--standalone", "--nproc-per-node", "2",
        "-m", "tests.support.watched_rank", str(tmp_path),
    ]  # fmt: skip
    log = tmp_path / "torchrun.log"
    with log.open("wb") as out:
        launcher = subprocess.Popen(
            command, env={**env(), "OMP_NUM_THREADS": "1"}, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    ranks: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while len(files := sorted(tmp_path.glob("rank-*.pid"))) < 2:
            assert launcher.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, f"ranks not up after 120 s:\n{log.read_text(errors='replace')}"
            time.sleep(0.1)
        time.sleep(0.5)  # the pid files are written whole before the watch's first look is over
        ranks = [int(path.read_text()) for path in files]
        assert all(alive(pid) for pid in ranks), log.read_text(errors="replace")  # watching the right parent
        launcher.kill()
        launcher.wait(timeout=30)
        left = gone_within(ranks, STOP_WITHIN_S)
        assert not left, f"ranks {left} outlived their SIGKILLed launcher by {STOP_WITHIN_S} s"
    finally:
        kill_all(ranks)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait(timeout=30)
