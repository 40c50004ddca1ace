"""``conteb.staging.staged_tree`` (files that land together or not at all) and ``conteb.signals``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conteb import staging
from conteb.signals import deferred_interrupts
from conteb.staging import STAGING_FOLDER, remove_abandoned_stages, staged_tree
from conteb.storage import write_text_atomic


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (the stage folder left out) and its bytes."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and STAGING_FOLDER not in path.parts
    }


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    root = tmp_path / "reports"
    write_text_atomic("old evaluation", root / "tasks" / "t" / "evaluation.json")
    write_text_atomic("old run", root / "runs" / "t" / "bm25.trec")
    write_text_atomic("other task", root / "runs" / "u" / "bm25.trec")
    return root


def test_files_land_together_when_the_block_succeeds(reports: Path) -> None:
    with staged_tree(reports, seed=["runs/t", "tasks/t", "missing/folder"]) as staged:
        stage = staged.stage
        assert (stage / "tasks" / "t" / "evaluation.json").read_text() == "old evaluation"  # seeded: readable
        write_text_atomic("new run", stage / "runs" / "t" / "dense.trec")
        write_text_atomic("new evaluation", stage / "tasks" / "t" / "evaluation.json")
        assert (reports / "tasks" / "t" / "evaluation.json").read_text() == "old evaluation"  # not yet
        assert staged.final(stage / "runs" / "t" / "dense.trec") == reports / "runs" / "t" / "dense.trec"
    assert snapshot(reports) == {
        "runs/t/bm25.trec": b"old run",
        "runs/t/dense.trec": b"new run",
        "runs/u/bm25.trec": b"other task",
        "tasks/t/evaluation.json": b"new evaluation",
    }
    assert not stage.exists() and not (reports / STAGING_FOLDER).exists()


@pytest.mark.parametrize("stop", [RuntimeError("a system crashed"), KeyboardInterrupt()])
def test_a_block_that_stops_half_way_changes_nothing(reports: Path, stop: BaseException) -> None:
    before = snapshot(reports)
    with pytest.raises(type(stop)), staged_tree(reports, seed=["runs/t", "tasks/t"]) as staged:
        write_text_atomic("half of a new run", staged.stage / "runs" / "t" / "bm25.trec")
        write_text_atomic("new", staged.stage / "runs" / "t" / "dense.trec")
        raise stop
    assert snapshot(reports) == before
    assert not (reports / STAGING_FOLDER).exists()


def test_a_rewrite_in_the_stage_never_reaches_a_seeded_original_before_the_commit(reports: Path) -> None:
    original = reports / "runs" / "t" / "bm25.trec"
    inode = original.stat().st_ino
    with pytest.raises(RuntimeError), staged_tree(reports, seed=["runs/t"]) as staged:
        linked = staged.stage / "runs" / "t" / "bm25.trec"
        assert linked.stat().st_ino == inode  # a hard link, not a copy
        write_text_atomic("rewritten", linked)  # replaces the link by rename: the original inode is untouched
        raise RuntimeError("stop")
    assert original.read_text() == "old run" and original.stat().st_ino == inode


def test_an_interrupt_during_the_commit_waits_for_its_end(reports: Path, monkeypatch) -> None:
    """SIGINT delivered while the files move: every file lands, then KeyboardInterrupt is raised."""
    moved: list[str] = []
    real_replace = os.replace

    def replace_and_get_interrupted(source, destination) -> None:
        if not moved:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C in the middle of the commit
        real_replace(source, destination)
        moved.append(str(destination))

    # The interrupt comes from the commit, at the end of the block.
    with pytest.raises(KeyboardInterrupt), staged_tree(reports) as staged:
        for name in ("a", "b", "c"):
            write_text_atomic(name, staged.stage / "tasks" / "t" / f"{name}.md")
        monkeypatch.setattr(staging.os, "replace", replace_and_get_interrupted)
    monkeypatch.undo()
    assert len(moved) == 3
    assert [(reports / "tasks" / "t" / f"{name}.md").read_text() for name in "abc"] == ["a", "b", "c"]


def test_stages_of_dead_processes_are_removed_and_live_ones_kept(reports: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = staging._host()
    abandoned = reports / STAGING_FOLDER / f"{host}-{int(dead.stdout)}-beef"
    alive = reports / STAGING_FOLDER / f"{host}-{os.getpid()}-cafe"
    other_host = reports / STAGING_FOLDER / f"elsewhere-{int(dead.stdout)}-f00d"
    for stage in (abandoned, alive, other_host):
        write_text_atomic("partial", stage / "runs" / "t" / "x.trec")
    assert remove_abandoned_stages(reports) == [abandoned]
    assert alive.exists() and other_host.exists() and not abandoned.exists()


def test_deferred_interrupts_deliver_the_signal_once_after_the_block() -> None:
    received: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: received.append(signum))
    try:
        with deferred_interrupts():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
            assert received == []  # held back inside the block
        assert received == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_deferred_interrupts_outside_the_main_thread_run_the_block_as_is() -> None:
    ran: list[bool] = []

    def work() -> None:
        with deferred_interrupts():
            ran.append(True)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert ran == [True]
