"""Training checkpoints: writing ``<output>/checkpoints/step-N``, finding the latest, resuming from it.

A checkpoint folder holds ``model/`` (sentence-transformers), ``optimizer.pt``, ``scheduler.pt``,
``rng-rank<r>.pt`` for each rank ``r`` (its Python, NumPy, torch and CUDA generator states: :func:`rng_file`) and
:data:`STATE_FILE` (``trainer_state.json``: step, epoch, the number of processes ``world_size``, loss history,
evaluations, the config), written last: a folder without it is incomplete and ignored. Writes go to a temporary
folder renamed into place; only the newest ``keep`` checkpoints are kept. One process writes it all (rank 0, with
every rank's generator states gathered to it).

The checkpoints of one run only: :data:`FINISHED_FILE` marks a run whose final model is saved, and a fresh start
(:func:`start_point`) first moves an earlier run's checkpoints to ``<output>/checkpoints.previous``; ``"auto"`` (what
``make train`` runs) continues an unfinished run and starts a finished one afresh.

The batch order is a pure function of ``(seed, epoch)`` and a step reads ``world_size × grad_accumulation`` batches
of it (:mod:`training.data`), so for a given number of processes the step count is the data position: a run resumed
from step N sees exactly the batches an uninterrupted run would see next, and each rank continues its own random
generators, provided the run has as many processes as the checkpoint and the fields of :data:`RESUME_FIXED` are
unchanged. :func:`check_resume` refuses anything else with a :class:`ResumeError`, as it does a checkpoint that records
no ``world_size`` (written before the random states were saved per rank: its one ``rng.pt`` was rank 0's).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from embedding.models import no_transformers_bars
from training.config import TrainingConfig, config_to_dict

CHECKPOINTS = "checkpoints"
STATE_FILE = "trainer_state.json"
FINISHED_FILE = "finished.json"
"""In ``<output>/checkpoints``: written once the run's final model is saved (its step); without it, unfinished."""
PREVIOUS = "checkpoints.previous"
"""In ``<output>``: where a fresh start moves the checkpoints of the run before it (replacing an older such folder)."""
ResumeMode = bool | Literal["auto"]
"""``True``: continue the latest checkpoint; ``False``: start afresh; ``"auto"``: continue an unfinished run's latest
checkpoint, else start afresh (:func:`start_point`)."""

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


class ResumeError(ValueError):
    """A checkpoint this run cannot continue exactly; the message is one line naming it and what to do."""


@dataclass
class ResumedState:
    """What a checkpoint restores besides the weights (those are loaded from ``<checkpoint>/model``)."""

    step: int
    loss_history: list[dict[str, float]]
    evals: list[dict[str, float]]
    validation_before: dict[str, float]


def rng_file(checkpoint: Path, rank: int) -> Path:
    """The file of ``rank``'s random generator states in ``checkpoint``."""
    return checkpoint / f"rng-rank{rank}.pt"


def rng_state() -> dict[str, Any]:
    """This process's Python, NumPy, torch and (where available) CUDA generator states."""
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
    rng_states: list[dict[str, Any]],
    keep: int,
) -> Path:
    """Write ``<output>/checkpoints/step-<step>`` atomically (tmp folder + rename); prune all but the ``keep`` newest.

    ``rng_states``: every rank's :func:`rng_state`, in rank order (one a rank, ``state["world_size"]`` of them).
    ``state`` is written as :data:`STATE_FILE` (JSON), last: it marks the checkpoint complete.
    """
    if len(rng_states) != state["world_size"]:
        raise ValueError(f"{len(rng_states)} random states for {state['world_size']} processes")
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
    for rank, rng in enumerate(rng_states):
        torch.save(rng, rng_file(tmp, rank))
    (tmp / STATE_FILE).write_text(json.dumps(state, indent=1), encoding="utf-8")  # written last: marks complete
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
    complete = sorted((n, path) for path in folder.glob("step-*") if (n := _step_of(path)) is not None)
    for _, old in complete[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def check_resume(checkpoint: Path, config: TrainingConfig, world_size: int) -> dict[str, Any]:
    """``checkpoint``'s :data:`STATE_FILE`, when a run of ``world_size`` processes with ``config`` can continue it.

    Raises :class:`ResumeError` when the checkpoint records no ``world_size`` (written before the random states were
    saved per rank), records another one (the data order and each rank's generators depend on it), or when
    ``config`` changes a field of :data:`RESUME_FIXED`.
    """
    state: dict[str, Any] = json.loads((checkpoint / STATE_FILE).read_text(encoding="utf-8"))
    saved_world = state.get("world_size")
    if saved_world is None:
        raise ResumeError(
            f"cannot resume from {checkpoint}: it records neither its number of processes nor each one's random "
            "state (written by an earlier version); start a new output folder"
        )
    if saved_world != world_size:
        raise ResumeError(
            f"cannot resume from {checkpoint}: it was written by {saved_world} process(es), this run has "
            f"{world_size}, and the data order depends on it; resume with {saved_world} process(es) "
            "(torchrun --nproc-per-node) or start a new output folder"
        )
    saved, current = state.get("config", {}), config_to_dict(config)
    changed = [name for name in RESUME_FIXED if name in saved and saved[name] != current[name]]
    if changed:
        details = ", ".join(f"{name}: {saved[name]!r} -> {current[name]!r}" for name in changed)
        raise ResumeError(f"cannot resume from {checkpoint}: changed {details} (start a new output folder)")
    return state


def restore(
    checkpoint: Path,
    state: dict[str, Any],
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    device: torch.device,
    rank: int,
) -> ResumedState:
    """Restore ``optimizer``, ``scheduler`` and ``rank``'s own random generators from ``checkpoint`` (its
    :data:`STATE_FILE` already read and accepted as ``state`` by :func:`check_resume`); return what it holds."""
    optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", map_location=device, weights_only=False))
    scheduler.load_state_dict(torch.load(checkpoint / "scheduler.pt", weights_only=False))
    _set_rng_state(torch.load(rng_file(checkpoint, rank), weights_only=False))
    return ResumedState(
        step=state["step"],
        loss_history=state["loss_history"],
        evals=state.get("evals", []),
        validation_before=state.get("validation_before", {}),
    )


def finished(output: Path) -> bool:
    """Whether the run that wrote ``<output>/checkpoints`` saved its final model (:func:`mark_finished`)."""
    return (Path(output) / CHECKPOINTS / FINISHED_FILE).is_file()


def mark_finished(output: Path, step: int) -> None:
    """Record in ``<output>/checkpoints`` (when there is one) that the run's final model, at ``step``, is saved."""
    folder = Path(output) / CHECKPOINTS
    if folder.is_dir():
        tmp = folder / f".tmp-{FINISHED_FILE}"
        tmp.write_text(json.dumps({"step": step}), encoding="utf-8")
        os.replace(tmp, folder / FINISHED_FILE)


def clear_finished(output: Path) -> None:
    """The run in ``output`` goes on (a resume): its checkpoints are an unfinished run's again."""
    (Path(output) / CHECKPOINTS / FINISHED_FILE).unlink(missing_ok=True)


def start_point(output: Path, resume: ResumeMode) -> Path | None:
    """The checkpoint a run continues, or None for a fresh start (:data:`ResumeMode`). Called by the one process that
    holds the folder (:func:`training.supervision.hold_folder`).

    A fresh start never mixes its checkpoints with an earlier run's: it first moves ``<output>/checkpoints`` to
    ``<output>/checkpoints.previous`` (:data:`PREVIOUS`, replacing the one there). Whether the checkpoint can be
    continued is :func:`check_resume`'s to say.
    """
    output = Path(output)
    latest = latest_checkpoint(output)
    if latest is not None and (resume is True or (resume == "auto" and not finished(output))):
        return latest
    folder = output / CHECKPOINTS
    if folder.is_dir() and any(folder.iterdir()):
        previous = output / PREVIOUS
        if previous.exists():
            shutil.rmtree(previous)
        os.replace(folder, previous)
    return None
