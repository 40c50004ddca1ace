"""How the latest run of a job ended, read from the Dagster instance: succeeded, waiting for review, or failed.

A run stopped by the review gate succeeds in Dagster's terms: no step fails; a reviewed table whose queue has
pending items yields no output (``assets/review.py``), so Dagster skips the steps downstream of it, and the table is
observed with ``review_status: waiting for review`` instead of materialized. :func:`run_outcome` tells such a run
apart from one that built everything (no such observation) and from a crash (a failed run, whatever its
observations).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import dagster as dg
from dagster._core.events import DagsterEventType

from assets.review import WAITING


@dataclass(frozen=True)
class RunOutcome:
    """``state``: ``succeeded``, ``waiting_for_review`` (it succeeded, and review queues hold part of it back),
    ``failed`` or ``running``.

    ``waiting``: the reviewed tables observed waiting for review; ``skipped_steps``: the steps Dagster skipped
    because of them; ``failed_steps``: every failed step.
    """

    run_id: str
    state: str
    waiting: tuple[str, ...] = ()
    skipped_steps: tuple[str, ...] = ()
    failed_steps: tuple[str, ...] = field(default=())


def waiting_tables(events: Iterable[dg.DagsterEvent]) -> tuple[str, ...]:
    """The asset keys (``task/reviewed_chunks``) that ``events`` (a run's) observed waiting for review and did not
    materialize afterwards, sorted."""
    waiting: set[str] = set()
    for event in events:
        if event.event_type == DagsterEventType.ASSET_OBSERVATION:
            observation = event.event_specific_data.asset_observation
            status = observation.metadata.get("review_status")
            if status is not None and status.value == WAITING:
                waiting.add(observation.asset_key.to_user_string())
        elif event.event_type == DagsterEventType.ASSET_MATERIALIZATION:
            waiting.discard(event.event_specific_data.materialization.asset_key.to_user_string())
    return tuple(sorted(waiting))


def run_outcome(instance: dg.DagsterInstance, run: dg.DagsterRun) -> RunOutcome:
    """The outcome of ``run``, from its events in ``instance``."""
    if not run.is_finished:
        return RunOutcome(run.run_id, "running")

    def steps(of_type: DagsterEventType) -> tuple[str, ...]:
        records = instance.get_records_for_run(run.run_id, of_type=of_type).records
        return tuple(record.event_log_entry.dagster_event.step_key or "?" for record in records)

    if run.status != dg.DagsterRunStatus.SUCCESS:
        return RunOutcome(run.run_id, "failed", failed_steps=steps(DagsterEventType.STEP_FAILURE))
    records = instance.get_records_for_run(
        run.run_id, of_type={DagsterEventType.ASSET_OBSERVATION, DagsterEventType.ASSET_MATERIALIZATION}
    ).records
    waiting = waiting_tables(record.event_log_entry.dagster_event for record in records)
    if not waiting:
        return RunOutcome(run.run_id, "succeeded")
    return RunOutcome(
        run.run_id, "waiting_for_review", waiting=waiting, skipped_steps=steps(DagsterEventType.STEP_SKIPPED)
    )


def latest_run_outcome(instance: dg.DagsterInstance, job_name: str) -> RunOutcome | None:
    """The outcome of the latest run of ``job_name`` in ``instance``, or None when it never ran."""
    runs = instance.get_runs(filters=dg.RunsFilter(job_name=job_name), limit=1)
    return run_outcome(instance, runs[0]) if runs else None
