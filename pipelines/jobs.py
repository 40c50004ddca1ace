"""Jobs of the code location, and the executor choice of ``build_conteb`` and ``evaluate_conteb``."""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from conteb.names import Job, task_groups
from conteb.reproduce import EXPERIMENT_GROUPS, REPRODUCE_TASK
from pipelines.celery import celery_executor_def
from project.config import ProjectConfig


def choose_executor(config: ProjectConfig) -> dg.ExecutorDefinition:
    """``build_conteb``'s executor: in-process unless the registry is large or says otherwise (``ExecutionConfig``).

    Multiprocess starts a Python process per step, whose start-up dominates small runs;
    it pays off only when many tasks can run side by side. ``celery`` sends each step to the Celery
    workers of ``execution.celery`` (``make workers``; see ``pipelines/celery.py``).
    """
    execution = config.execution
    executor = execution.executor
    if executor == "celery":
        return celery_executor_def(config)
    if executor == "auto":
        executor = "multiprocess" if len(config.tasks) >= execution.multiprocess_from_tasks else "in_process"
    if executor == "in_process":
        return dg.in_process_executor
    return dg.multiprocess_executor.configured(
        {"max_concurrent": execution.max_concurrent or 0}  # 0: one process per CPU
    )


def build_conteb_job(config: ProjectConfig) -> dg.UnresolvedAssetJobDefinition:
    """``build_conteb``: every curation asset of every task (and their checks): the groups of their stages."""
    groups = [group for task in config.tasks for group in task_groups(task.dagster_name)]
    return dg.define_asset_job(
        Job.BUILD.value,
        selection=dg.AssetSelection.groups(*groups),  # never the reproduce or evaluation groups
        executor_def=choose_executor(config),
        # INFO by default so the CLI shows progress and counts rather than every engine event;
        # the launchpad can lower it to DEBUG for a run.
        config={"loggers": {"console": {"config": {"log_level": "INFO"}}}},
        description="Curate every task of conteb.yaml into data/conteb/<task>/ (ConTEB layout).",
    )


def build_train_job() -> dg.UnresolvedAssetJobDefinition:
    """``train_insent``: the training assets (InSeNT and its no-context control)."""
    return dg.define_asset_job(
        Job.TRAIN.value,
        selection=dg.AssetSelection.groups("training"),
        executor_def=dg.in_process_executor,  # each model trains in its own Pipes subprocess anyway
        description="Train InSeNT (and the +Training control) on the tasks named in conteb.yaml's training: block.",
    )


def evaluate_executor(config: ProjectConfig | None) -> dg.ExecutorDefinition:
    """``evaluate_conteb``'s executor: in process (one model load serves every task), or Celery when the registry
    says ``execution.executor: celery`` (each task's evaluation a step on a worker, each loading its models)."""
    if config is not None and config.execution.executor == "celery":
        return celery_executor_def(config)
    return dg.in_process_executor


def build_evaluate_job(config: ProjectConfig | None = None) -> dg.UnresolvedAssetJobDefinition:
    """``evaluate_conteb``: every task's evaluation and the overall report (executor: :func:`evaluate_executor`)."""
    return dg.define_asset_job(
        Job.EVALUATE.value,
        selection=dg.AssetSelection.groups("evaluation"),
        executor_def=evaluate_executor(config),
        config={"loggers": {"console": {"config": {"log_level": "INFO"}}}},
        description="Evaluate every configured retrieval system on every task; write data/reports/.",
    )


def build_reproduce_job(tasks: Sequence[str] = (REPRODUCE_TASK,)) -> dg.UnresolvedAssetJobDefinition:
    """``reproduce_conteb``: the paper's controlled experiment, curation to report: its own groups (models,
    evaluations and report) and the stage groups of its ``tasks`` (Dagster names: the SQuAD task, the others)."""
    groups = [
        *EXPERIMENT_GROUPS,
        *(group for task in dict.fromkeys([REPRODUCE_TASK, *tasks]) for group in task_groups(task)),
    ]
    return dg.define_asset_job(
        Job.REPRODUCE.value,
        selection=dg.AssetSelection.groups(*groups),
        executor_def=dg.in_process_executor,  # training runs in Pipes subprocesses; one model load serves evaluation
        config={"loggers": {"console": {"config": {"log_level": "INFO"}}}},
        description="The paper's controlled experiment (conteb.yaml reproduce:): split SQuAD by document, make it "
        "context-dependent, train InSeNT (plain and anchored windows) and the +Training control, evaluate every "
        "baseline on the test split, compare with the paper.",
    )
