"""The Celery executor on loopback: redis + two workers started by scripts/workers.sh, runs launched with
``dagster job execute`` as a user launches them, the LLM stage against the local OpenAI-compatible server.

1. ``build_conteb`` with ``execution.executor: celery`` succeeds, its steps ran in the pool processes of both
   workers (the event log: dagster-celery's ``Celery worker`` of each step, the pid of each ``STEP_START``), and
   its tables equal those of an in-process run of the same registry.
2. The pool process running the LLM stage is killed with SIGKILL mid-step: the task goes back on the queue
   (``task_acks_late`` + ``task_reject_on_worker_lost``), the step runs again, the run succeeds, and no answer
   the cache held at the kill was asked for again (requests counted per prompt on the server).
3. ``evaluate_conteb`` with the same switch: its encode shards (``execution.encode_shard_documents``) ran on both
   workers, and its numbers equal an in-process evaluation of the same data.
4. Ctrl-C or SIGTERM to the run's process group mid LLM step: the run ends within seconds, its step stops on the
   worker, the workers stay up.
5. A registry edited after the workers started: ``conteb workers check`` and the run both refuse, saying to restart
   the workers.

Assumptions about the LLM stage (the sharding of LLM stages may change its steps): every step of the
``chunk_contexts`` stage has ``chunk_contexts`` in its step key, each asks for the contexts of its chunks, and the
stage's outputs are ``<data>/stages/demo/*.parquet`` like every stage's. Shard names are never hard-coded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT, SAMPLE_DIR, sample_counts
from tests.support.celery_cluster import (
    EXECUTE_ASSETS,
    REDIS_SERVER,
    CeleryCluster,
    celery_workers_by_step,
    finished_steps,
    free_port,
    process_group,
    run_events,
    step_start_pids,
)
from tests.support.openai_server import OpenAICompatibleServer
from tests.support.signalled_run import run_then_signal

API_KEY = "sk-test-celery"
LLM_STAGE = "chunk_contexts"  # the LLM stage under test; its steps are found by this name in their keys
MAX_CONCURRENCY = 2  # llm.max_concurrency of the registry: at most this many requests are in flight in a step
LLM_STAGE_ASSETS = ("demo/chunk_contexts", "demo/context_quarantine")  # the stage's asset keys (README)
SHARD_DOCUMENTS = sample_counts().shard_size(3)  # execution.shard_documents: three LLM steps (when sharded)
ENCODE_SHARD_DOCUMENTS = sample_counts().shard_size(2)  # execution.encode_shard_documents: two encode steps

pytestmark = pytest.mark.skipif(
    REDIS_SERVER is None,
    reason="redis-server not found: run scripts/install-redis.sh (Debian: apt-get install redis-server); CI does",
)


def prompt_token(body: dict[str, Any]) -> str:
    """A name for one request: the hash of its messages (the same prompt always gets the same token)."""
    return hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()[:16]


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """Chunk contexts that name their request, so a stored answer tells which request it came from."""
    stage = body["response_format"]["json_schema"]["name"]
    if stage == "chunk_context":
        return {"context": f"ctx-{prompt_token(body)}"}
    raise AssertionError(f"unexpected LLM stage {stage}")


def context_requests(server: OpenAICompatibleServer, since: int = 0) -> Counter[str]:
    """How many times each chunk-context prompt reached the server (requests ``since`` on)."""
    bodies = [request.json() for request in server.chat_requests()[since:]]
    return Counter(prompt_token(b) for b in bodies if b["response_format"]["json_schema"]["name"] == "chunk_context")


def stored_contexts(data_dir: Path) -> dict[str, str]:
    """Prompt token -> custom id of every chunk context in the answer cache (data/llm/answers.sqlite)."""
    path = data_dir / "llm" / "answers.sqlite"
    if not path.exists():
        return {}
    with sqlite3.connect(path, timeout=30) as db:
        try:
            rows = db.execute("SELECT custom_id, value FROM answers").fetchall()
        except sqlite3.OperationalError:  # the table is being created
            return {}
    out = {}
    for custom_id, value in rows:
        context = json.loads(value).get("context", "")
        if context.startswith("ctx-"):
            out[context.removeprefix("ctx-")] = custom_id
    return out


@pytest.fixture(scope="module")
def llm_server():
    with OpenAICompatibleServer(answer) as server:
        yield server


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, llm_server: OpenAICompatibleServer, tiny_model_folder: Path):
    """Redis on a free loopback port and two workers for a registry with one LLM stage (chunk contexts) and one dense
    system (on a tiny random model: the test is where its shards run, not MiniLM's score)."""
    port = free_port()
    registry = (
        f"llm: {{base_url: '{llm_server.url}', max_concurrency: {MAX_CONCURRENCY}, backoff_initial_s: 0.01}}\n"
        f"execution:\n  executor: celery\n  shard_documents: {SHARD_DOCUMENTS}\n"
        f"  encode_shard_documents: {ENCODE_SHARD_DOCUMENTS}\n"
        f"  celery: {{broker: 'redis://127.0.0.1:{port}/0', backend: 'redis://127.0.0.1:{port}/1'}}\n"
        f"tasks:\n  - name: demo\n    source: {{kind: sample, path: '{SAMPLE_DIR}'}}\n"
        "    chunk_contexts: true\n    answerability: false\n"
        "evaluation:\n  systems:\n"
        f"    - {{name: independent, kind: dense, model: '{tiny_model_folder}', context: independent}}\n"
        "  chunk_sizes: {enabled: false, systems: []}\n  significance: {comparisons: []}\n"
        "  bootstrap: {resamples: 100}\n  scaling: {points: 2, repeats: 1}\n"
    )
    running = CeleryCluster(
        tmp_path_factory.mktemp("celery"), registry, workers=2, extra_env={"OPENAI_API_KEY": API_KEY}
    )
    running.start()
    try:
        yield running
    finally:
        running.stop()  # raises when a process it started is left


def latest_run(instance: dg.DagsterInstance, not_in: set[str] = frozenset()) -> dg.DagsterRun | None:
    runs = [run for run in instance.get_runs() if run.run_id not in not_in]
    return runs[0] if runs else None


def chunk_count(data_dir: Path) -> int:
    path = data_dir / "stages" / "demo" / "chunks.parquet"
    return pq.read_metadata(path).num_rows if path.exists() else 0


def tables(folder: Path) -> dict[str, Any]:
    """Relative path -> pyarrow table of every Parquet file under ``folder``."""
    return {str(p.relative_to(folder)): pq.read_table(p) for p in sorted(folder.rglob("*.parquet"))}


@pytest.fixture(scope="module")
def celery_build(cluster: CeleryCluster, llm_server: OpenAICompatibleServer) -> dg.DagsterRun:
    """One ``dagster job execute -j build_conteb`` on the workers (the data the other tests start from)."""
    llm_server.latency_s = 0.1  # LLM steps last long enough for both workers to take some
    try:
        run = cluster.launch("build_conteb", "build")
        assert run.wait(timeout=240) == 0, cluster.log_text("build") + cluster.worker_logs()
    finally:
        llm_server.latency_s = 0.0
    record = latest_run(cluster.instance())
    assert record.status == dg.DagsterRunStatus.SUCCESS
    return record


def test_build_runs_its_steps_on_both_workers_and_matches_in_process(
    cluster: CeleryCluster, celery_build: dg.DagsterRun, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    twice = cluster.script("start", "2", check=False)
    assert twice.returncode != 0 and "already running" in twice.stderr  # the script refuses to start twice

    events = run_events(cluster.instance(), celery_build.run_id)
    workers, pids = celery_workers_by_step(events), step_start_pids(events)
    assert any(LLM_STAGE in key for key in pids), sorted(pids)
    assert set(workers) == set(pids)  # every step was handed to a Celery worker
    assert {name.split("@")[0] for names in workers.values() for name in names} == {"conteb-1", "conteb-2"}
    llm_steps = [key for key in workers if LLM_STAGE in key]
    if len(llm_steps) > 1:  # a sharded stage (several steps): its steps ran on both workers
        assert {workers[key][0].split("@")[0] for key in llm_steps} == {"conteb-1", "conteb-2"}, workers
    # ... in pool processes of the two workers the script started (their process groups), not in the run's process
    assert {process_group(pid) for step in pids.values() for pid in step} == set(cluster.worker_pids().values())

    # The launching terminal shows each step's start and end, tagged with the worker that ran it (its last hand-out).
    terminal = cluster.log_text("build")
    for step, names in workers.items():
        tag = re.escape(f"[celery worker {names[-1]}, pid ")
        started = rf"{re.escape(step)} - STEP_START - Started execution of step \"{re.escape(step)}\"\. {tag}"
        finished = rf"{re.escape(step)} - STEP_SUCCESS - Finished execution of step \"{re.escape(step)}\" in .*{tag}"
        assert re.search(started, terminal), f"no start line of {step} naming {names[-1]}:\n{terminal[-3000:]}"
        assert re.search(finished, terminal), f"no end line of {step} naming {names[-1]}:\n{terminal[-3000:]}"

    contexts = pq.read_table(cluster.data_dir / "stages" / "demo" / "chunk_contexts.parquet")
    assert contexts.num_rows == chunk_count(cluster.data_dir) > 0
    assert len(stored_contexts(cluster.data_dir)) == contexts.num_rows  # every context came from the server

    # The same registry in process (this process: data under isolated_env), the same server.
    from pipelines.definitions import build_definitions
    from project.config import load_config

    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    job = build_definitions(load_config(cluster.registry)).resolve_job_def("build_conteb")
    assert job.executor_def.name == "celery"
    assert job.execute_in_process(instance=dg.DagsterInstance.ephemeral()).success
    for part in ("stages", "conteb"):
        celery_tables, local_tables = tables(cluster.data_dir / part), tables(isolated_env / part)
        assert celery_tables and set(celery_tables) == set(local_tables)
        for name, table in celery_tables.items():
            assert table.equals(local_tables[name]), f"{part}/{name} differs between the Celery and in-process runs"


def test_a_killed_worker_process_mid_llm_step_costs_no_stored_answer_twice(
    cluster: CeleryCluster, celery_build: dg.DagsterRun, llm_server: OpenAICompatibleServer
) -> None:
    # The LLM stage again from an empty cache (its inputs stay from the build): it asks for every context.
    shutil.rmtree(cluster.data_dir / "llm")
    for output in LLM_STAGE_ASSETS:
        (cluster.data_dir / "stages" / f"{output}.parquet").unlink()
    instance = cluster.instance()
    earlier = {run.run_id for run in instance.get_runs()}
    asked_before = len(llm_server.chat_requests())
    llm_server.latency_s = 0.25  # slow answers: the LLM step is mid-way for seconds
    try:
        run = cluster.launch("build_conteb", "build-killed", assets=list(LLM_STAGE_ASSETS))
        victim_step, victim_pid = None, None
        deadline = time.monotonic() + 150
        while victim_pid is None:
            assert run.poll() is None, "the run ended before its LLM step could be interrupted:\n" + cluster.log_text(
                "build-killed"
            )
            assert time.monotonic() < deadline, "the LLM step never got going:\n" + cluster.worker_logs()
            record = latest_run(instance, earlier)
            stored = len(stored_contexts(cluster.data_dir))
            # Mid-stage: some answers stored, not all (so the steps running are ones that ask, not a merge).
            if record is not None and 3 <= stored < chunk_count(cluster.data_dir):
                events = run_events(instance, record.run_id)
                done = finished_steps(events)
                running = [(k, p[-1]) for k, p in step_start_pids(events).items() if LLM_STAGE in k and k not in done]
                if running:
                    victim_step, victim_pid = running[0]
            time.sleep(0.1)
        group = process_group(victim_pid)
        assert group in cluster.worker_pids().values()  # a pool process of one of our workers
        os.kill(victim_pid, signal.SIGKILL)
        paid_before_kill = stored_contexts(cluster.data_dir)  # nothing more of the killed step can land
        llm_server.latency_s = 0.0
        assert run.wait(timeout=240) == 0, cluster.log_text("build-killed") + cluster.worker_logs()
    finally:
        llm_server.latency_s = 0.0

    record = latest_run(instance, earlier)
    assert record.status == dg.DagsterRunStatus.SUCCESS
    events = run_events(instance, record.run_id)
    handouts = celery_workers_by_step(events)[victim_step]
    starts = step_start_pids(events)[victim_step]
    assert len(handouts) == 2 and len(starts) == 2 and starts[0] == victim_pid != starts[1]  # re-delivered, re-run

    asked = context_requests(llm_server, since=asked_before)
    twice = {token: count for token, count in asked.items() if count > 1}
    assert len(paid_before_kill) >= 3
    for token, custom_id in paid_before_kill.items():
        assert asked[token] == 1, f"{custom_id}: stored before the kill, yet asked {asked[token]} times"
    # Only requests in flight when the process died (at most llm.max_concurrency) were asked again.
    assert len(twice) <= MAX_CONCURRENCY and all(count == 2 for count in twice.values()), twice
    chunks = chunk_count(cluster.data_dir)
    assert len(stored_contexts(cluster.data_dir)) == len(asked) == chunks
    assert pq.read_table(cluster.data_dir / "stages" / "demo" / "chunk_contexts.parquet").num_rows == chunks
    assert {name.split("@")[0] for names in celery_workers_by_step(events).values() for name in names} <= {
        "conteb-1",
        "conteb-2",
    }


def test_evaluate_sends_its_encode_shards_to_both_workers(
    cluster: CeleryCluster, celery_build: dg.DagsterRun, isolated_env: Path
) -> None:
    instance = cluster.instance()
    earlier = {run.run_id for run in instance.get_runs()}
    run = cluster.launch("evaluate_conteb", "evaluate")
    assert run.wait(timeout=300) == 0, cluster.log_text("evaluate") + cluster.worker_logs()
    record = latest_run(instance, earlier)
    assert record.job_name == "evaluate_conteb" and record.status == dg.DagsterRunStatus.SUCCESS

    workers = celery_workers_by_step(run_events(instance, record.run_id))
    encode_steps = sorted(key for key in workers if "__evaluation__encode[" in key)
    assert len(encode_steps) == 2, sorted(workers)  # the sample in shards of ENCODE_SHARD_DOCUMENTS
    assert {workers[key][0].split("@")[0] for key in encode_steps} == {"conteb-1", "conteb-2"}, workers

    evaluation = json.loads((cluster.data_dir / "reports" / "tasks" / "demo" / "evaluation.json").read_text())
    (independent,) = evaluation["runs"]
    assert independent["status"] == "ok" and independent["details"]["encode_shards"] == 2

    # The same data evaluated in this process, in one piece: the same number (vectors agree to float rounding).
    from evaluation.targets import evaluate_target, evaluation_targets
    from project.config import load_config

    config = load_config(cluster.registry)
    shutil.copytree(cluster.data_dir / "conteb", isolated_env / "conteb", dirs_exist_ok=True)
    shutil.copytree(cluster.data_dir / "stages", isolated_env / "stages", dirs_exist_ok=True)
    (target,) = evaluation_targets(config.tasks, config.evaluation, isolated_env)
    local = evaluate_target(target, config.evaluation, isolated_env, log=lambda _: None)
    assert local.runs[0].metrics["ndcg@10"].value == pytest.approx(independent["metrics"]["ndcg@10"]["value"], abs=1e-3)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_stops_the_run_and_its_step_on_the_worker(
    cluster: CeleryCluster, celery_build: dg.DagsterRun, llm_server: OpenAICompatibleServer, sig: signal.Signals
) -> None:
    """The run's process group signalled mid LLM step: the running task is revoked with SIGTERM to its pool process,
    the run ends within seconds as failed, the step asks the server nothing more, the workers stay up."""
    shutil.rmtree(cluster.data_dir / "llm")  # the LLM stage asks for every context again
    for output in LLM_STAGE_ASSETS:
        (cluster.data_dir / "stages" / f"{output}.parquet").unlink(missing_ok=True)
    instance = cluster.instance()
    earlier = {run.run_id for run in instance.get_runs()}
    workers_before = cluster.worker_pids()
    llm_server.latency_s = 0.25  # the step lasts: one context per chunk of the sample, 2 at a time
    try:
        stopped = run_then_signal(
            [sys.executable, "-c", EXECUTE_ASSETS, "build_conteb", *LLM_STAGE_ASSETS],
            env=cluster.env,
            cwd=ROOT,
            log=cluster.root / f"signalled-{sig.name}.log",
            ready=lambda: 3 <= len(stored_contexts(cluster.data_dir)) < chunk_count(cluster.data_dir),
            sig=sig,
            stop_within=30,
            ended_line="RUN_FAILURE",  # the run is over; the interpreter's teardown follows (signalled_run.py)
            exit_within=60,
        )
        asked_at_exit = len(llm_server.chat_requests())
        time.sleep(3)
        asked_later = len(llm_server.chat_requests())
    finally:
        llm_server.latency_s = 0.0
    print(f"celery: {sig.name} -> exit {stopped.returncode} after {stopped.seconds_to_stop:.1f} s")
    assert stopped.returncode != 0
    record = latest_run(instance, earlier)
    assert record.status == dg.DagsterRunStatus.FAILURE
    assert asked_later - asked_at_exit <= MAX_CONCURRENCY  # nothing but what was in flight: the step stopped
    assert cluster.worker_pids() == workers_before
    assert all(process_group(pid) == pid for pid in workers_before.values())  # every worker is still there
    events = run_events(instance, record.run_id)
    assert any("revoking" in (event.message or "") for event in events), [e.message for e in events][-10:]


def test_workers_refuse_steps_of_an_edited_registry(cluster: CeleryCluster, celery_build: dg.DagsterRun) -> None:
    """The registry edited after the workers started: the check and the run both say to restart the workers. A shell
    without the workers' $OPENAI_API_KEY: the check says to restart them from this shell."""
    edited = cluster.root / "edited.yaml"
    edited.write_text(cluster.registry_text.replace("backoff_initial_s: 0.01", "backoff_initial_s: 0.01, "
                                                    "temperature: 0.3"))  # fmt: skip
    assert "temperature: 0.3" in edited.read_text()
    env = {**cluster.env, "CONTEB_CONFIG": str(edited)}
    conteb = str(Path(sys.executable).parent / "conteb")
    same = subprocess.run([conteb, "workers", "check"], env=cluster.env, capture_output=True, text=True, timeout=60)
    assert same.returncode == 0, same.stderr
    keyless = {key: value for key, value in cluster.env.items() if key != "OPENAI_API_KEY"}  # another shell
    shell = subprocess.run([conteb, "workers", "check"], env=keyless, capture_output=True, text=True, timeout=60)
    assert shell.returncode == 1 and "LLM key source none, but this worker's LLM key source is $OPENAI_API_KEY" in (
        shell.stderr
    ), shell.stderr
    assert shell.stderr.strip().endswith("restart the workers from this shell: make workers-stop && make workers")
    check = subprocess.run([conteb, "workers", "check"], env=env, capture_output=True, text=True, timeout=60)
    assert check.returncode == 1 and check.stderr.strip().endswith("restart the workers: make workers-stop && "
                                                                   "make workers"), check.stderr  # fmt: skip

    instance = cluster.instance()
    earlier = {run.run_id for run in instance.get_runs()}
    command = [sys.executable, "-m", "dagster", "job", "execute", "-m", "pipelines.definitions", "-j", "build_conteb"]
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode != 0
    assert "the worker loaded registry" in run.stderr
    assert "restart the workers: make workers-stop && make workers" in run.stderr
    record = latest_run(instance, earlier)
    assert record.status == dg.DagsterRunStatus.FAILURE
    assert not step_start_pids(run_events(instance, record.run_id))  # no step ran with the old settings
