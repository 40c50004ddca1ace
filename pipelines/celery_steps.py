"""One Dagster step as one Celery task: how the run's process sends it, and how a worker runs or refuses it.

The run's process (:func:`submit_step`) sends ``conteb_execute_step`` with the step's ``ExecuteStepArgs`` (run id,
step key, instance reference, known state: Dagster's own wire format, as ``dagster-celery`` sends it), the job's
code pointer and its fingerprint (:func:`project.fingerprint.step_fingerprint`, taken when the run's executor
starts: the registry, each prompt file, the code version). It travels as the task's ``registry`` argument, the name
it had when it held the registry's digest alone, so that a worker started before the fingerprint had parts refuses
it with its restart hint rather than a ``TypeError``. A worker (:func:`create_step_task`, registered by
``pipelines/worker.py`` with the fingerprint it took when it started) refuses, before it runs anything:

* a step whose fingerprint differs from the worker's (:class:`StepRefused`, one line naming each part that differs
  -- registry, prompt file, code -- and "restart the workers: make workers-stop && make workers"): workers load
  ``conteb.yaml`` and import the code once, when they start, so after an edit (``llm.temperature``, a task's chunk
  size, ``$CONTEB_DATA_DIR``, ``llm/prompts/reformulation.yaml``, a source file) they would run the old settings
  and report success;
* a step whose run has already ended (Ctrl-C, SIGTERM, no worker in time: the run's process revoked what it had
  sent, but a worker that was not running then never heard of the revoke and may find the task in the queue
  later): it is dropped with an engine event on the run, never executed.

Otherwise the worker runs the step as ``dagster-celery``'s ``execute_plan`` task does (its ``tasks.py``): it logs
``Executing steps <key> in celery worker`` with the worker's name (``Celery worker``), runs the single-step plan
against the run's instance with Dagster's ``execute_plan_iterator`` and returns the serialized events, which the
run's process replays (``pipelines/celery_loop.py``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import dagster as dg
from dagster._core.definitions.reconstruct import ReconstructableJob
from dagster._core.events import EngineEventData
from dagster._core.execution.api import create_execution_plan, execute_plan_iterator
from dagster._grpc.types import ExecuteStepArgs
from dagster._serdes import pack_value, serialize_value, unpack_value

from project.fingerprint import environment_differs, fingerprint_differences

if TYPE_CHECKING:
    from celery import Celery
    from celery.result import AsyncResult
    from dagster._core.execution.context.system import PlanOrchestrationContext
    from dagster._core.execution.plan.step import ExecutionStep

STEP_TASK = "conteb_execute_step"
HANDOUT = "in celery worker"  # "Executing steps <key> in celery worker", as dagster-celery words it
DELEGATE_MARKER = "celery_queue_wait"  # dagster-celery's marker: the time a step waited in the queue
WORKER_KEY = "Celery worker"  # the worker's name (``conteb-<i>@<host>``) in the metadata of the engine events below
PID_KEY = "Worker pid"  # ... and the pool process's pid (``report_engine_event`` records no pid of its own)
RESTART_WORKERS = "make workers-stop && make workers"
REGISTRY_COMMAND = "conteb_registry"  # the workers' remote command that tells the fingerprint they took at start


def worker_metadata(worker: str) -> dict[str, Any]:
    """The metadata naming the worker ``worker`` and this process (the pool process running the task)."""
    return {WORKER_KEY: worker, PID_KEY: os.getpid()}


class StepRefused(Exception):
    """A worker would not run a step; the message says why and what to do (one line)."""


def fingerprint_refusal(step_key: str, run: object, worker_fingerprint: dict[str, str], worker: str) -> str | None:
    """Why worker ``worker`` (which took ``worker_fingerprint`` when it started) must not run ``step_key`` of a run
    whose fingerprint is ``run`` (as received), in one line naming what differs; None when nothing does. When the
    LLM endpoint, model or key source differs, the workers are to be restarted from the run's shell."""
    differences = fingerprint_differences(run, worker_fingerprint)
    if not differences:
        return None
    shell = " from the run's shell" if environment_differs(run, worker_fingerprint) else ""
    return (
        f"step {step_key} refused by Celery worker {worker}: the run was launched with {'; and '.join(differences)}: "
        f"restart the workers{shell}: {RESTART_WORKERS}"
    )


def submit_step(
    app: Celery,
    plan_context: PlanOrchestrationContext,
    step: ExecutionStep,
    queue: str,
    priority: int,
    known_state: Any,
    fingerprint: dict[str, str],
) -> AsyncResult:
    """Send ``step`` of the run to ``queue`` as a :data:`STEP_TASK` carrying the run's ``fingerprint``."""
    args = ExecuteStepArgs(
        job_origin=plan_context.reconstructable_job.get_python_origin(),
        run_id=plan_context.dagster_run.run_id,
        step_keys_to_execute=[step.key],
        instance_ref=plan_context.instance.get_ref(),
        retry_mode=plan_context.executor.retries.for_inner_plan(),
        known_state=known_state,
        print_serialized_events=True,
    )
    signature = app.signature(
        STEP_TASK,
        kwargs={
            "execute_step_args_packed": pack_value(args),
            "executable_dict": plan_context.reconstructable_job.to_dict(),
            "registry": fingerprint,  # the argument's old name: see the module's docstring
        },
        immutable=True,
    )
    return signature.apply_async(priority=priority, queue=queue, routing_key=f"{queue}.{STEP_TASK}")


def worker_fingerprints(app: Celery, timeout_s: float = 1.0) -> dict[str, dict[str, str] | str | None]:
    """Worker name -> the fingerprint it took when it started (a bare registry digest for a worker from before the
    fingerprint had parts, None for a worker without :data:`REGISTRY_COMMAND`: not one of ours), for the workers
    that answer within ``timeout_s``."""
    replies = app.control.broadcast(REGISTRY_COMMAND, reply=True, timeout=timeout_s) or []
    out: dict[str, dict[str, str] | str | None] = {}
    for reply in replies:
        for name, answer in reply.items():
            out[name] = answer.get("fingerprint", answer.get("registry")) if isinstance(answer, dict) else None
    return out


def create_step_task(app: Celery, worker_fingerprint: dict[str, str]) -> Any:
    """Register :data:`STEP_TASK` on the workers' ``app``, and the remote command :data:`REGISTRY_COMMAND` that
    tells ``worker_fingerprint``: the fingerprint the worker took when it started."""
    from celery.worker.control import inspect_command

    @inspect_command(name=REGISTRY_COMMAND)
    def conteb_registry(state: Any) -> dict[str, dict[str, str]]:
        return {"fingerprint": worker_fingerprint}

    @app.task(bind=True, name=STEP_TASK, track_started=True)
    def execute_step(self: Any, execute_step_args_packed: dict, executable_dict: dict, registry: object = None):
        args = unpack_value(execute_step_args_packed, as_type=ExecuteStepArgs)
        instance = dg.DagsterInstance.from_ref(args.instance_ref)  # type: ignore[arg-type]
        run = instance.get_run_by_id(args.run_id)
        if run is None:
            raise StepRefused(f"run {args.run_id} is not in the Dagster instance the step names")
        step_key = ", ".join(args.step_keys_to_execute or [])
        worker = self.request.hostname

        def report(message: str, data: EngineEventData) -> None:
            instance.report_engine_event(message, run, data, step_key=args.step_keys_to_execute[0])

        if run.is_finished:
            report(
                f"step {step_key} not run by Celery worker {worker}: run {run.run_id} has ended ({run.status.value})",
                EngineEventData(worker_metadata(worker), marker_end=DELEGATE_MARKER),
            )
            return []
        refusal = fingerprint_refusal(step_key, registry, worker_fingerprint, worker)
        if refusal is not None:
            report(refusal, EngineEventData(worker_metadata(worker), marker_end=DELEGATE_MARKER))
            raise StepRefused(refusal)

        job = ReconstructableJob.from_dict(executable_dict)
        plan = create_execution_plan(
            job, run.run_config, step_keys_to_execute=args.step_keys_to_execute, known_state=args.known_state
        )
        events = [
            instance.report_engine_event(
                f"Executing steps {step_key} {HANDOUT}",
                run,
                EngineEventData({"step_keys": step_key, **worker_metadata(worker)}, marker_end=DELEGATE_MARKER),
                step_key=plan.step_handle_for_single_step_plans().to_key(),  # type: ignore[union-attr]
            )
        ]
        events += execute_plan_iterator(
            execution_plan=plan, job=job, dagster_run=run, instance=instance, retry_mode=args.retry_mode,
            run_config=run.run_config,
        )  # fmt: skip
        return [serialize_value(event) for event in events]

    return execute_step
