"""End-to-end: build_conteb with every LLM stage, against the local OpenAI-compatible server,
and offline (no key, no endpoint), where LLM-only stages report "not run" and reformulation masks."""

import json
import re
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow.parquet as pq
import pytest
import yaml

from pipelines.definitions import build_definitions
from pipelines.run_outcome import waiting_tables
from project.config import load_config
from tests.conftest import SAMPLE_DIR, load_conteb, sample_counts
from tests.support.openai_server import OpenAICompatibleServer

API_KEY = "sk-test-e2e-SECRET-key-42"


def scripted_llm(body: dict[str, Any]) -> dict[str, Any]:
    """Plausible answers for each stage's schema, derived from the prompt text."""
    stage = body["response_format"]["json_schema"]["name"]
    user = body["messages"][-1]["content"]
    if stage == "theme":
        title = re.search(r"Title: (.*)", user).group(1)
        return {"theme": title, "aliases": []}
    if stage == "reformulation":
        passage = user.split("Passage:\n", 1)[1]
        return {"rewritten": passage}
    if stage == "synthetic_queries":
        passage = user.split("Passage:\n", 1)[1]
        words = passage.split()
        return {"queries": [{"query": f"What does the text say about {words[3]}?", "answer": " ".join(words[:3])}]}
    if stage == "chunk_pairing":
        return {"chunk_indices": [0]}
    if stage == "chunk_context":
        return {"context": "A passage from the sample corpus."}
    if stage == "answerable_alone":
        return {"answerable": True, "reason": "The passage answers it."}
    raise AssertionError(f"unexpected stage {stage}")


# Offline, the mask changes the four sample chunks whose later paragraph names its entity; accepted without a person
# here (the review flow of the offline sample is tests/test_end_to_end.py's), so the offline build completes.
OFFLINE_MASK_ACCEPTED = "    review: {auto_accept_methods: [mask]}\n"


def registry(tmp_path: Path, base_url: str | None) -> Path:
    path = tmp_path / "conteb.yaml"
    llm = f"llm:\n  base_url: {base_url}\n  backoff_initial_s: 0.01\n" if base_url else ""
    path.write_text(
        f"{llm}tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n"
        "    pairing: both\n    reformulation: true\n    synthetic_queries: 1\n    chunk_contexts: true\n"
        + OFFLINE_MASK_ACCEPTED
        * (base_url is None)
    )
    return path


def build(
    config_path: Path, instance: dg.DagsterInstance | None = None
) -> tuple[dg.ExecuteInProcessResult, dg.DagsterInstance]:
    """Run build_conteb in process; with LLM output pending review the run stops at the review gate."""
    instance = instance or dg.DagsterInstance.ephemeral()
    job = build_definitions(load_config(config_path)).resolve_job_def("build_conteb")
    return job.execute_in_process(instance=instance, raise_on_error=False), instance


def stopped_at_review_gate(result: dg.ExecuteInProcessResult) -> bool:
    """The run stopped at the review gate and nothing else: it succeeded, no check failed, review queues with pending
    items held back reviewed tables (observed waiting, not materialized), and Dagster skipped what uses them."""
    events = result.all_events
    failed_checks = [e for e in result.get_asset_check_evaluations() if not e.passed]
    skipped = [e for e in events if e.event_type == dg.DagsterEventType.STEP_SKIPPED]
    return result.success and not failed_checks and bool(waiting_tables(events)) and bool(skipped)


def metadata(instance: dg.DagsterInstance, name: str) -> dict[str, Any]:
    event = instance.get_latest_materialization_event(dg.AssetKey(["demo", name]))
    return {k: v.value for k, v in event.asset_materialization.metadata.items()}


@pytest.fixture
def server():
    with OpenAICompatibleServer(scripted_llm) as running:
        yield running


def test_every_llm_stage_runs_is_cached_and_keeps_the_key_secret(
    tmp_path: Path, isolated_env: Path, server, monkeypatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    config = registry(tmp_path, server.url)
    result, instance = build(config)
    assert stopped_at_review_gate(result)  # LLM output waits for review (tests/test_review_gate.py)
    assert not (isolated_env / "conteb" / "demo").exists()
    asked = len(server.chat_requests())
    assert asked > 0
    assert server.chat_requests()[0].headers["authorization"] == f"Bearer {API_KEY}"

    synthetic = pq.read_table(isolated_env / "stages" / "demo" / "synthetic_queries.parquet")
    assert synthetic.num_rows > 0 and set(synthetic.column("model").to_pylist()) == {"gpt-4o"}
    assert all(v.startswith("synthetic_queries@v1:") for v in synthetic.column("prompt_version").to_pylist())

    pairs = metadata(instance, "llm_paired_queries")
    assert pairs["llm/status"] == "ran" and pairs["agreement/count"] == sample_counts().queries
    reformulated = pq.read_table(isolated_env / "stages" / "demo" / "reformulated_chunks.parquet")
    assert set(reformulated.column("method").to_pylist()) == {"llm", "unchanged"}
    reform_meta = metadata(instance, "reformulated_chunks")
    assert reform_meta["llm/cost_usd"] > 0 and reform_meta["llm/failed"] == 0
    items = pq.read_table(isolated_env / "stages" / "demo" / "reformulation_review_items.parquet")
    assert items.num_rows == reformulated.column("method").to_pylist().count("llm")
    contexts = pq.read_table(isolated_env / "stages" / "demo" / "chunk_contexts.parquet")
    assert contexts.num_rows == reformulated.num_rows

    # Rematerializing pays for nothing again.
    again, instance2 = build(config)
    assert stopped_at_review_gate(again)
    assert len(server.chat_requests()) == asked
    assert (
        metadata(instance2, "synthetic_queries")["llm/cached"]
        == metadata(instance2, "synthetic_queries")["llm/requests"]
    )

    # The key appears in no event, log line or file we wrote.
    events = instance.all_logs(result.run_id) + instance2.all_logs(again.run_id)
    assert API_KEY not in "\n".join(json.dumps(dg.serialize_value(e)) for e in events)
    for path in isolated_env.rglob("*"):
        if path.is_file():
            assert API_KEY.encode() not in path.read_bytes(), path


def test_offline_build_completes_and_says_what_did_not_run(tmp_path: Path, isolated_env: Path, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    result, instance = build(registry(tmp_path, None))
    assert result.success
    for name in ("synthetic_queries", "chunk_contexts", "llm_paired_queries"):
        status = metadata(instance, name)["llm/status"]
        assert status.startswith("not run") and "OPENAI_API_KEY" in status and "llm.base_url" in status
    reformulated = pq.read_table(isolated_env / "stages" / "demo" / "reformulated_chunks.parquet")
    assert set(reformulated.column("method").to_pylist()) == {"mask", "unchanged"}
    assert metadata(instance, "reformulated_chunks")["method"].startswith("mask: no LLM configured")
    folder = isolated_env / "conteb" / "demo"
    card = (folder / "README.md").read_text()
    # what the mask did, in words: it changed chunks that named the theme and left the others as they were
    assert "| first chunks left unchanged (each document's first chunk introduces its subject) |" in card
    assert "by masking (no theme mention to mask) |" in card or "| chunks masked (theme mentions replaced" in card
    assert load_conteb(folder, "queries", "test").num_rows == sample_counts().queries
    configs = yaml.safe_load(card.split("---")[1])["configs"]
    assert "synthetic_queries" not in [config["config_name"] for config in configs]  # no rows: not published
    assert "**Not published**" in card


def test_costs_command_reads_the_ledger(tmp_path: Path, isolated_env: Path, server, monkeypatch) -> None:
    from click.testing import CliRunner

    from cli.main import main

    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    config = registry(tmp_path, server.url)
    assert stopped_at_review_gate(build(config)[0])
    output = CliRunner().invoke(main, ["--config", str(config), "costs"]).output
    assert "demo/reformulation" in output and "demo/synthetic_queries" in output
    total = float(output.strip().splitlines()[-1].split()[-1])
    assert total > 0


def test_a_killed_stage_resumes_without_paying_twice(tmp_path: Path, isolated_env: Path, monkeypatch) -> None:
    """`dagster job execute` killed with SIGKILL mid-way through synthetic queries, then rerun."""
    import collections
    import os
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    from tests.conftest import ROOT

    n_chunks = sample_counts().chunks  # data/sample at 1000 characters: one synthetic-query request per chunk
    assert n_chunks > 15  # the kill below waits for 15 stored answers: it must land mid-stage

    def saved() -> set[str]:
        # read-only: a plain connect would create a 0-byte answers.sqlite before the build makes the store
        uri = (isolated_env / "llm" / "answers.sqlite").absolute().as_uri() + "?mode=ro"
        try:
            with sqlite3.connect(uri, uri=True, timeout=5) as db:
                return {row[0] for row in db.execute("SELECT custom_id FROM answers")}
        except sqlite3.OperationalError:  # not created yet
            return set()

    with OpenAICompatibleServer(scripted_llm, latency_s=0.1) as server:
        config = tmp_path / "conteb.yaml"
        config.write_text(
            f"llm: {{base_url: {server.url}, max_concurrency: 2}}\n"
            f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n    synthetic_queries: 1\n"
        )
        env = {**os.environ, "CONTEB_CONFIG": str(config), "OPENAI_API_KEY": API_KEY}
        command = [str(Path(sys.executable).parent / "dagster"), "job", "execute", "-m", "pipelines.definitions",
                   "-j", "build_conteb"]  # fmt: skip
        child = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while len(saved()) < 15 and time.monotonic() < deadline:
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        before_kill = saved()
        assert 15 <= len(before_kill) < n_chunks, "the kill should land mid-stage"

        rerun = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        # The run completes every stage, then stops at the review gate (the queries await review): not a failure.
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        assert "WAITING FOR REVIEW (not a failure): task 'demo'" in rerun.stderr, rerun.stderr[-3000:]
        assert len(saved()) == n_chunks  # one answer per chunk, nothing lost
        asked = collections.Counter(
            re.search(r"Passage:\n(.*)", json.loads(r.body)["messages"][-1]["content"], re.S).group(1)
            for r in server.chat_requests()
        )
        assert max(asked.values()) <= 2  # only requests in flight at the kill were sent twice
        assert sum(asked.values()) <= n_chunks + 2  # max_concurrency = 2
    synthetic = pq.read_table(isolated_env / "stages" / "demo" / "synthetic_queries.parquet")
    assert synthetic.num_rows > 0
