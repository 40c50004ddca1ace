"""What a finished training run reports: :class:`TrainResult` (returned by :func:`training.loop.train`, rendered
into the model card by :mod:`training.card`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training.data import DataStats


@dataclass
class TrainResult:
    """A finished run: steps taken, losses, validation scores before and after, where the model was saved.

    ``validation`` / ``validation_before``: :func:`training.validation.evaluate`'s scores (``{}`` without
    validation documents); ``wall_s`` in seconds; ``loss_history``: one record per optimizer step (``step``,
    ``loss``, ``in_sequence``, ``in_batch``, ``lr``); ``resumed_from``: the checkpoint step it resumed from.
    """

    steps: int
    final_loss: float | None
    validation: dict[str, float]
    validation_before: dict[str, float]
    wall_s: float
    device: str
    model_path: Path
    loss_history: list[dict[str, float]] = field(default_factory=list)
    stats: DataStats = field(default_factory=DataStats)
    resumed_from: int | None = None
    # the documents it saw (train + validation), per task folder and split (training.data.documents_seen)
    training_data: list[dict[str, Any]] = field(default_factory=list)
