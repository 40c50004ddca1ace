"""The run's side of the Celery executor: send the ready steps, replay their events, stop when told or when alone.

Dagster drives it as an executor's ``execute`` (``pipelines/celery.py``); the steps travel as
``pipelines/celery_steps.py`` describes. What it does differently from ``dagster-celery``'s loop
(``dagster_celery/core_execution_loop.py`` in 0.29), each a defect found there:

* **No broker.** The broker is asked for a connection first, with a ``broker_timeout_s`` deadline; when it does not
  answer the run fails at once with :class:`CeleryUnavailable`, one line naming the URL and ``make workers``
  (dagster-celery: about 40 s of retries, then a raw ``redis.exceptions.ConnectionError``).
* **No worker.** Nothing is sent before a worker consumes the queue (``inspect().active_queues()``, asked every
  ``worker_check_s``); when none answers for ``no_worker_timeout_s`` (``execution.celery.no_worker_timeout_s``) --
  before the first step, or later while steps wait in the queue -- the run fails with one line (dagster-celery:
  the run waited forever).
* **Ctrl-C and SIGTERM.** Dagster turns both into an interrupt flag that this loop reads every tick: every step sent
  is revoked with ``terminate=True`` (a queued task is dropped, a running one gets SIGTERM in its pool process,
  where Dagster turns it into an interrupt of the step), the loop waits at most ``stop_timeout_s`` for the revoked
  results, then the run ends as interrupted (``DagsterExecutionInterruptedError``: Dagster records it as failed).
  dagster-celery revoked without ``terminate`` and then waited for every revoked result -- which never comes for a
  task no worker takes --, so a run with no worker hung and ignored every further signal. A revoked task that a
  worker takes later anyway is dropped there: its run has ended (``celery_steps.py``).
* **Silent terminal.** The workers' lines for the run's steps (start, end with duration or error, the step's own
  log lines, each with the worker's name and pid) are shown in the run's terminal as they are written:
  ``pipelines/celery_console.py``, once per tick, before the finished tasks' events are replayed, and once more
  when the loop ends (dagster-celery showed none of them).
* **Refused steps.** A worker that refuses a step (its fingerprint differs) fails the run with the worker's one-line
  reason, as does any other error a task raised.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from celery.exceptions import TaskRevokedError
from celery.states import READY_STATES
from dagster._core.errors import DagsterExecutionInterruptedError
from dagster._core.events import DagsterEvent, EngineEventData
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext
from dagster_shared.serdes import deserialize_value

from pipelines.celery_console import WorkerLines
from pipelines.celery_steps import DELEGATE_MARKER, submit_step

if TYPE_CHECKING:
    from celery import Celery
    from celery.result import AsyncResult
    from dagster._core.execution.context.system import PlanOrchestrationContext
    from dagster._core.execution.plan.plan import ExecutionPlan

TICK_S = 0.25
START_WORKERS = "`make workers` starts Redis and the workers on this machine (or point execution.celery at yours)"


class CeleryUnavailable(Exception):
    """No broker, or no worker on the queue: the message is one line naming what and what to do."""


@dataclass(frozen=True)
class LoopSettings:
    """What the loop needs beyond Dagster's context: the fingerprint every step carries
    (:func:`project.fingerprint.step_fingerprint`), and its clocks."""

    fingerprint: dict[str, str]
    broker: str
    queue: str
    no_worker_timeout_s: float
    stop_timeout_s: float
    broker_timeout_s: float = 5.0
    worker_check_s: float = 2.0


def check_broker(app: Celery, settings: LoopSettings) -> None:
    """Raise :class:`CeleryUnavailable` when the broker does not accept a connection within ``broker_timeout_s``."""
    try:
        with app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=settings.broker_timeout_s)
    except Exception as error:  # kombu wraps the transport's errors differently per version
        reason = " ".join(str(error).split()) or type(error).__name__
        raise CeleryUnavailable(
            f"the Celery broker {settings.broker} does not answer ({reason}): {START_WORKERS}"
        ) from None


def queue_consumers(app: Celery, queue: str, timeout_s: float = 1.0) -> list[str]:
    """The names of the workers that consume ``queue`` (those that answer within ``timeout_s``)."""
    replies = app.control.inspect(timeout=timeout_s).active_queues() or {}
    return sorted(name for name, queues in replies.items() if any(q.get("name") == queue for q in queues or ()))


def no_worker_message(settings: LoopSettings, waiting: int, waited_s: float | None = None) -> str:
    """One line: no worker on the queue after ``waited_s`` (default ``no_worker_timeout_s``) with ``waiting`` steps."""
    what = f"{waiting} step(s) waited" if waiting else "the run waited"
    if waited_s is None:
        waited = f"{what} {settings.no_worker_timeout_s:g} s (execution.celery.no_worker_timeout_s)"
    else:
        waited = f"none answered within {waited_s:g} s" if waited_s else "none answered"
    return f"no Celery worker consumes queue '{settings.queue}' on {settings.broker}: {waited}; {START_WORKERS}"


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class _Watch:
    """When a worker was last known to be there: one ran a step of ours, or answered on the queue (asked at most
    every ``worker_check_s``)."""

    def __init__(self, app: Celery, settings: LoopSettings) -> None:
        self.app, self.settings = app, settings
        self.seen_at: float | None = None
        self.since = time.monotonic()
        self.asked_at = -math.inf

    def saw_one(self) -> None:
        self.seen_at = time.monotonic()

    def ask(self) -> None:
        now = time.monotonic()
        if now - self.asked_at >= self.settings.worker_check_s:
            self.asked_at = now
            if queue_consumers(self.app, self.settings.queue):
                self.seen_at = now

    def alone_for(self) -> float:
        """Seconds since a worker was last known (or since the run started, when none was)."""
        return time.monotonic() - (self.seen_at if self.seen_at is not None else self.since)


def _revoke(results: dict[str, AsyncResult]) -> None:
    """Drop every task sent that no worker runs yet; SIGTERM to the pool processes running the others."""
    for result in results.values():
        result.revoke(terminate=True, signal="SIGTERM")


def celery_execution_loop(
    job_context: PlanOrchestrationContext, execution_plan: ExecutionPlan, app: Celery, settings: LoopSettings
) -> Iterator[DagsterEvent]:
    """Execute ``execution_plan`` on the workers of ``app``'s broker (module docstring), yielding its events."""
    check_broker(app, settings)
    lines = WorkerLines.of(job_context)
    try:
        yield from _loop(job_context, execution_plan, app, settings, lines)
    finally:
        lines.show_new()  # the last lines: a step that ended as the loop did, an error raised from it


def _loop(
    job_context: PlanOrchestrationContext,
    execution_plan: ExecutionPlan,
    app: Celery,
    settings: LoopSettings,
    lines: WorkerLines,
) -> Iterator[DagsterEvent]:
    """The loop of :func:`celery_execution_loop` (its module doc), showing the workers' ``lines`` every tick."""
    default_priority = app.conf.task_default_priority
    results: dict[str, AsyncResult] = {}
    errors: dict[str, str] = {}
    watch = _Watch(app, settings)
    stopping_since: float | None = None
    concurrency = InstanceConcurrencyContext(job_context.instance, job_context.dagster_run)
    retries = job_context.executor.retries
    with concurrency, execution_plan.start(retry_mode=retries, instance_concurrency_context=concurrency) as active:
        while (not active.is_complete and stopping_since is None) or results:
            if stopping_since is None and active.check_for_interrupts():
                yield DagsterEvent.engine_event(
                    job_context,
                    f"Celery executor: interrupted (Ctrl-C or SIGTERM): revoking {len(results)} step(s) sent to "
                    f"the workers (running ones get SIGTERM); waiting at most {settings.stop_timeout_s:g} s",
                    EngineEventData.interrupted(list(results)),
                )
                active.mark_interrupted()
                _revoke(results)
                stopping_since = time.monotonic()
            if stopping_since is not None and time.monotonic() - stopping_since > settings.stop_timeout_s:
                yield DagsterEvent.engine_event(
                    job_context,
                    f"Celery executor: stopped waiting for {len(results)} revoked step(s) after "
                    f"{settings.stop_timeout_s:g} s ({', '.join(sorted(results))}); a worker that takes one later "
                    "drops it, since the run has ended",
                    EngineEventData(),
                )
                break

            states = {key: result.state for key, result in results.items()}
            if any(state != "PENDING" for state in states.values()):
                watch.saw_one()  # a worker took a step of ours
            lines.show_new()  # after reading the states: every finished task's lines are in the event log by now
            yield from _replay_finished(job_context, active, results, states, errors)
            yield from active.plan_events_iterator(job_context)
            if errors and not results and stopping_since is None:
                raise StepsFailedOnWorkers("; ".join(f"{key}: {error}" for key, error in sorted(errors.items())))

            if stopping_since is None and not errors:
                waiting = sum(state == "PENDING" for state in states.values())
                if watch.seen_at is None or waiting:
                    watch.ask()
                    if watch.alone_for() > settings.no_worker_timeout_s:
                        _revoke(results)
                        raise CeleryUnavailable(no_worker_message(settings, waiting))
                if watch.seen_at is not None:
                    for step in active.get_steps_to_execute():
                        yield DagsterEvent.engine_event(
                            job_context.for_step(step),
                            f'Submitting celery task for step "{step.key}" to queue "{settings.queue}".',
                            EngineEventData(marker_start=DELEGATE_MARKER),
                        )
                        results[step.key] = submit_step(
                            app, job_context, step, settings.queue, default_priority, active.get_known_state(),
                            settings.fingerprint,
                        )  # fmt: skip
            time.sleep(TICK_S)
    if stopping_since is not None:  # every step had finished or was given up: the run still ends as interrupted
        raise DagsterExecutionInterruptedError()


class StepsFailedOnWorkers(Exception):
    """Tasks that raised on the workers (a refused step, a crash outside the step's own error handling)."""


def _replay_finished(
    job_context: PlanOrchestrationContext,
    active: Any,
    results: dict[str, AsyncResult],
    states: dict[str, str],
    errors: dict[str, str],
) -> Iterator[DagsterEvent]:
    """Yield the events of every finished task, drop it from ``results`` and record the tasks that raised."""
    finished = [key for key, state in states.items() if state in READY_STATES]
    for key in finished:
        serialized: list[Any] = []
        try:
            serialized = results[key].get(propagate=True, disable_sync_subtasks=False)
        except TaskRevokedError:
            yield DagsterEvent.engine_event(
                job_context.for_step(active.get_step_by_key(key)),
                f'celery task for running step "{key}" was revoked.',
                EngineEventData(marker_end=DELEGATE_MARKER),
            )
        except Exception as error:
            errors[key] = _one_line(error)
        for item in serialized or ():
            event = deserialize_value(item, DagsterEvent)
            yield event
            active.handle_event(event)
        del results[key]
        active.verify_complete(job_context, key)
