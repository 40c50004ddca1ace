"""A loopback Celery cluster for the Celery executor's tests: redis + N workers, started by ``scripts/workers.sh``.

Test code. :class:`CeleryCluster` owns a folder with the registry the workers and runs read, the data folder, the
Dagster home and the script's state (pids, logs); :meth:`CeleryCluster.start` runs ``scripts/workers.sh start N``
in that environment (the project's own script, so the tests exercise it) and :meth:`CeleryCluster.stop` its
``stop``, then checks that no process it started is left. Runs are launched as the user launches them
(``dagster job execute -m pipelines.definitions -j <job>`` in a subprocess with the same environment), since the
run's process and the workers must load the same registry. Readers of the run's event log:
:func:`celery_workers_by_step` (the ``Celery worker`` that dagster-celery names for each step it hands out) and
:func:`step_start_pids` (the pid of the process that started each step). No Dagster import at module level
beyond what the helpers need.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from pipelines.celery_steps import WORKER_KEY

ROOT = Path(__file__).resolve().parents[2]
WORKERS_SCRIPT = ROOT / "scripts" / "workers.sh"
REDIS_SERVER = shutil.which("redis-server") or (
    "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
)
CELERY_HANDOUT = "in celery worker"  # dagster-celery: "Executing steps <key> in celery worker" (tasks.py)


# A run of some assets of a job with the job's executor (the CLI's `job execute` has no asset selection).
EXECUTE_ASSETS = """
import sys
import dagster as dg
from dagster._core.definitions.reconstruct import ReconstructableRepository

job = ReconstructableRepository.for_module("pipelines.definitions", "defs").get_reconstructable_job(sys.argv[1])
selection = [dg.AssetKey.from_user_string(key) for key in sys.argv[2:]]
with dg.DagsterInstance.get() as instance:
    result = dg.execute_job(job, instance, asset_selection=selection)
sys.exit(0 if result.success else 1)
"""


def free_port() -> int:
    """A TCP port nothing listens on at the moment (on 127.0.0.1)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class CeleryCluster:
    """Redis + ``workers`` Celery workers on 127.0.0.1 for the registry written at ``root / "conteb.yaml"``."""

    root: Path
    registry_text: str
    workers: int = 2
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.registry.write_text(self.registry_text, encoding="utf-8")
        self.dagster_home.mkdir(exist_ok=True)
        (self.dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        self._started_pids: list[int] = []

    @property
    def registry(self) -> Path:
        return self.root / "conteb.yaml"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def dagster_home(self) -> Path:
        return self.root / "dagster-home"

    @property
    def state_dir(self) -> Path:
        return self.root / "celery"

    @property
    def env(self) -> dict[str, str]:
        """The environment of the workers and of the runs (the same one, as the executor requires)."""
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("CONTEB_", "DAGSTER_", "OPENAI_", "PYTEST_"))
        }
        env.update(
            {
                "CONTEB_CONFIG": str(self.registry),
                "CONTEB_DATA_DIR": str(self.data_dir),
                "CONTEB_CELERY_DIR": str(self.state_dir),
                "CONTEB_BIN": str(Path(sys.executable).parent),
                "DAGSTER_HOME": str(self.dagster_home),
                "HF_HOME": str(self.root / "hf-home"),
                "HF_HUB_OFFLINE": "1",
                "HF_DATASETS_OFFLINE": "1",
                "DO_NOT_TRACK": "1",
                **self.extra_env,
            }
        )
        return env

    def script(self, *args: str, check: bool = True, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """``scripts/workers.sh <args>`` in the cluster's environment."""
        done = subprocess.run(
            ["bash", str(WORKERS_SCRIPT), *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"workers.sh {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def start(self) -> None:
        self.script("start", str(self.workers))
        self._started_pids = [*self.worker_pids().values(), self.redis_pid()]

    def stop(self) -> None:
        """``workers.sh stop``; raises when a process it started (worker, pool process, redis) is still there."""
        groups = list(self.worker_pids().values())
        self.script("stop")
        left = [pid for pid in self._started_pids if _alive(pid)]
        left += [pid for group in groups for pid in _members_of_group(group)]
        if left:
            raise AssertionError(f"workers.sh stop left processes running: {sorted(set(left))}")

    def worker_pids(self) -> dict[str, int]:
        """Worker name (``conteb-<i>``) -> pid of its main process, from the script's pid files."""
        return {
            f"conteb-{path.stem.removeprefix('worker-')}": int(path.read_text().strip())
            for path in sorted(self.state_dir.glob("worker-*.pid"))
        }

    def redis_pid(self) -> int:
        return int((self.state_dir / "redis.pid").read_text().strip())

    def launch(self, job: str, log_name: str, assets: list[str] | None = None) -> subprocess.Popen[bytes]:
        """Start the run's process in the cluster's environment, output to ``<log_name>.log``: ``dagster job execute
        -j <job>``, or with ``assets`` (``task/asset`` keys) ``dagster.execute_job`` of those assets of the job."""
        log = (self.root / f"{log_name}.log").open("wb")
        if assets:
            command = [sys.executable, "-c", EXECUTE_ASSETS, job, *assets]
        else:
            command = [sys.executable, "-m", "dagster", "job", "execute", "-m", "pipelines.definitions", "-j", job]
        return subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)

    def log_text(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text(errors="replace")

    def worker_logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-4000:]}" for path in self.state_dir.glob("*.log")
        )

    def instance(self) -> dg.DagsterInstance:
        from dagster._core.instance import DagsterInstance

        return DagsterInstance.from_config(str(self.dagster_home))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] == "Z")  # zombies are gone


def _members_of_group(pgid: int) -> list[int]:
    """Live pids whose process group is ``pgid`` (Linux /proc)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def process_group(pid: int) -> int | None:
    """The process group of ``pid`` (None when it is gone)."""
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def run_events(instance: dg.DagsterInstance, run_id: str) -> list[dg.DagsterEvent]:
    return [record.dagster_event for record in instance.all_logs(run_id) if record.dagster_event is not None]


def celery_workers_by_step(events: list[dg.DagsterEvent]) -> dict[str, list[str]]:
    """Step key -> the Celery worker of each hand-out of the step (in order): dagster-celery's engine event
    ``Executing steps <key> in celery worker`` carries the worker's name (``Celery worker`` metadata)."""
    out: dict[str, list[str]] = defaultdict(list)
    for event in events:
        if event.event_type_value != "ENGINE_EVENT" or CELERY_HANDOUT not in (event.message or ""):
            continue
        metadata = event.engine_event_data.metadata
        out[event.step_key].append(str(metadata[WORKER_KEY].value))
    return dict(out)


def step_start_pids(events: list[dg.DagsterEvent]) -> dict[str, list[int]]:
    """Step key -> pid of the process of each ``STEP_START`` of the step (in order)."""
    out: dict[str, list[int]] = defaultdict(list)
    for event in events:
        if event.event_type_value == "STEP_START":
            out[event.step_key].append(event.pid)
    return dict(out)


def finished_steps(events: list[dg.DagsterEvent]) -> set[str]:
    return {e.step_key for e in events if e.event_type_value in ("STEP_SUCCESS", "STEP_FAILURE")}
