"""The Celery prompt test: a prompt edited after the workers started never reaches a run as its old version.

A loopback cluster (redis + one worker, ``scripts/workers.sh``) whose prompts are a copy the test controls
(``$CONTEB_PROMPTS_DIR``, in the environment of the workers and of the runs, as ``make workers`` and ``make run``
share one). A build asks the local OpenAI-compatible server one chunk context per chunk and tags the rows with the
prompt's version; then ``chunk_context.yaml`` is edited. Before the fix the next build ran on the worker with the
prompt it had cached: 0 requests, rows tagged with the old version. Now ``conteb workers check`` and the run are both
refused in one line naming the prompt file and saying to restart the workers, no step runs and nothing is asked.
(A restarted worker reads the edited file: ``load_prompt`` reads the file at every call, and an in-process rebuild
asks again with the edit: ``tests/test_step_fingerprint.py``. Not repeated here: the restart and a third build
would double this test's time on two cores.)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow.parquet as pq
import pytest

from llm.prompts import PROMPTS_DIR, load_prompt
from pipelines.celery_steps import RESTART_WORKERS
from tests.conftest import ROOT, SAMPLE_DIR
from tests.support.celery_cluster import REDIS_SERVER, CeleryCluster, free_port, run_events, step_start_pids
from tests.support.openai_server import OpenAICompatibleServer
from tests.support.prompt_edits import edit_prompt

pytestmark = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server not found: run scripts/install-redis.sh")

API_KEY = "sk-test-celery-prompts"
PROMPT = "chunk_context"


def context(body: dict[str, Any]) -> dict[str, Any]:
    assert body["response_format"]["json_schema"]["name"] == PROMPT
    return {"context": "A passage from the sample corpus."}


def build(cluster: CeleryCluster, name: str) -> subprocess.CompletedProcess[str]:
    """``dagster job execute -j build_conteb`` as a user runs it, in the cluster's environment."""
    command = [sys.executable, "-m", "dagster", "job", "execute", "-m", "pipelines.definitions", "-j", "build_conteb"]
    done = subprocess.run(command, cwd=ROOT, env=cluster.env, capture_output=True, text=True, timeout=240)
    (cluster.root / f"{name}.log").write_text(done.stdout + done.stderr)
    return done


def test_an_edited_prompt_is_refused_by_the_stale_worker(tmp_path: Path) -> None:
    prompts = shutil.copytree(PROMPTS_DIR, tmp_path / "prompts")
    port = free_port()
    with OpenAICompatibleServer(context) as server:
        registry = (
            f"llm: {{base_url: '{server.url}', backoff_initial_s: 0.01}}\n"
            f"execution:\n  executor: celery\n"
            f"  celery: {{broker: 'redis://127.0.0.1:{port}/0', backend: 'redis://127.0.0.1:{port}/1'}}\n"
            f"tasks:\n  - name: demo\n    source: {{kind: sample, path: '{SAMPLE_DIR}'}}\n"
            "    chunk_contexts: true\n    answerability: false\n"
        )
        env = {"OPENAI_API_KEY": API_KEY, "CONTEB_PROMPTS_DIR": str(prompts)}
        cluster = CeleryCluster(tmp_path / "cluster", registry, workers=1, extra_env=env)
        contexts = cluster.data_dir / "stages" / "demo" / "chunk_contexts.parquet"
        conteb = [str(Path(sys.executable).parent / "conteb"), "workers", "check"]
        cluster.start()
        try:
            first = build(cluster, "first")
            assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:] + cluster.worker_logs()
            old = load_prompt(PROMPT, prompts).tag
            asked = len(server.chat_requests())
            rows = pq.read_table(contexts)
            assert asked == rows.num_rows > 0 and set(rows.column("prompt_version").to_pylist()) == {old}

            edit_prompt(prompts, PROMPT)
            new = load_prompt(PROMPT, prompts).tag
            assert new != old
            edited_file = prompts.resolve() / f"{PROMPT}.yaml"

            # `conteb workers check` (what `make run` asks first) and a run started without it, side by side.
            check = subprocess.Popen(conteb, env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            instance = cluster.instance()
            earlier = {run.run_id for run in instance.get_runs()}
            refused = build(cluster, "refused")
            _, check_err = check.communicate(timeout=60)
            (line,) = check_err.strip().splitlines()
            assert check.returncode == 1 and f"prompt file {edited_file}" in line, check_err
            assert line.endswith(f"restart the workers: {RESTART_WORKERS}") and "loaded registry" not in line

            assert refused.returncode != 0
            lines = [line for line in refused.stderr.splitlines() if "refused by Celery worker conteb-1@" in line]
            assert lines, refused.stderr[-3000:]
            assert f"prompt file {edited_file}" in lines[0] and f"restart the workers: {RESTART_WORKERS}" in lines[0]
            (record,) = [run for run in instance.get_runs() if run.run_id not in earlier]
            assert record.status == dg.DagsterRunStatus.FAILURE
            assert not step_start_pids(run_events(instance, record.run_id))  # no step ran with the old prompt
            assert len(server.chat_requests()) == asked  # 0 requests: nothing ran, not an answer from the cache
            assert set(pq.read_table(contexts).column("prompt_version").to_pylist()) == {old}
        finally:
            cluster.stop()
