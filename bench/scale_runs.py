"""Process measurement for the scale benchmark (``bench/scale.py``): wall time, peak RSS, Dagster step timings.

* :func:`timed_process` runs a command under GNU ``/usr/bin/time -v`` and returns its wall time
  (``time.perf_counter`` around the whole process, start-up included, seconds) and its peak resident set size
  (``Maximum resident set size``: the largest RSS of the process or of any descendant it waited for, KiB -> MiB);
  stdout and stderr go to a log file.
* :func:`run_timing` reads the latest run of a Dagster instance folder (``$DAGSTER_HOME``) back: the run's own
  duration (``RUN_START`` -> ``RUN_SUCCESS``/``RUN_FAILURE`` event timestamps, seconds) and each step's
  (``STEP_START`` -> ``STEP_SUCCESS``/``STEP_FAILURE``), with the pid of the process that ran it.
* :func:`group_usage` reads the peak RSS (``VmHWM`` in ``/proc/<pid>/status``, MiB) and the CPU seconds of every
  live process of a process group: a Celery worker and its pool processes, read before they stop.
* :func:`registry_text` writes a task registry (``conteb.yaml``) as YAML; :func:`dagster_home` makes an instance
  folder with telemetry off; :func:`clean_env` is the environment of a run: the caller's, without any
  ``CONTEB_``/``DAGSTER_``/``OPENAI_`` variable, offline Hugging Face, plus what the caller sets.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
TIME = "/usr/bin/time"
MIB_PER_KIB = 1 / 1024
_MAX_RSS = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")
_EXIT = re.compile(r"Exit status: (\d+)")
_USER = re.compile(r"User time \(seconds\): ([\d.]+)")
_SYSTEM = re.compile(r"System time \(seconds\): ([\d.]+)")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class BenchError(RuntimeError):
    """A measured run that did not do what it should (non-zero exit, wrong counts); the message says which."""


@dataclass(frozen=True)
class ProcessMeasure:
    """One process: wall seconds (start-up included), peak RSS in MiB, exit status, its log, CPU seconds (user +
    system, of the process and its waited-for descendants)."""

    wall_s: float
    peak_rss_mib: float
    returncode: int
    log: Path
    cpu_s: float = float("nan")


def timed_process(command: list[str], env: dict[str, str], log: Path, cwd: Path = ROOT) -> ProcessMeasure:
    """Run ``command`` under ``/usr/bin/time -v`` (see the module docstring); never raises on a non-zero exit."""
    if not Path(TIME).is_file():
        raise BenchError(f"{TIME} (GNU time) not found: Debian package 'time'")
    report = log.with_suffix(".time")
    with log.open("wb") as out:
        start = time.perf_counter()
        done = subprocess.run([TIME, "-v", "-o", str(report), *command], cwd=cwd, env=env, stdout=out, stderr=out)
        wall = time.perf_counter() - start
    text = report.read_text(errors="replace")
    rss = _MAX_RSS.search(text)
    status = _EXIT.search(text)
    user, system = _USER.search(text), _SYSTEM.search(text)
    return ProcessMeasure(
        wall_s=wall,
        peak_rss_mib=int(rss.group(1)) * MIB_PER_KIB if rss else float("nan"),
        returncode=int(status.group(1)) if status else done.returncode,
        log=log,
        cpu_s=float(user.group(1)) + float(system.group(1)) if user and system else float("nan"),
    )


def tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a log, for error messages."""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class RunTiming:
    """A Dagster run read back from its event log: seconds, per step (step key -> seconds, pid)."""

    run_id: str
    status: str
    run_s: float
    steps_s: dict[str, float] = field(default_factory=dict)
    step_pids: dict[str, int] = field(default_factory=dict)
    step_spans: dict[str, tuple[float, float]] = field(default_factory=dict)  # (start, end) timestamps

    def steps_matching(self, part: str) -> list[str]:
        return [key for key in self.steps_s if part in key]

    def span_s(self, part: str) -> float:
        """Wall seconds from the first start to the last end of the steps whose key contains ``part``."""
        spans = [self.step_spans[key] for key in self.steps_matching(part)]
        return max(end for _, end in spans) - min(start for start, _ in spans) if spans else 0.0


def run_timing(home: Path) -> RunTiming:
    """Timings of the latest run of the instance in ``home`` (see the module docstring)."""
    from dagster import DagsterEventType
    from dagster._core.instance import DagsterInstance

    run_ends = (DagsterEventType.RUN_SUCCESS.value, DagsterEventType.RUN_FAILURE.value)
    step_ends = (DagsterEventType.STEP_SUCCESS.value, DagsterEventType.STEP_FAILURE.value)

    instance = DagsterInstance.from_config(str(home))
    try:
        runs = instance.get_runs(limit=1)
        if not runs:
            raise BenchError(f"no Dagster run recorded in {home}")
        run = runs[0]
        starts: dict[str, float] = {}
        timing = RunTiming(run.run_id, run.status.value, 0.0)
        run_start = run_end = None
        for record in instance.all_logs(run.run_id):
            event = record.dagster_event
            if event is None:
                continue
            kind = event.event_type_value
            if kind == DagsterEventType.RUN_START.value:  # "PIPELINE_START" in the event log
                run_start = record.timestamp
            elif kind in run_ends:
                run_end = record.timestamp
            elif kind == DagsterEventType.STEP_START.value and event.step_key:
                starts[event.step_key] = record.timestamp
                timing.step_pids[event.step_key] = event.pid
            elif kind in step_ends and event.step_key in starts:
                begin = starts[event.step_key]
                timing.steps_s[event.step_key] = record.timestamp - begin
                timing.step_spans[event.step_key] = (begin, record.timestamp)
        if run_start is not None and run_end is not None:
            timing.run_s = run_end - run_start
        return timing
    finally:
        instance.dispose()


def group_usage(pgid: int) -> dict[int, tuple[float, float]]:
    """pid -> (peak RSS in MiB: ``VmHWM``, CPU seconds so far: ``utime + stime``) of every live process whose
    process group is ``pgid`` (Linux ``/proc``)."""
    out: dict[int, tuple[float, float]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[-1].split()
            if int(fields[2]) != pgid or fields[0] == "Z":
                continue
            status = (stat.parent / "status").read_text()
        except (OSError, IndexError, ValueError):
            continue
        match = re.search(r"VmHWM:\s+(\d+) kB", status)
        if match:
            cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # fields 14, 15 of stat(5), after the comm
            out[int(stat.parent.name)] = (int(match.group(1)) * MIB_PER_KIB, cpu)
    return out


def registry_text(registry: dict[str, Any]) -> str:
    """``registry`` as the YAML of a ``conteb.yaml``."""
    return yaml.safe_dump(registry, sort_keys=False)


def dagster_home(path: Path) -> Path:
    """An empty Dagster instance folder at ``path`` with telemetry off."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    return path


def clean_env(**values: str) -> dict[str, str]:
    """The environment of a measured run (see the module docstring)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTEB_", "DAGSTER_", "OPENAI_"))}
    env.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "DO_NOT_TRACK": "1", **values})
    return env
