"""The launching terminal of a Celery run: what the workers log for the run's steps, shown there as it happens.

Why a Celery run was silent: a worker runs its step with a log manager of its own (``pipelines/celery_steps.py``),
whose handlers write to the shared instance's event log and whose console logger writes to the worker's stderr
(``.cache/celery/worker-<i>.log``); the run's process gets the step's events only when the task returns, and yields
them to Dagster's plan bookkeeping, which does not log them again (dagster-celery's ``core_execution_loop.py`` does
the same). Every line was in the event log (the UI), none in the terminal.

:class:`WorkerLines` reads the run's event log from a cursor (``DagsterInstance.get_records_for_run``), once per tick
of the run's loop (``pipelines/celery_loop.py``), and hands each record a worker wrote for a step -- the hand-out
``Executing steps <key> in celery worker`` (:data:`~pipelines.celery_steps.WORKER_KEY` metadata: the worker's
name), then every Dagster event from the pool process that ran it (``STEP_START``, ``STEP_SUCCESS`` with its
duration, ``STEP_FAILURE`` with its error, outputs, materializations) and the step's own ``context.log`` lines -- to
the run's *loggers* only (the ``@logger`` loggers of the run, Dagster's colored console logger unless the run config
names others), formatted as Dagster formats a line of an in-process run (``construct_log_record_message`` of
``dagster/_core/log_manager.py``), with ``[celery worker <name>, pid <pid>]`` appended. The event log is not written
again: it holds these records already.

Which records are the workers': those of a step after its hand-out that come from the hand-out's process (its pid),
and the step's plain log lines (a step key, no event: only step code logs them). The run's own engine events for a
step ("Submitting celery task", "revoked") come from the run's process and are printed by Dagster already.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dagster._core.log_manager import (
    LOG_RECORD_EVENT_ATTR,
    LOG_RECORD_METADATA_ATTR,
    DagsterLogManager,
    construct_log_record_message,
    construct_log_record_metadata,
)

from pipelines.celery_steps import HANDOUT, PID_KEY, WORKER_KEY

if TYPE_CHECKING:
    from dagster import DagsterInstance
    from dagster._core.events.log import EventLogEntry
    from dagster._core.execution.context.system import PlanOrchestrationContext

PAGE = 500  # records read per query; a tick reads pages until none is left
BOUNDARIES = frozenset(
    {"STEP_START", "STEP_SUCCESS", "STEP_FAILURE", "STEP_SKIPPED", "STEP_UP_FOR_RETRY", "STEP_RESTARTED"}
)
"""Step events shown at INFO at least (Dagster logs them at DEBUG; the jobs' console is at INFO: ``jobs.py``)."""


@dataclass(frozen=True)
class Worker:
    """The Celery worker (its ``-n`` name, ``conteb-<i>@<host>``) and the pool process that ran a step."""

    name: str
    pid: int | None

    def tag(self) -> str:
        return f"[celery worker {self.name}, pid {self.pid}]" if self.pid else f"[celery worker {self.name}]"


def run_loggers(log: DagsterLogManager) -> list[logging.Logger]:
    """The run's ``@logger`` loggers (the console) behind ``log``, without the instance's handlers (event log).

    ``DagsterLogManager`` sends each record to its ``DagsterLogHandler``, which calls the instance's handlers and
    then ``logger.log`` of each run logger (``dagster/_core/log_manager.py``, ``DagsterLogHandler.emit``); Dagster
    has no public accessor for the second list.
    """
    handler = getattr(log, "_dagster_handler", None)
    loggers = getattr(handler, "_loggers", None)
    if loggers is None:
        raise TypeError("Dagster's log manager has no DagsterLogHandler._loggers: see pipelines/celery_console.py")
    return list(loggers)


def handout_worker(entry: EventLogEntry) -> Worker | None:
    """The worker named by an engine event of ``celery_steps.py`` (hand-out, refusal, drop), or None."""
    event = entry.dagster_event
    if event is None or event.event_type_value != "ENGINE_EVENT" or event.engine_event_data is None:
        return None
    metadata = event.engine_event_data.metadata
    if WORKER_KEY not in metadata:
        return None
    pid = metadata[PID_KEY].value if PID_KEY in metadata else event.pid
    return Worker(str(metadata[WORKER_KEY].value), int(pid) if isinstance(pid, int) else None)


@dataclass
class WorkerLines:
    """The workers' records of run ``run_id`` (module doc), re-logged to ``loggers`` with ``metadata``'s run fields."""

    instance: DagsterInstance
    run_id: str
    loggers: list[logging.Logger]
    metadata: dict[str, Any]
    cursor: str | None = None
    workers: dict[str, Worker] = field(default_factory=dict)  # step key -> worker of its latest hand-out

    @classmethod
    def of(cls, job_context: PlanOrchestrationContext) -> WorkerLines:
        log = job_context.log
        return cls(job_context.instance, job_context.run_id, run_loggers(log), dict(log.metadata))

    def show_new(self) -> int:
        """Re-log every worker record written since the last call (all of them on the first); how many."""
        shown = 0
        while True:
            page = self.instance.get_records_for_run(self.run_id, cursor=self.cursor, limit=PAGE)
            for record in page.records:
                shown += self.show(record.event_log_entry)
            self.cursor = page.cursor
            if not page.has_more:
                return shown

    def show(self, entry: EventLogEntry) -> int:
        """Re-log ``entry`` when a worker wrote it (1), else nothing (0)."""
        step = entry.step_key
        if step is None:
            return 0
        event = entry.dagster_event
        message = entry.user_message or (event.message if event is not None else None) or ""
        named = handout_worker(entry)
        if named is not None:
            self.workers[step] = named
            if HANDOUT in message:  # its STEP_START follows, with the worker: one line per step boundary
                return 0
        worker = self.workers.get(step)
        if worker is None or (event is not None and named is None and event.pid != worker.pid):
            return 0
        level = entry.level
        if event is not None and event.event_type_value in BOUNDARIES:
            level = max(level, logging.INFO)
        meta = construct_log_record_metadata(
            {**self.metadata, "step_key": step},  # type: ignore[arg-type]
            f"{message} {worker.tag()}",
            event,
            None,
        )
        line = construct_log_record_message(meta)
        for logger in self.loggers:
            logger.log(level, line, extra={LOG_RECORD_METADATA_ATTR: meta, LOG_RECORD_EVENT_ATTR: event})
        return 1
