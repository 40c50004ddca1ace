"""Ctrl-C (SIGINT) and SIGTERM stop a run within seconds, whatever the job and the executor.

Each test launches ``dagster job execute`` as a user does (``tests/support/signalled_run.py``: its own process group),
waits until a long step is under way, signals the group and checks that the command exits within seconds, that no
process of the run is left, that the run is recorded as failed (Dagster's word for an interrupted run) and, where
it matters, that nothing already paid or reported is lost. The Celery executor's cases are in
``tests/test_celery_executor.py`` (they share its workers).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
from pathlib import Path

import dagster as dg
import pytest

from tests.conftest import ROOT, SAMPLE_DIR, sample_counts
from tests.support.openai_server import OpenAICompatibleServer
from tests.support.signalled_run import SignalledRun, run_then_signal
from tests.support.tiny_models import tiny_modernbert
from tests.test_llm_stages_e2e import API_KEY, scripted_llm

STOP_WITHIN_S = 20  # the run is over: its steps stopped, its end recorded (generous for a loaded 2-core machine)
EXIT_WITHIN_S = 60  # the process is gone, after the interpreter's teardown (tests/support/signalled_run.py)
RUN_ENDED = "resulted in failure"  # ``dagster job execute``'s last line, printed once the run's end is recorded

pytestmark = pytest.mark.slow


def dagster_job(job: str) -> list[str]:
    return [str(Path(sys.executable).parent / "dagster"), "job", "execute", "-m", "pipelines.definitions", "-j", job]


def latest_run(dagster_home: Path) -> dg.DagsterRun:
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        (run,) = instance.get_runs(limit=1)
        return run


def run_event_types(dagster_home: Path, run_id: str) -> list[tuple[str, str | None]]:
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        return [
            (record.dagster_event.event_type_value, record.dagster_event.step_key)
            for record in instance.all_logs(run_id)
            if record.dagster_event is not None
        ]


def stored_answers(data_dir: Path) -> int:
    path = data_dir / "llm" / "answers.sqlite"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            return db.execute("SELECT count(*) FROM answers").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def signalled(
    tmp_path: Path, job: str, config: Path, ready_line: str | None, sig: signal.Signals, **env: str
) -> SignalledRun:
    """``dagster job execute -j <job>`` on ``config``, signalled once ``ready_line`` is in its output."""
    log = tmp_path / "run.log"
    stopped = run_then_signal(
        dagster_job(job),
        env={**os.environ, "CONTEB_CONFIG": str(config), **env},
        cwd=ROOT,
        log=log,
        ready=lambda: ready_line in log.read_text(errors="replace"),
        sig=sig,
        stop_within=STOP_WITHIN_S,
        ended_line=RUN_ENDED,
        exit_within=EXIT_WITHIN_S,
    )
    print(
        f"{job}: {sig.name} -> run over after {stopped.seconds_to_end:.1f} s, "
        f"exit {stopped.returncode} after {stopped.seconds_to_stop:.1f} s"
    )
    return stopped


def build_in_process(config: Path) -> None:
    from pipelines.definitions import build_definitions
    from project.config import load_config

    assert build_definitions(load_config(config)).resolve_job_def("build_conteb").execute_in_process().success


@pytest.mark.parametrize(
    ("executor", "sig"), [("in_process", signal.SIGINT), ("multiprocess", signal.SIGTERM)], ids=["in-process", "multi"]
)
def test_build_stops_mid_llm_stage_without_retrying_it(
    tmp_path: Path, isolated_env: Path, executor: str, sig: signal.Signals
) -> None:
    """A shard step has a retry policy: an interrupt there used to start it again (in process: the run went on)."""
    with OpenAICompatibleServer(scripted_llm, latency_s=0.3) as server:
        config = tmp_path / "conteb.yaml"
        config.write_text(
            f"llm: {{base_url: {server.url}, max_concurrency: 1}}\nexecution: {{executor: {executor}}}\n"
            f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n    synthetic_queries: 1\n"
            "    answerability: false\n"
        )
        at_signal: list[int] = []

        def mid_stage() -> bool:
            stored = stored_answers(isolated_env)
            if stored >= 3:
                at_signal.append(stored)
                return True
            return False

        stopped = run_then_signal(
            dagster_job("build_conteb"),
            env={**os.environ, "CONTEB_CONFIG": str(config), "OPENAI_API_KEY": API_KEY},
            cwd=ROOT,
            log=tmp_path / "run.log",
            ready=mid_stage,
            sig=sig,
            stop_within=STOP_WITHIN_S,
            ended_line=RUN_ENDED,
            exit_within=EXIT_WITHIN_S,
        )
        asked = len(server.chat_requests())
    print(
        f"{executor}: {sig.name} -> run over after {stopped.seconds_to_end:.1f} s, "
        f"exit {stopped.returncode} after {stopped.seconds_to_stop:.1f} s"
    )
    assert stopped.returncode != 0
    run = latest_run(isolated_env.parent / "dagster-home")
    assert run.status in (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
    events = run_event_types(isolated_env.parent / "dagster-home", run.run_id)
    shard_events = [kind for kind, step in events if step and "synthetic_queries__shard" in step]
    assert "STEP_START" in shard_events
    assert "STEP_UP_FOR_RETRY" not in shard_events and "STEP_RESTARTED" not in shard_events, shard_events
    assert not any(kind == "STEP_SUCCESS" and step and "__merge" in step for kind, step in events)
    assert stored_answers(isolated_env) >= at_signal[0]  # every answer paid before the signal is kept
    assert asked < sample_counts().chunks  # the stage did not run to its end (one request per chunk)


def test_evaluate_stopped_while_ranking_leaves_the_complete_reports(tmp_path: Path, isolated_env: Path) -> None:
    """SIGINT during the rank step (which writes run files, metrics and reports) changes no file of reports/."""
    config = tmp_path / "conteb.yaml"
    config.write_text(
        f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n"
        "evaluation:\n  systems:\n    - {name: bm25, kind: bm25}\n"
        "    - {name: bm25-subword, kind: bm25, tokenizer: model, stemmer: null, stopwords: null}\n"
        "  chunk_sizes: {enabled: false, systems: []}\n"
        "  bootstrap: {resamples: 200000}\n"  # a rank step that lasts: the signal lands while it writes
    )
    build_in_process(config)
    reports = isolated_env / "reports"
    earlier = {
        "runs/demo/bm25.trec": b"q1 Q0 d_0 1 1.0 bm25\n",
        "runs/demo/qrels.trec": b"q1 0 d_0 1\n",
        "tasks/demo/report.md": b"# the earlier report\n",
        "report.md": b"# the earlier overall report\n",
    }
    for name, content in earlier.items():
        (reports / name).parent.mkdir(parents=True, exist_ok=True)
        (reports / name).write_bytes(content)
    # The rank step's first line: the signal lands while it ranks, measures and writes.
    stopped = signalled(tmp_path, "evaluate_conteb", config, "systems: bm25, bm25-subword", signal.SIGINT)
    assert stopped.returncode != 0
    assert latest_run(isolated_env.parent / "dagster-home").status == dg.DagsterRunStatus.FAILURE
    now = {str(p.relative_to(reports)): p.read_bytes() for p in sorted(reports.rglob("*")) if p.is_file()}
    assert now == earlier  # nothing of the interrupted evaluation landed, no stage left behind


def _training_registry(tmp_path: Path, head: str = "") -> Path:
    base = tmp_path / "tiny-base"
    tiny_modernbert().save(str(base))
    config = tmp_path / "conteb.yaml"
    settings = f"{{base_model: {base}, max_steps: 100000, batch_docs: 2, eval_every: 0, checkpoint_every: 0}}"
    config.write_text(
        head + f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n"
        "    splits: {train: 0.5, test: 0.5, seed: 0}\n"
        f"training:\n  tasks: [demo]\n  control: false\n  settings: {settings}\n"
    )
    return config


def test_training_stops_on_sigterm_and_leaves_no_trainer_behind(tmp_path: Path, isolated_env: Path) -> None:
    """train_insent runs the trainer in a Dagster Pipes subprocess: SIGTERM to the group ends both."""
    config = _training_registry(tmp_path)
    build_in_process(config)
    # "step step=2": the trainer is taking optimizer steps.
    stopped = signalled(tmp_path, "train_insent", config, "step step=2", signal.SIGTERM)
    assert stopped.returncode != 0
    assert latest_run(isolated_env.parent / "dagster-home").status == dg.DagsterRunStatus.FAILURE
    assert not (isolated_env / "models" / "insent_model" / "model.safetensors").exists()  # no model was published


def test_reproduce_stops_on_ctrl_c_during_training(tmp_path: Path, isolated_env: Path) -> None:
    base = tmp_path / "tiny-base"
    tiny_modernbert().save(str(base))
    config = tmp_path / "conteb.yaml"
    config.write_text(
        "tasks: []\nreproduce:\n"
        f"  source: {SAMPLE_DIR}\n  splits: {{train: 0.5, test: 0.5, seed: 0}}\n  profiles:\n"
        f"    cpu: {{base_model: {base}, training: {{max_steps: 100000, batch_docs: 2, eval_every: 0, "
        "checkpoint_every: 0}, chunk_sizes: [1000]}\n"
    )
    stopped = signalled(tmp_path, "reproduce_conteb", config, "step step=2", signal.SIGINT)
    assert stopped.returncode != 0
    assert latest_run(isolated_env.parent / "dagster-home").status == dg.DagsterRunStatus.FAILURE
    assert not (isolated_env / "reports" / "reproduce").exists()
