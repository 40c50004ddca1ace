"""``execution.executor: celery`` without what it needs fails fast, in one line, and stops when asked.

No broker: the run fails within seconds naming the broker URL and ``make workers`` (it used to retry for 40 s and
end in a raw ``redis.exceptions.ConnectionError``). A broker and no worker: the run fails after
``execution.celery.no_worker_timeout_s`` (it used to wait forever, deaf to SIGINT and SIGTERM), and Ctrl-C while
it waits ends it at once. ``conteb workers check`` (what ``make run`` and ``make evaluate`` ask first) says the same
before any run starts. ``make workers`` keeps an exported ``DAGSTER_HOME``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from tests.conftest import ROOT, SAMPLE_DIR
from tests.support.celery_cluster import REDIS_SERVER, free_port
from tests.support.make import user_make_env
from tests.support.signalled_run import run_then_signal

pytestmark = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed (scripts/install-redis.sh)")

MAKE_WORKERS = "`make workers` starts Redis and the workers"


def celery_registry(tmp_path: Path, port: int, no_worker_timeout_s: float = 60) -> Path:
    path = tmp_path / "conteb.yaml"
    path.write_text(
        "execution:\n  executor: celery\n"
        f"  celery: {{broker: 'redis://127.0.0.1:{port}/0', backend: 'redis://127.0.0.1:{port}/1', "
        f"no_worker_timeout_s: {no_worker_timeout_s}}}\n"
        f"tasks:\n  - name: demo\n    source: {{kind: sample, path: '{SAMPLE_DIR}'}}\n"
    )
    return path


def dagster_build() -> list[str]:
    return [str(Path(sys.executable).parent / "dagster"), "job", "execute", "-m", "pipelines.definitions", "-j",
            "build_conteb"]  # fmt: skip


def conteb(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "conteb"), *args]


@pytest.fixture
def redis_port(tmp_path: Path):
    """A Redis on a free loopback port with no worker behind it."""
    port = free_port()
    server = subprocess.Popen(
        [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=10)


def latest_status(isolated_env: Path) -> dg.DagsterRunStatus:
    with dg.DagsterInstance.from_config(str(isolated_env.parent / "dagster-home")) as instance:
        return instance.get_runs(limit=1)[0].status


def test_no_broker_fails_within_seconds_naming_it(tmp_path: Path, isolated_env: Path) -> None:
    port = free_port()  # nothing listens there
    env = {**os.environ, "CONTEB_CONFIG": str(celery_registry(tmp_path, port))}
    check = subprocess.run(conteb("workers", "check"), env=env, capture_output=True, text=True, timeout=60)
    assert check.returncode == 1
    (line,) = check.stderr.strip().splitlines()  # one line, no traceback
    assert f"the Celery broker redis://127.0.0.1:{port}/0 does not answer" in line and MAKE_WORKERS in line

    started = time.monotonic()
    run = subprocess.run(dagster_build(), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    seconds = time.monotonic() - started
    print(f"no broker: the run exited {run.returncode} after {seconds:.1f} s (code location load included)")
    assert run.returncode != 0
    assert f"CeleryUnavailable: the Celery broker redis://127.0.0.1:{port}/0 does not answer" in run.stderr
    assert "redis.exceptions.ConnectionError" not in run.stderr
    assert latest_status(isolated_env) == dg.DagsterRunStatus.FAILURE


def test_no_worker_fails_after_the_timeout(tmp_path: Path, isolated_env: Path, redis_port: int) -> None:
    env = {**os.environ, "CONTEB_CONFIG": str(celery_registry(tmp_path, redis_port, no_worker_timeout_s=3))}
    check = subprocess.run(conteb("workers", "check"), env=env, capture_output=True, text=True, timeout=60)
    assert check.returncode == 1
    (line,) = check.stderr.strip().splitlines()
    assert "no Celery worker consumes queue 'dagster'" in line and MAKE_WORKERS in line

    run = subprocess.run(dagster_build(), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert (
        f"CeleryUnavailable: no Celery worker consumes queue 'dagster' on redis://127.0.0.1:{redis_port}/0: the run "
        "waited 3 s (execution.celery.no_worker_timeout_s)" in run.stderr
    )
    assert latest_status(isolated_env) == dg.DagsterRunStatus.FAILURE


def test_ctrl_c_while_waiting_for_a_worker_ends_the_run(tmp_path: Path, isolated_env: Path, redis_port: int) -> None:
    config = celery_registry(tmp_path, redis_port, no_worker_timeout_s=600)
    home = isolated_env.parent / "dagster-home"
    # The instance's SQLite storage is made here, before the run starts: polling it while the run's process makes
    # it raced the two schema creations (alembic: "more than one head present", seen once under `pytest -n 4`).
    dg.DagsterInstance.from_config(str(home)).dispose()

    def waiting_for_a_worker() -> bool:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            runs = instance.get_runs(limit=1)
        if runs and runs[0].status == dg.DagsterRunStatus.STARTED:
            time.sleep(2)  # past the broker check: the loop asks the queue for a worker
            return True
        return False

    stopped = run_then_signal(
        dagster_build(),
        env={**os.environ, "CONTEB_CONFIG": str(config)},
        cwd=ROOT,
        log=tmp_path / "run.log",
        ready=waiting_for_a_worker,
        sig=signal.SIGINT,
        stop_within=15,
        ended_line="RUN_FAILURE",  # the run is over; the interpreter's teardown follows (signalled_run.py)
        exit_within=60,
    )
    print(f"celery, no worker: SIGINT -> exit {stopped.returncode} after {stopped.seconds_to_stop:.1f} s")
    assert stopped.returncode != 0
    assert latest_status(isolated_env) == dg.DagsterRunStatus.FAILURE


def test_make_workers_keeps_an_exported_dagster_home(tmp_path: Path) -> None:
    port = free_port()
    home = tmp_path / "my-dagster-home"
    home.mkdir()
    env = user_make_env(
        {
            "CONTEB_CONFIG": str(celery_registry(tmp_path, port)),
            "CONTEB_CELERY_DIR": str(tmp_path / "celery"),
            "DAGSTER_HOME": str(home),
        }
    )
    make = ["make", "-s", "-o", ".venv/.installed"]
    try:
        started = subprocess.run([*make, "workers", "N=1"], cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=180)  # fmt: skip
        assert started.returncode == 0, started.stdout + started.stderr
        recorded = dict(line.split("=", 1) for line in (tmp_path / "celery" / "env").read_text().splitlines())
        assert recorded["DAGSTER_HOME"] == str(home)
    finally:
        stopped = subprocess.run([*make, "workers-stop"], cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=120)  # fmt: skip
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
