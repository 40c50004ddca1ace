"""Dagster's Celery executor (``dagster-celery``) for ``execution.executor: celery``, and the workers' Celery app.

One source of truth for both sides: :func:`celery_app_args` turns the registry's ``execution.celery`` block
(:class:`project.config.CeleryConfig`) into the arguments of the Celery app; the run's executor
(:func:`celery_executor_def`) and the workers (``celery -A pipelines.celery:app worker``, started by
``scripts/workers.sh``) are built from it, so they always share the broker, the result backend and the queue.

How a step travels (dagster-celery 0.29, ``dagster_celery/core_execution_loop.py`` and ``tasks.py``): the run's
process puts one ``execute_plan`` task per ready step on the ``dagster`` queue, carrying the run id, the step key,
the job's code pointer and a reference to the Dagster instance; a worker loads the code (``pipelines.definitions``,
imported once per worker before its pool forks: ``include``), runs that one step against the shared instance and
data folder, logs ``Executing steps <key> in celery worker`` with the worker's name (``Celery worker`` metadata;
every event also carries the pid of the process that ran the step) and returns the step's events, which the run's
process follows. The workers read the registry, ``$CONTEB_DATA_DIR``, ``$CONTEB_PROMPTS_DIR`` and ``$DAGSTER_HOME``
of the environment they were started in: start them from the same environment as the run.

A worker process killed mid-step (SIGKILL, the OOM killer): with ``task_acks_late`` the task is acknowledged only
when the step has finished, and with ``task_reject_on_worker_lost`` the worker that loses its pool process puts
the task back on the queue (Celery ``worker/request.py``: ``on_failure`` rejects with ``requeue=True`` and records
no failure), so another worker process runs the step again in the same run; the LLM stages then ask only for the
answers their cache (``data/llm/answers.sqlite``) does not hold yet. When a worker's *main* process dies, its pool
dies with it (Celery sets ``PR_SET_PDEATHSIG``) and the unacknowledged task is handed out again after
``visibility_timeout_s`` (Redis transport). A step that kills every worker it meets is re-queued forever: Dagster's
run monitoring (``run_monitoring`` in ``dagster.yaml``) is the bound in production.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import dagster as dg
from dagster_celery.executor import CeleryExecutor

from pipelines.celery_loop import LoopSettings, celery_execution_loop
from pipelines.celery_steps import create_step_task
from project.config import CeleryConfig, ProjectConfig
from project.fingerprint import step_fingerprint

if TYPE_CHECKING:
    from celery import Celery

QUEUE = "dagster"  # dagster-celery's default queue (make_app routes execute_plan there)
WORKER_CODE = "pipelines.definitions"  # imported by each worker before it forks its pool processes


def celery_settings(celery: CeleryConfig) -> dict[str, Any]:
    """The Celery settings (lowercase names, Celery >= 4) both the run's app and the workers' app use."""
    from dagster_celery.defaults import broker_transport_options

    return {
        "task_acks_late": True,  # acknowledge when the step is done, not when it is taken
        "task_reject_on_worker_lost": True,  # a killed pool process puts its task back on the queue
        "worker_prefetch_multiplier": 1,  # a worker holds no step it is not running
        "broker_transport_options": {**broker_transport_options, "visibility_timeout": celery.visibility_timeout_s},
        "result_backend_transport_options": {"visibility_timeout": celery.visibility_timeout_s},
        "broker_connection_retry_on_startup": True,
        "worker_hijack_root_logger": False,
    }


def celery_executor_config(celery: CeleryConfig) -> dict[str, Any]:
    """The Celery app's arguments (``broker``, ``backend``, ``include``, ``config_source``) of both sides."""
    return {
        "broker": celery.broker,
        "backend": celery.backend,
        "include": [WORKER_CODE],
        "config_source": celery_settings(celery),
    }


def loop_settings(celery: CeleryConfig, fingerprint: dict[str, str]) -> LoopSettings:
    """The run-side loop's settings (``pipelines/celery_loop.py``) from the ``execution.celery`` block, with the
    ``fingerprint`` every step carries."""
    return LoopSettings(
        fingerprint=fingerprint,
        broker=celery.broker,
        queue=QUEUE,
        no_worker_timeout_s=celery.no_worker_timeout_s,
        stop_timeout_s=celery.stop_timeout_s,
    )


class ConTEBCeleryExecutor(CeleryExecutor):
    """dagster-celery's executor (its app arguments, retries) with this project's loop: ``celery_loop.py``."""

    def __init__(self, loop: LoopSettings, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.loop = loop

    def execute(self, plan_context: Any, execution_plan: Any) -> Any:
        from dagster_celery.make_app import make_app

        return celery_execution_loop(plan_context, execution_plan, make_app(self.app_args()), self.loop)


def celery_executor_def(config: ProjectConfig) -> dg.ExecutorDefinition:
    """The executor ``celery``: steps to the workers of ``config.execution.celery``, each step carrying the run's
    fingerprint (:func:`project.fingerprint.step_fingerprint` of ``config``, the prompt files and the code, taken
    when the run's executor starts, so a long-lived process that builds runs sends what is on disk now)."""
    celery = config.execution.celery
    from dagster._core.execution.retries import RetryMode, get_retries_config

    arguments = celery_executor_config(celery)

    @dg.executor(
        name="celery",
        config_schema={"retries": get_retries_config()},
        requirements=dg.multiple_process_executor_requirements(),
    )
    def conteb_celery_executor(init_context: dg.InitExecutorContext) -> ConTEBCeleryExecutor:
        """Every step on a Celery worker of ``execution.celery`` (``make workers``); stops on Ctrl-C and SIGTERM,
        fails fast without a broker or a worker, and is refused by workers whose fingerprint differs."""
        retries = RetryMode.from_config(init_context.executor_config["retries"])
        loop = loop_settings(celery, step_fingerprint(config))
        return ConTEBCeleryExecutor(loop=loop, retries=retries, **arguments)

    return conteb_celery_executor


def celery_app(celery: CeleryConfig) -> Celery:
    """The Celery app of ``celery`` (the registry block) as the run's process builds it: broker, backend, queue."""
    from dagster_celery.make_app import make_app

    return make_app(CeleryExecutor.for_cli(**celery_executor_config(celery)).app_args())


def worker_app(celery: CeleryConfig, fingerprint: dict[str, str]) -> Celery:
    """The Celery app the workers run (``pipelines/worker.py``): :func:`celery_app` and the step task
    (``celery_steps.py``), which refuses steps of runs whose fingerprint differs from ``fingerprint`` (the
    worker's own, taken when it started)."""
    app = celery_app(celery)
    create_step_task(app, fingerprint)
    return app


def shell_settings(celery: CeleryConfig) -> str:
    """``KEY=value`` lines for ``scripts/workers.sh``: the broker's and backend's host and port, workers, concurrency.

    Hosts and ports come from the URLs (Redis' default port 6379 when a URL names none); values are plain
    (validated URLs hold no spaces or quotes in host and port).
    """
    from urllib.parse import urlsplit

    broker, backend = urlsplit(celery.broker), urlsplit(celery.backend)
    lines = {
        "BROKER_URL": celery.broker,
        "BROKER_HOST": broker.hostname,
        "BROKER_PORT": broker.port or 6379,
        "BACKEND_HOST": backend.hostname,
        "BACKEND_PORT": backend.port or 6379,
        "WORKERS": celery.workers,
        "CONCURRENCY": celery.concurrency,
        "QUEUE": QUEUE,
    }
    return "".join(f"{key}={value}\n" for key, value in lines.items())


if __name__ == "__main__":  # python -m pipelines.celery: the settings scripts/workers.sh starts redis and workers with
    import sys

    from conteb.config import ConfigError
    from project.config import load_config

    try:
        sys.stdout.write(shell_settings(load_config().execution.celery))
    except ConfigError as error:
        sys.exit(f"{error}")
