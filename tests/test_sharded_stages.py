"""The sharded LLM stages (assets/sharded.py) end to end: build_conteb against the local OpenAI-compatible server
with several shards gives the tables of one shard, byte for byte, with one step per shard; a shard step that fails
midway is retried, and a rerun asks the server only for the answers still missing."""

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from assets.answerability import check_gold_chunks
from assets.sharded import merge_llm_metadata
from conteb.config import ChunkingConfig
from conteb.schemas import PAIRED_QUERIES, table_from_rows
from curation.chunking import chunk_documents
from curation.dataset import conteb_documents
from curation.reformulation import OUTCOMES
from curation.shards import plan_shards
from curation.sources.sample import load_sample
from llm.cache import AnswerCache, UsageSummary
from pipelines.definitions import build_definitions
from project.config import load_config
from tests.builders import chunks_from_texts
from tests.conftest import SAMPLE_DIR, sample_counts
from tests.support.openai_server import OpenAICompatibleServer
from tests.test_llm_stages_e2e import scripted_llm, stopped_at_review_gate

API_KEY = "sk-test-sharded"
SHARDED = {  # the multi-asset of each LLM stage of task "full" (all LLM stages) or "plain" (answerability only)
    "full__llm_pairs": ("llm_paired_queries", "llm_pairing_quarantine"),
    "full__reformulation": ("themes", "reformulated_chunks", "reformulation_review_items", "reformulation_quarantine"),
    "full__synthetic_queries": ("synthetic_queries", "synthetic_quarantine"),
    "full__chunk_contexts": ("chunk_contexts", "context_quarantine"),
    "plain__answerability": ("answerability", "answerability_quarantine"),
}


def registry(folder: Path, base_url: str | None, shard_documents: int, tasks: str = "both") -> Path:
    """Task ``full`` (every LLM stage; stops at its review gate) and/or ``plain`` (span pairing, answerability;
    published), both on the sample."""
    folder.mkdir(parents=True, exist_ok=True)
    llm = f"llm: {{base_url: {base_url}, backoff_initial_s: 0.01, max_concurrency: 1}}\n" if base_url else ""
    full = (
        f"  - name: full\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n    pairing: both\n"
        "    reformulation: true\n    synthetic_queries: 2\n    chunk_contexts: true\n"
        # offline, the mask changes four sample chunks: accepted without a person, so the offline build completes
        + "    review: {auto_accept_methods: [mask]}\n"
        * (base_url is None)
    )
    plain = f"  - name: plain\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n"
    chosen = {"both": full + plain, "full": full, "plain": plain}[tasks]
    path = folder / "conteb.yaml"
    path.write_text(f"{llm}execution: {{shard_documents: {shard_documents}}}\ntasks:\n{chosen}")
    return path


def build(config: Path, data_dir: Path, monkeypatch) -> tuple[dg.ExecuteInProcessResult, dg.DagsterInstance]:
    monkeypatch.setenv("CONTEB_DATA_DIR", str(data_dir))
    instance = dg.DagsterInstance.ephemeral()
    job = build_definitions(load_config(config)).resolve_job_def("build_conteb")
    return job.execute_in_process(instance=instance, raise_on_error=False), instance


def steps(result: dg.ExecuteInProcessResult, event: str = "STEP_SUCCESS") -> list[str]:
    return [e.step_key for e in result.all_events if e.event_type_value == event]


def shard_steps(result: dg.ExecuteInProcessResult, name: str) -> list[str]:
    return sorted(key for key in steps(result) if key.startswith(f"{name}.{name}__shard["))


def files(data_dir: Path) -> dict[str, bytes]:
    """Every stage table and published file (not the answer store or the review store)."""
    found = {}
    for folder in ("stages", "conteb"):
        for path in sorted((data_dir / folder).rglob("*")):
            if path.is_file() and ".hf-cache" not in path.parts:
                found[str(path.relative_to(data_dir))] = path.read_bytes()
    return found


def llm_metadata(instance: dg.DagsterInstance, task: str, name: str) -> dict[str, Any]:
    event = instance.get_latest_materialization_event(dg.AssetKey([task, name]))
    return {k: v.value for k, v in event.asset_materialization.metadata.items() if k != "path"}


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    with OpenAICompatibleServer(scripted_llm) as running:
        yield running


def test_three_shards_give_the_tables_of_one_with_one_step_per_shard(tmp_path: Path, server, monkeypatch) -> None:
    one, _ = build(registry(tmp_path / "one", server.url, 100), tmp_path / "data-one", monkeypatch)
    asked_one = len(server.chat_requests())
    size = sample_counts().shard_size(3)
    three, instance = build(registry(tmp_path / "three", server.url, size), tmp_path / "data-three", monkeypatch)
    assert stopped_at_review_gate(one) and stopped_at_review_gate(three)  # "full" waits for review
    assert len(server.chat_requests()) == 2 * asked_one  # the same requests (separate answer stores)

    assert sample_counts().shard_count(size) == 3
    for name in SHARDED:  # the sample: one shard of 100 documents, three of `size`
        assert shard_steps(one, name) == [f"{name}.{name}__shard[s0000]"]
        assert shard_steps(three, name) == [f"{name}.{name}__shard[s000{i}]" for i in range(3)]
        assert {f"{name}.{name}__split", f"{name}.{name}__merge"} <= set(steps(three))

    written_one, written_three = files(tmp_path / "data-one"), files(tmp_path / "data-three")
    expected = {f"stages/{task}/{table}.parquet" for task in ("full", "plain") for table in ("chunks",)}
    expected |= {
        f"stages/{name.split('__')[0]}/{table}.parquet" for name, tables in SHARDED.items() for table in tables
    }
    assert expected <= set(written_one) and any(path.startswith("conteb/plain/queries/test-") for path in written_one)
    assert written_one.keys() == written_three.keys()
    assert [path for path in written_one if written_one[path] != written_three[path]] == []

    _, instance_one = build(registry(tmp_path / "one", server.url, 100), tmp_path / "data-one", monkeypatch)
    for name, tables in SHARDED.items():  # same metadata, LLM counts included (all answers cached now)
        task = name.split("__")[0]
        for table in tables:
            assert llm_metadata(instance_one, task, table).keys() == llm_metadata(instance, task, table).keys()
    sharded_meta = llm_metadata(instance, "full", "chunk_contexts")
    n_chunks, n_documents, n_queries = sample_counts().chunks, sample_counts().documents, sample_counts().queries
    assert sharded_meta["llm/requests"] == n_chunks == sharded_meta["llm/calls"] and sharded_meta["llm/cached"] == 0
    assert sharded_meta["llm/cost_usd"] > 0 and sharded_meta["llm/task_cost_usd"] >= sharded_meta["llm/cost_usd"]
    cached_meta = llm_metadata(instance_one, "full", "chunk_contexts")
    assert cached_meta["llm/cached"] == n_chunks and cached_meta["llm/calls"] == 0 and cached_meta["llm/cost_usd"] == 0
    reformulated = llm_metadata(instance, "full", "reformulated_chunks")
    assert reformulated["method"] == "llm" and reformulated["themes/llm/requests"] == n_documents
    assert sum(reformulated[f"count/{outcome}"] for outcome in OUTCOMES) == n_chunks
    assert reformulated["count/kept_first"] == n_documents and reformulated["count/failed"] == 0
    assert llm_metadata(instance, "full", "llm_paired_queries")["agreement/count"] == n_queries


def test_offline_shards_give_the_tables_of_one(tmp_path: Path, monkeypatch) -> None:
    one, _ = build(registry(tmp_path / "one", None, 100, "full"), tmp_path / "data-one", monkeypatch)
    four, instance = build(registry(tmp_path / "four", None, 4, "full"), tmp_path / "data-four", monkeypatch)
    assert one.success and four.success  # masks that change nothing are accepted as unchanged, the others by auto:mask
    written_one, written_four = files(tmp_path / "data-one"), files(tmp_path / "data-four")
    assert written_one.keys() == written_four.keys() and "conteb/full/README.md" in written_one
    assert [path for path in written_one if written_one[path] != written_four[path]] == []
    assert len(shard_steps(four, "full__reformulation")) == sample_counts().shard_count(4) > 1  # shard by shard
    assert shard_steps(four, "full__chunk_contexts") == ["full__chunk_contexts.full__chunk_contexts__shard[s0000]"]
    assert llm_metadata(instance, "full", "chunk_contexts")["llm/status"].startswith("not run")
    assert llm_metadata(instance, "full", "reformulated_chunks")["method"].startswith("mask: no LLM configured")


def saved(data_dir: Path) -> set[str]:
    with sqlite3.connect(data_dir / "llm" / "answers.sqlite") as db:
        return {row[0] for row in db.execute("SELECT custom_id FROM answers")}


def asked_contexts(server: OpenAICompatibleServer) -> list[str]:
    """The chunk of every chunk-context request the server received (from the passage in the prompt)."""
    found = []
    for request in server.chat_requests():
        body = json.loads(request.body)
        if body["response_format"]["json_schema"]["name"] == "chunk_context":
            found.append(re.search(r"<passage>\n(.*?)\n</passage>", body["messages"][-1]["content"], re.S).group(1))
    return found


def test_a_shard_failing_midway_is_retried_and_a_rerun_asks_only_for_the_missing_answers(
    tmp_path: Path, server, monkeypatch
) -> None:
    """The answer store breaks at the first chunk of shard s0001's third document, each time it is asked: the step
    fails three times (RetryPolicy: 2 retries), keeping the answers it got before; a rerun asks for the rest only."""
    size = sample_counts().shard_size(3)
    config = tmp_path / "conteb.yaml"
    config.write_text(
        f"llm: {{base_url: {server.url}, backoff_initial_s: 0.01, max_concurrency: 1}}\n"
        f"execution: {{shard_documents: {size}}}\n"
        f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n"
        "    chunk_contexts: true\n    answerability: false\n"
    )
    chunks = chunk_documents(load_sample(SAMPLE_DIR).documents_table(), ChunkingConfig()).chunks
    shards = plan_shards(chunks.column("doc_id").to_pylist(), size)
    assert len(shards) == 3 and len(shards[1]) >= 3
    doc_ids = chunks.column("doc_id").to_pylist()
    before_break = sum(doc in shards[0] or doc in shards[1][:2] for doc in doc_ids)
    breaking = f"context:{shards[1][2]}_0"
    real_put = AnswerCache.put

    def breaking_put(self, key, custom_id, *args, **kwargs):
        if custom_id == breaking:
            raise RuntimeError("simulated loss of the worker")
        return real_put(self, key, custom_id, *args, **kwargs)

    data_dir = tmp_path / "data-out"
    monkeypatch.setattr(AnswerCache, "put", breaking_put)
    failed, _ = build(config, data_dir, monkeypatch)
    monkeypatch.setattr(AnswerCache, "put", real_put)
    shard = "demo__chunk_contexts.demo__chunk_contexts__shard[s0001]"
    assert not failed.success
    assert steps(failed, "STEP_UP_FOR_RETRY").count(shard) == 2 and steps(failed, "STEP_FAILURE") == [shard]
    assert {f"demo__chunk_contexts.demo__chunk_contexts__shard[s000{i}]" for i in (0, 2)} <= set(steps(failed))
    kept = saved(data_dir)
    # s0000, s0002 and s0001 up to the break; each of the 3 attempts may have had one more answer in flight
    least = before_break + sum(doc in shards[2] for doc in doc_ids)
    assert least <= len(kept) <= least + 3 and breaking not in kept
    first_run = len(asked_contexts(server))
    assert first_run >= len(kept) + 3  # the breaking chunk was answered three times, never stored

    rerun, instance = build(config, data_dir, monkeypatch)
    assert rerun.success
    assert len(asked_contexts(server)) - first_run == chunks.num_rows - len(kept)  # only the missing answers
    assert len(saved(data_dir)) == chunks.num_rows
    meta = instance.get_latest_materialization_event(dg.AssetKey(["demo", "chunk_contexts"])).asset_materialization
    assert meta.metadata["dagster/row_count"].value == chunks.num_rows
    assert meta.metadata["llm/cached"].value == len(kept)


def test_merge_llm_metadata_sums_counts_and_reads_the_ledger_window() -> None:
    shards = [
        {"llm/status": "ran", "llm/model": "m", "llm/requests": 3, "llm/cached": 1, "llm/calls": 2,
         "llm/cost_usd": 0.5, "llm/cached_share": 0.25, "llm/task_cost_usd": 0.5},
        {"llm/status": "ran", "llm/model": "m", "llm/requests": 4, "llm/cached": 0, "llm/calls": 4,
         "llm/cost_usd": 0.75, "llm/cached_share": 0.0, "llm/task_cost_usd": 1.25},
    ]  # fmt: skip
    window = UsageSummary(calls=6, prompt_tokens=300, completion_tokens=60, cost_usd=1.25, cached_tokens=100)
    merged = merge_llm_metadata(shards, window, UsageSummary(9, 0, 0, 2.0))
    assert list(merged) == list(shards[0])
    assert merged == {
        "llm/status": "ran", "llm/model": "m", "llm/requests": 7, "llm/cached": 1, "llm/calls": 6,
        "llm/cost_usd": 1.25, "llm/cached_share": 0.3333, "llm/task_cost_usd": 2.0,
    }  # fmt: skip


def test_a_missing_gold_chunk_is_named_by_its_row_in_the_published_queries() -> None:
    rows = [
        {"query_id": qid, "query": "q", "chunk_id": cid, "chunk_ids": [cid], "doc_id": "lyon", "pairing": "span",
         "source": "f"}
        for qid, cid in (("a", "lyon_0"), ("b", "lyon_1"), ("c", "lyon_7"))
    ]  # fmt: skip
    documents = conteb_documents(chunks_from_texts("lyon", ["Lyon is a city.", "Its metro opened in 1978."]))
    check_gold_chunks(table_from_rows(rows[:2], PAIRED_QUERIES), documents)
    with pytest.raises(ValueError, match=r"row 2: query 'c': gold chunk_id 'lyon_7' is not in the documents"):
        check_gold_chunks(table_from_rows(rows, PAIRED_QUERIES), documents)
    check_gold_chunks(PAIRED_QUERIES.empty_table(), documents)  # no queries: nothing missing
