"""Training checkpoints: writing ``<output>/checkpoints/step-N``, finding the latest, resuming from it.

A checkpoint folder holds ``model/`` (sentence-transformers), ``optimizer.pt``, ``scheduler.pt``,
``rng.pt`` (Python, NumPy, torch and CUDA generator states) and :data:`STATE_FILE`
(``trainer_state.json``: step, epoch, loss history, evaluations, the config), written last: a folder
without it is incomplete and ignored. Writes go to a temporary folder renamed into place; only the
newest ``keep`` checkpoints are kept.

Data order is a pure function of ``(seed, epoch)`` (:mod:`training.data`), so the step count is the
data position: a run resumed from step N sees exactly the batches an uninterrupted run would see
next, provided the fields of :data:`RESUME_FIXED` are unchanged (:func:`check_resumable`).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from embedding.models import no_transformers_bars
from training.config import TrainingConfig, config_to_dict

CHECKPOINTS = "checkpoints"
STATE_FILE = "trainer_state.json"

RESUME_FIXED = (
    "data",
    "split",
    "seed",
    "batch_docs",
    "grad_accumulation",
    "validation_fraction",
    "include_synthetic",
    "mode",
    "context",
)
"""Fields that fix the data order or the model's output: a resumed run must not change them."""


@dataclass
class ResumedState:
    """What a checkpoint restores besides the weights (those are loaded from ``<checkpoint>/model``)."""

    step: int
    loss_history: list[dict[str, float]]
    evals: list[dict[str, float]]
    validation_before: dict[str, float]


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _step_of(path: Path) -> int | None:
    suffix = path.name.removeprefix("step-")
    return int(suffix) if suffix.isdigit() else None


def latest_checkpoint(output: Path) -> Path | None:
    """The complete checkpoint with the highest step under ``<output>/checkpoints``, or None."""
    folder = Path(output) / CHECKPOINTS
    found = []
    for path in folder.glob("step-*") if folder.is_dir() else []:
        step = _step_of(path)
        if step is not None and (path / STATE_FILE).is_file():
            found.append((step, path))
    return max(found)[1] if found else None


def checkpoint_step(checkpoint: Path) -> int:
    """The step of a ``step-N`` checkpoint folder."""
    step = _step_of(checkpoint)
    if step is None:
        raise ValueError(f"{checkpoint}: not a step-<N> checkpoint folder")
    return step


def save_checkpoint(
    output: Path,
    step: int,
    model: SentenceTransformer,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    state: dict[str, Any],
    keep: int,
) -> Path:
    """Write ``<output>/checkpoints/step-<step>`` atomically (tmp folder + rename); prune all but the ``keep`` newest.

    ``state`` is written as :data:`STATE_FILE` (JSON), last: it marks the checkpoint complete.
    """
    folder = Path(output) / CHECKPOINTS
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"step-{step}"
    for stale in folder.glob(".tmp-step-*"):  # left by a run killed while writing
        shutil.rmtree(stale, ignore_errors=True)
    tmp = folder / f".tmp-step-{step}-{os.getpid()}"
    tmp.mkdir()
    with no_transformers_bars():
        model.save(str(tmp / "model"))
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
    torch.save(_rng_state(), tmp / "rng.pt")
    (tmp / STATE_FILE).write_text(json.dumps(state, indent=1), encoding="utf-8")  # written last: marks complete
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
    complete = sorted((n, path) for path in folder.glob("step-*") if (n := _step_of(path)) is not None)
    for _, old in complete[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def check_resumable(config: TrainingConfig, saved: dict[str, Any], checkpoint: Path) -> None:
    """Raise ``ValueError`` naming the fields of :data:`RESUME_FIXED` that ``config`` changes from ``saved``."""
    current = config_to_dict(config)
    changed = [name for name in RESUME_FIXED if name in saved and saved[name] != current[name]]
    if changed:
        details = ", ".join(f"{name}: {saved[name]!r} -> {current[name]!r}" for name in changed)
        raise ValueError(f"cannot resume from {checkpoint}: changed {details} (start a new output folder)")


def restore(
    checkpoint: Path,
    config: TrainingConfig,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    device: torch.device,
) -> ResumedState:
    """Restore ``optimizer``, ``scheduler`` and the random generators from ``checkpoint``; return its state.

    Raises ``ValueError`` when ``config`` changes a field of :data:`RESUME_FIXED`.
    """
    state = json.loads((checkpoint / STATE_FILE).read_text(encoding="utf-8"))
    check_resumable(config, state.get("config", {}), checkpoint)
    optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", map_location=device, weights_only=False))
    scheduler.load_state_dict(torch.load(checkpoint / "scheduler.pt", weights_only=False))
    _set_rng_state(torch.load(checkpoint / "rng.pt", weights_only=False))
    return ResumedState(
        step=state["step"],
        loss_history=state["loss_history"],
        evals=state.get("evals", []),
        validation_before=state.get("validation_before", {}),
    )
