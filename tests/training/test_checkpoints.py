"""Which checkpoints a run may continue (training.checkpoints.check_resume, start_point), on hand-written trainer
states: the latest complete one of an unfinished run, never a partly written one, never another run's.

The two-process side (a checkpoint written by torchrun, refused to one process) is tests/training/test_ddp.py's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from training.checkpoints import (
    PREVIOUS,
    STATE_FILE,
    ResumeError,
    check_resume,
    latest_checkpoint,
    mark_finished,
    start_point,
)
from training.config import TrainingConfig, config_to_dict, make_config


def training_config(tmp_path: Path, **overrides: Any) -> TrainingConfig:
    (tmp_path / "data" / "documents").mkdir(parents=True, exist_ok=True)  # a task folder, as far as config checks
    return make_config({"data": [str(tmp_path / "data")], "output": str(tmp_path / "out"), **overrides})


def checkpoint(tmp_path: Path, config: TrainingConfig, **state: Any) -> Path:
    """A ``step-3`` folder whose trainer state is ``state`` with ``config``'s settings."""
    folder = tmp_path / "out" / "checkpoints" / "step-3"
    folder.mkdir(parents=True)
    (folder / STATE_FILE).write_text(json.dumps({"step": 3, **state, "config": config_to_dict(config)}))
    return folder


def refusal(folder: Path, config: TrainingConfig, world_size: int) -> str:
    with pytest.raises(ResumeError) as raised:
        check_resume(folder, config, world_size)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"cannot resume from {folder}: ")
    return message


def test_a_checkpoint_resumes_with_its_own_number_of_processes(tmp_path: Path) -> None:
    config = training_config(tmp_path)
    folder = checkpoint(tmp_path, config, world_size=2)
    assert check_resume(folder, config, 2)["step"] == 3
    assert refusal(folder, config, 1).endswith(
        "it was written by 2 process(es), this run has 1, and the data order depends on it; resume with 2 "
        "process(es) (torchrun --nproc-per-node) or start a new output folder"
    )
    one = checkpoint(tmp_path / "one", config, world_size=1)
    assert "written by 1 process(es), this run has 4" in refusal(one, config, 4)


def test_a_checkpoint_without_its_number_of_processes_is_refused(tmp_path: Path) -> None:
    """Written before each rank's random state was saved: its one rng.pt was rank 0's, its world size unknown."""
    config = training_config(tmp_path)
    folder = checkpoint(tmp_path, config)
    (folder / "rng.pt").write_bytes(b"")
    message = refusal(folder, config, 1)
    assert message.endswith("records neither its number of processes nor each one's random state (written by an "
                            "earlier version); start a new output folder")  # fmt: skip


def test_a_changed_setting_that_fixes_the_data_order_is_refused(tmp_path: Path) -> None:
    folder = checkpoint(tmp_path, training_config(tmp_path), world_size=1)
    assert "changed batch_docs: 4 -> 2 (start a new output folder)" in refusal(
        folder, training_config(tmp_path, batch_docs=2), 1
    )
    assert check_resume(folder, training_config(tmp_path, max_steps=9, lr=1e-4), 1)["world_size"] == 1


def checkpoints_of_a_run(output: Path, steps: tuple[int, ...]) -> Path:
    """``<output>/checkpoints`` with a complete ``step-N`` for each of ``steps``, and what a kill leaves half
    written: a higher ``step-N`` without its trainer state (written last) and a temporary folder."""
    folder = output / "checkpoints"
    for step in steps:
        (folder / f"step-{step}" / "model").mkdir(parents=True)
        (folder / f"step-{step}" / STATE_FILE).write_text(json.dumps({"step": step}))
    (folder / f"step-{max(steps) + 10}" / "model").mkdir(parents=True)  # killed before its state was written
    (folder / f".tmp-step-{max(steps) + 20}-123" / "model").mkdir(parents=True)
    return folder


def test_the_latest_checkpoint_is_the_last_complete_one(tmp_path: Path) -> None:
    folder = checkpoints_of_a_run(tmp_path, (3, 6))
    assert latest_checkpoint(tmp_path) == folder / "step-6"


def test_a_rerun_continues_an_unfinished_run(tmp_path: Path) -> None:
    folder = checkpoints_of_a_run(tmp_path, (3, 6))
    assert start_point(tmp_path, "auto") == folder / "step-6"
    assert start_point(tmp_path, True) == folder / "step-6"
    assert sorted(p.name for p in folder.iterdir()) == [".tmp-step-26-123", "step-16", "step-3", "step-6"]


def test_a_rerun_of_a_finished_run_starts_afresh_without_mixing_the_checkpoints(tmp_path: Path) -> None:
    """The finished run's checkpoints move to ``checkpoints.previous`` (an older one there is replaced) before the
    new run writes any: ``checkpoints`` then holds the new run's alone."""
    (tmp_path / PREVIOUS / "step-1").mkdir(parents=True)  # from a run before that one
    checkpoints_of_a_run(tmp_path, (3, 6))
    mark_finished(tmp_path, 6)
    assert start_point(tmp_path, "auto") is None
    assert not (tmp_path / "checkpoints").exists()
    assert sorted(p.name for p in (tmp_path / PREVIOUS).iterdir()) == [
        ".tmp-step-26-123", "finished.json", "step-16", "step-3", "step-6"
    ]  # fmt: skip


def test_a_fresh_start_moves_an_unfinished_run_aside_too(tmp_path: Path) -> None:
    """``resume=False`` (``python -m training`` without ``--resume``) on an unfinished run's folder: its
    checkpoints are kept in ``checkpoints.previous``, not mixed with the new run's."""
    checkpoints_of_a_run(tmp_path, (3,))
    assert start_point(tmp_path, False) is None
    assert latest_checkpoint(tmp_path) is None and (tmp_path / PREVIOUS / "step-3" / STATE_FILE).is_file()
