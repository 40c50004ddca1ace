"""The executor switch without a broker: the default stays in process, ``execution.executor: celery`` gives
``build_conteb`` and ``evaluate_conteb`` dagster-celery's executor with the settings the workers share, and a bad
``execution.celery`` block fails when the registry loads, naming the field."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from conteb.config import ConfigError
from pipelines.celery import celery_executor_config, shell_settings, worker_app
from pipelines.definitions import build_definitions
from pipelines.jobs import choose_executor, evaluate_executor
from project.config import CeleryConfig, load_config
from tests.conftest import ROOT, SAMPLE_DIR

SAMPLE_TASK = f"tasks:\n  - name: sample\n    source: {{kind: sample, path: '{SAMPLE_DIR}'}}\n"


def registry(tmp_path: Path, head: str = "") -> Path:
    path = tmp_path / "conteb.yaml"
    path.write_text(head + SAMPLE_TASK, encoding="utf-8")
    return path


def test_without_an_execution_block_both_jobs_stay_in_process(tmp_path: Path) -> None:
    config = load_config(registry(tmp_path))
    assert config.execution.executor == "auto"
    assert choose_executor(config) is dg.in_process_executor
    assert evaluate_executor(config) is dg.in_process_executor
    defs = build_definitions(config)
    assert defs.resolve_job_def("build_conteb").executor_def is dg.in_process_executor
    assert defs.resolve_job_def("evaluate_conteb").executor_def is dg.in_process_executor


def test_the_quickstart_registry_runs_in_process() -> None:
    config = load_config(ROOT / "conteb.yaml")
    assert config.execution.executor != "celery"
    assert choose_executor(config) is dg.in_process_executor


CELERY_HEAD = (
    "execution:\n  executor: celery\n"
    "  celery: {broker: 'redis://127.0.0.1:7001/3', backend: 'redis://127.0.0.1:7001/4'}\n"
)


def test_executor_celery_switches_build_conteb(tmp_path: Path) -> None:
    config = load_config(registry(tmp_path, CELERY_HEAD))
    assert choose_executor(config).name == "celery"
    defs = build_definitions(config)
    assert defs.resolve_job_def("build_conteb").executor_def.name == "celery"
    assert defs.resolve_job_def("reproduce_conteb").executor_def is dg.in_process_executor  # not switched
    executor_config = celery_executor_config(config.execution.celery)
    assert executor_config["broker"] == "redis://127.0.0.1:7001/3"
    assert executor_config["backend"] == "redis://127.0.0.1:7001/4"
    assert executor_config["include"] == ["pipelines.definitions"]
    source = executor_config["config_source"]
    assert source["task_acks_late"] is True and source["task_reject_on_worker_lost"] is True
    assert source["broker_transport_options"]["visibility_timeout"] == 6 * 3600


def test_executor_celery_switches_evaluate_conteb(tmp_path: Path) -> None:
    config = load_config(registry(tmp_path, CELERY_HEAD))
    assert evaluate_executor(config).name == "celery"
    # pipelines/definitions.py must hand the registry to the job: build_evaluate_job(config)
    assert build_definitions(config).resolve_job_def("evaluate_conteb").executor_def.name == "celery"


def test_the_workers_app_has_the_executors_settings_and_task() -> None:
    celery = CeleryConfig(
        broker="redis://127.0.0.1:7002/0", backend="redis://127.0.0.1:7002/1", visibility_timeout_s=900
    )
    app = worker_app(celery, {"registry": "0123456789abcdef"})  # builds the app only: no broker is contacted
    assert app.conf.broker_url == celery.broker and app.conf.result_backend == celery.backend
    assert app.conf.task_acks_late is True and app.conf.task_reject_on_worker_lost is True
    assert app.conf.worker_prefetch_multiplier == 1
    assert app.conf.broker_transport_options["visibility_timeout"] == 900
    assert "conteb_execute_step" in app.tasks and "execute_plan" not in app.tasks  # only the step task that checks
    assert [queue.name for queue in app.conf.task_queues] == ["dagster"]


def test_shell_settings_for_the_script() -> None:
    text = shell_settings(CeleryConfig(broker="redis://localhost/0", backend="redis://localhost/2", workers=3))
    assert dict(line.split("=", 1) for line in text.splitlines()) == {
        "BROKER_URL": "redis://localhost/0",
        "BROKER_HOST": "localhost",
        "BROKER_PORT": "6379",
        "BACKEND_HOST": "localhost",
        "BACKEND_PORT": "6379",
        "WORKERS": "3",
        "CONCURRENCY": "1",
        "QUEUE": "dagster",
    }


@pytest.mark.parametrize(
    ("celery", "message"),
    [
        (
            "{broker: 'amqp://guest@localhost//'}",
            "execution.celery.broker: 'amqp://guest@localhost//' is not a Redis URL",
        ),
        (
            "{backend: 'redis://127.0.0.1:70000/1'}",
            "execution.celery.backend: 'redis://127.0.0.1:70000/1' is not a valid URL",
        ),
        ("{broker: 'redis:///0'}", "execution.celery.broker: 'redis:///0' names no host"),
        ("{broker: 'redis://h:1/zero'}", "the database after the port must be a number"),
        ("{broker: 'redis://h:1/1', backend: 'redis://h:1/1'}", "execution.celery: backend: the same Redis database"),
        ("{workrs: 3}", "execution.celery: unknown key 'workrs' (did you mean 'workers'?)"),
        ("{workers: 0}", "execution.celery.workers: Input should be greater than or equal to 1"),
    ],
)
def test_a_bad_celery_block_fails_at_load_naming_the_field(tmp_path: Path, celery: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(registry(tmp_path, f"execution:\n  executor: celery\n  celery: {celery}\n"))
    assert message in str(error.value)


def test_an_unknown_executor_names_celery_among_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(registry(tmp_path, "execution: {executor: celry}\n"))
    assert "execution.executor" in str(error.value) and "'celery'" in str(error.value)
