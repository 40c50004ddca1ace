"""How the latest run of a job ended, read from the Dagster instance: succeeded, waiting for review, or failed.

A run stopped by the review gate fails in Dagster's terms (its blocking ``review_complete`` checks fail, so the
queue steps raise ``DagsterAssetCheckFailedError`` and nothing downstream runs); ``conteb status`` uses
:func:`latest_run_outcome` to tell that apart from a crash.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import dagster as dg
from dagster._core.events import DagsterEventType

from assets.review import REVIEW_CHECK

_CHECK_FAILED_ERROR = "DagsterAssetCheckFailedError"


@dataclass(frozen=True)
class RunOutcome:
    """``state``: ``succeeded``, ``waiting_for_review`` (only review gates failed), ``failed`` or ``running``.

    ``waiting``: the queue assets whose ``review_complete`` check failed; ``failed_steps``: every failed step.
    """

    run_id: str
    state: str
    waiting: tuple[str, ...] = ()
    failed_steps: tuple[str, ...] = field(default=())


def latest_run_outcome(instance: dg.DagsterInstance, job_name: str) -> RunOutcome | None:
    """The outcome of the latest run of ``job_name`` in ``instance``, or None when it never ran."""
    runs = instance.get_runs(filters=dg.RunsFilter(job_name=job_name), limit=1)
    if not runs:
        return None
    run = runs[0]
    if run.status == dg.DagsterRunStatus.SUCCESS:
        return RunOutcome(run.run_id, "succeeded")
    if run.status != dg.DagsterRunStatus.FAILURE:
        return RunOutcome(run.run_id, "running" if not run.is_finished else "failed")
    failures = [
        record.event_log_entry.dagster_event
        for record in instance.get_records_for_run(run.run_id, of_type=DagsterEventType.STEP_FAILURE).records
    ]
    failed_steps = tuple(event.step_key or "?" for event in failures)
    checks = [
        record.event_log_entry.dagster_event.event_specific_data
        for record in instance.get_records_for_run(run.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION).records
    ]
    failed_checks = [c for c in checks if not c.passed and c.severity == dg.AssetCheckSeverity.ERROR]
    gate_only = (
        bool(failures)
        and bool(failed_checks)
        and all(c.check_name == REVIEW_CHECK for c in failed_checks)
        and all(_error_class(event) == _CHECK_FAILED_ERROR for event in failures)
    )
    if not gate_only:
        return RunOutcome(run.run_id, "failed", failed_steps=failed_steps)
    waiting = tuple(sorted(c.asset_key.to_user_string() for c in failed_checks))
    return RunOutcome(run.run_id, "waiting_for_review", waiting=waiting, failed_steps=failed_steps)


def _error_class(event) -> str | None:
    """The class name of a step failure's error (the user error's cause when Dagster wrapped it)."""
    error = getattr(event.event_specific_data, "error", None)
    return error.cls_name if error is not None else None
