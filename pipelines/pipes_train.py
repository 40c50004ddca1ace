"""The process Dagster Pipes launches for a training asset.

Runs :func:`training.loop.train` (which knows nothing of Dagster) and forwards its events: steps
and evaluations as logs, the result as materialization metadata (steps, final loss, validation
scores, wall time, device, model path, a loss-curve plot). Usage (by the asset)::

    python -m pipelines.pipes_train --config data/models/insent_model.train.yaml
    python -m training.launch --standalone --nproc-per-node 2 -m pipelines.pipes_train --config ...

A rerun continues the folder's unfinished run (:func:`train_from`); the process stops when its launcher dies.
"""

from __future__ import annotations

import argparse
import base64
import io
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dagster_pipes import PipesContext, open_dagster_pipes


def loss_curve_markdown(losses: Sequence[float], title: str) -> str:
    """A PNG of the training loss per step, inlined as Markdown (shown by the Dagster UI)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3.2), dpi=100)
    axis.plot(range(1, len(losses) + 1), losses, linewidth=1.2)
    axis.set(xlabel="step", ylabel="loss", title=title)
    axis.grid(alpha=0.3)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return f"![loss curve](data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()})"


def log_lines(kind: str, payload: dict[str, Any]) -> list[str]:
    """The Dagster log lines of one training event (steps, evaluations, checkpoints; a resume said first)."""
    if kind == "step":
        return ["step " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in payload.items())]
    lines = []
    if kind == "start" and payload.get("resumed_from"):
        lines.append(f"resuming from step {payload['resumed_from']} of {payload['config']['output']}")
    if kind in ("start", "eval", "checkpoint"):
        lines.append(f"{kind}: {payload}")
    return lines


def forward_event(pipes: PipesContext, kind: str, payload: dict[str, Any]) -> None:
    """Training events -> Dagster logs (the run log shows progress as it happens)."""
    for line in log_lines(kind, payload):
        pipes.log.info(line)


def train_from(config_file: str | Path, on_event: Callable[[str, dict[str, Any]], None] | None = None) -> Any:
    """Train the model ``config_file`` describes, continuing its folder's unfinished run (``resume="auto"``,
    :func:`training.loop.train`): a rerun after Ctrl-C or a kill goes on from the last complete checkpoint; a
    finished run's folder trains afresh. Raises what ``train`` raises (a refused resume, a folder in use)."""
    from training.config import load_training_config
    from training.loop import train

    return train(load_training_config(config_file), on_event=on_event, resume="auto")


def main(argv: Sequence[str] | None = None) -> int:
    """Train from ``--config``; under ``torchrun`` (``RANK`` set) rank 0 alone talks to Dagster, the other ranks
    train silently (one Pipes session per asset: every rank opening one would close it several times). Every
    process stops when the process that launched it dies (:func:`training.supervision.watch_parent`). A refusal
    (another live training holds the folder, a checkpoint this run cannot continue) is one error line, exit 2."""
    from training.supervision import watch_parent

    watch_parent()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    from training.checkpoints import ResumeError
    from training.supervision import FolderInUse

    if int(os.environ.get("RANK", "0")) != 0:
        try:
            train_from(args.config)
        except (ResumeError, FolderInUse):
            return 2  # rank 0 says why
        return 0
    with open_dagster_pipes() as pipes:
        try:
            result = train_from(args.config, on_event=lambda kind, payload: forward_event(pipes, kind, payload))
        except (ResumeError, FolderInUse) as error:
            pipes.log.error(str(error))
            return 2
        pipes.report_asset_materialization(metadata=result_metadata(result, pipes.extras.get("model", "")))
    return 0


def result_metadata(result: Any, title: str) -> dict[str, Any]:
    """Materialization metadata of a ``training.result.TrainResult``: scores flattened, a loss plot."""
    metadata: dict[str, Any] = {
        "steps": result.steps,
        "wall_s": round(result.wall_s, 1),
        "device": str(result.device),
        "model_path": {"raw_value": str(result.model_path), "type": "path"},
    }
    if result.final_loss is not None:
        metadata["final_loss"] = round(float(result.final_loss), 5)
    for prefix, scores in (("validation", result.validation), ("validation_before", result.validation_before)):
        for name, value in (scores or {}).items():
            if value == value:  # not NaN
                metadata[f"{prefix}/{name}"] = round(float(value), 4)
    losses = [float(entry["loss"]) for entry in result.loss_history if "loss" in entry]
    if losses:
        metadata["loss_curve"] = {"raw_value": loss_curve_markdown(losses, title), "type": "md"}
    return metadata


if __name__ == "__main__":
    raise SystemExit(main())
