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
process follows. The workers read the registry, ``$CONTEB_DATA_DIR`` and ``$DAGSTER_HOME`` of the environment
they were started in: start them from the same environment as the run.

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

from project.config import CeleryConfig

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
    """The ``celery_executor``'s config (``broker``, ``backend``, ``include``, ``config_source``)."""
    return {
        "broker": celery.broker,
        "backend": celery.backend,
        "include": [WORKER_CODE],
        "config_source": celery_settings(celery),
    }


def celery_executor_def(celery: CeleryConfig) -> dg.ExecutorDefinition:
    """dagster-celery's executor, configured from the registry (no run config needed).

    dagster-celery 0.29 registers its ``execute_plan`` task again for every step it submits, which Celery 5.6+
    reports as a ``DuplicateTaskNameWarning`` per step (the task is the same one); that warning alone is silenced.
    """
    import warnings

    from celery import exceptions
    from dagster_celery import celery_executor

    duplicate = getattr(exceptions, "DuplicateTaskNameWarning", None)  # Celery >= 5.6
    if duplicate is not None:
        warnings.filterwarnings("ignore", message="Task name 'execute_plan'", category=duplicate)
    return celery_executor.configured(celery_executor_config(celery), name="celery")


def worker_app(celery: CeleryConfig) -> Celery:
    """The Celery app the workers run: dagster-celery's app and tasks with :func:`celery_executor_config`."""
    from dagster_celery.executor import CeleryExecutor
    from dagster_celery.make_app import make_app
    from dagster_celery.tasks import create_task

    config = celery_executor_config(celery)
    app = make_app(CeleryExecutor.for_cli(**config).app_args())
    create_task(app)  # the execute_plan task the executor submits
    return app


def __getattr__(name: str) -> Any:
    """``pipelines.celery:app``: the workers' app, built on first use from the registry (``$CONTEB_CONFIG``)."""
    if name == "app":
        from project.config import load_config

        app = worker_app(load_config().execution.celery)
        globals()["app"] = app
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
