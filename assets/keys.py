"""Asset keys of a task's stages: ``AssetKey([task, <StageTable name>])`` (the names: ``conteb.names.StageTable``)."""

from __future__ import annotations

import dagster as dg

from conteb.config import TaskConfig
from conteb.names import ReviewKind, Stage, StageFamily, StageTable, stage_group


def key(task: TaskConfig, name: str) -> dg.AssetKey:
    """``AssetKey([task.name, name])``."""
    return dg.AssetKey([task.name, str(name)])


def group(task: TaskConfig, stage: Stage | StageFamily) -> str:
    """The Dagster asset group of ``stage`` of ``task`` (:func:`conteb.names.stage_group`)."""
    return stage_group(task.dagster_name, stage)


def out(task: TaskConfig, name: str, description: str, *, required: bool = True) -> dg.AssetOut:
    """An ``AssetOut`` of a stage table stored by the stage IO manager (``required=False``: the step may yield
    none, and Dagster then skips the steps that use it)."""
    return dg.AssetOut(
        key=key(task, name),
        description=description,
        io_manager_key="stage_io_manager",
        kinds={"python", "parquet"},
        is_required=required,
    )


def queries_key(task: TaskConfig) -> str:
    """The paired-queries asset whose answers describe the task's chunks (span when it has one)."""
    return StageTable.PAIRED_QUERIES if task.uses_span_pairing else StageTable.LLM_PAIRED_QUERIES


def review_queue(kind: ReviewKind | str) -> str:
    """Asset name of a task's review queue of ``kind``."""
    return f"review_queue_{kind}"
