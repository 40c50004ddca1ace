"""The answerability LLM stage: request building and answer validation (pure), and end to end with
the local OpenAI-compatible server (judgements reach the published queries; offline: not run)."""

import re
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conteb.schemas import PAIRED_QUERIES, table_from_rows
from curation.answerability import (
    ANSWERABLE_SCHEMA,
    answerability_table,
    build_answerability_requests,
    custom_id,
    validate_answerable,
)
from curation.dataset import conteb_documents
from llm.types import LLMResult
from pipelines.definitions import build_definitions
from project.config import load_config
from tests.builders import chunks_from_texts
from tests.conftest import SAMPLE_DIR, load_conteb
from tests.support.openai_server import OpenAICompatibleServer

API_KEY = "sk-test-answerability"


def queries(*specs: tuple[str, str, int]) -> pa.Table:
    rows = [
        {"query_id": qid, "query": text, "chunk_id": f"lyon_{c}", "chunk_ids": [f"lyon_{c}"], "doc_id": "lyon",
         "pairing": "span", "source": "f"}
        for qid, text, c in specs
    ]  # fmt: skip
    return table_from_rows(rows, PAIRED_QUERIES)


DOCS = conteb_documents(chunks_from_texts("lyon", ["Lyon is a city.", "The metro opened in 1978."], title="Lyon"))


def test_requests_show_the_query_and_the_gold_chunk_as_embedded_only() -> None:
    [request] = build_answerability_requests(queries(("q1", "When did the Lyon metro open?", 1)), DOCS)
    assert request.custom_id == "answerable:q1" and request.schema == ANSWERABLE_SCHEMA
    assert request.schema["additionalProperties"] is False and request.schema["required"] == ["answerable", "reason"]
    user = request.messages[-1]["content"]
    assert "When did the Lyon metro open?" in user and "The metro opened in 1978." in user
    assert "Lyon is a city." not in user  # no other chunk, no title
    assert request.prompt_tag.startswith("answerable_alone@v1:")
    with pytest.raises(ValueError, match=r"row 0: query 'q2': gold chunk_id 'lyon_7'"):
        build_answerability_requests(queries(("q2", "x", 7)), DOCS)


def test_validation_and_table_keep_failures_out() -> None:
    assert validate_answerable({"answerable": False, "reason": "The passage does not name the city."}) is None
    assert "true or false" in validate_answerable({"answerable": "no", "reason": "r"})
    assert "non-empty" in validate_answerable({"answerable": True, "reason": "  "})
    assert "at most" in validate_answerable({"answerable": True, "reason": "x" * 401})
    table_in = queries(("a", "qa", 0), ("b", "qb", 1), ("c", "qc", 1), ("d", "qd", 1))
    results = {
        custom_id("a"): LLMResult("answerable:a", value={"answerable": True, "reason": " ok "}, model="m1"),
        custom_id("b"): LLMResult("answerable:b", value={"answerable": False, "reason": "no name"}),
        custom_id("c"): LLMResult("answerable:c", error="HTTP 500"),
        # "d": no result at all
    }
    table, failures = answerability_table(table_in, results, "gpt-4o")
    assert table.to_pylist()[0] | {"prompt_version": None} == {
        "query_id": "a", "chunk_id": "lyon_0", "answerable_alone": True, "reason": "ok", "method": "llm",
        "model": "m1", "prompt_version": None,
    }  # fmt: skip
    assert table.column("model").to_pylist() == ["m1", "gpt-4o"]
    assert [(f.object_id, f.stage, f.row) for f in failures] == [
        ("c", "answerability", "answerable:c"), ("d", "answerability", "answerable:d")
    ]  # fmt: skip
    assert "HTTP 500" in failures[0].detail and "no result" in failures[1].detail


def judge(body: dict[str, Any]) -> dict[str, Any]:
    """Answerable exactly when the passage holds the query's longest word (deterministic)."""
    assert body["response_format"]["json_schema"]["name"] == "answerable_alone"
    user = body["messages"][-1]["content"]
    query = re.search(r"Query: (.*)", user).group(1)
    passage = user.split("as it is indexed):\n", 1)[1]
    return {"answerable": expected(query, passage), "reason": "Judged by the test server."}


def expected(query: str, passage: str) -> bool:
    longest = max(re.findall(r"\w+", query), key=len)
    return longest.lower() in passage.lower()


def registry(tmp_path: Path, base_url: str | None) -> Path:
    path = tmp_path / "conteb.yaml"
    llm = f"llm:\n  base_url: {base_url}\n  backoff_initial_s: 0.01\n" if base_url else ""
    path.write_text(f"{llm}tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n")
    return path


def build(config: Path) -> tuple[dg.ExecuteInProcessResult, dg.DagsterInstance]:
    instance = dg.DagsterInstance.ephemeral()
    job = build_definitions(load_config(config)).resolve_job_def("build_conteb")
    return job.execute_in_process(instance=instance, raise_on_error=False), instance


def materialization(instance: dg.DagsterInstance, name: str) -> dict[str, Any]:
    event = instance.get_latest_materialization_event(dg.AssetKey(["demo", name]))
    return {k: v.value for k, v in event.asset_materialization.metadata.items()}


def test_judgements_label_the_published_queries(tmp_path: Path, isolated_env: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    with OpenAICompatibleServer(judge) as server:
        result, instance = build(registry(tmp_path, server.url))
        assert result.success
        asked = len(server.chat_requests())
    folder = isolated_env / "conteb" / "demo"
    published = load_conteb(folder, "queries").to_list()
    documents = {row["chunk_id"]: row["chunk"] for row in load_conteb(folder, "documents").to_list()}
    assert asked == len(published) > 0
    for row in published:
        assert row["answerable_alone"] == expected(row["query"], documents[row["chunk_id"]]), row
        assert row["needs_context"] == (row["theme_missing"] or row["answerable_alone"] is False)
    stage = pq.read_table(isolated_env / "stages" / "demo" / "answerability.parquet")
    assert stage.num_rows == len(published) and set(stage.column("model").to_pylist()) == {"gpt-4o"}
    meta = materialization(instance, "conteb_dataset")
    false = sum(row["answerable_alone"] is False for row in published)
    assert 0 < false < len(published)  # the scripted judge says both
    assert meta["count/answerable_alone_false"] == false and meta["count/unlabelled"] == 0
    assert meta["count/needs_context"] == sum(row["needs_context"] for row in published)
    card = (folder / "README.md").read_text()
    assert "## Context necessity" in card and f"| `answerable_alone` false | {false:,} |" in card
    assert materialization(instance, "answerability")["llm/status"] == "ran"


def test_offline_the_stage_is_not_run_and_labels_stay_null(tmp_path: Path, isolated_env: Path, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    result, instance = build(registry(tmp_path, None))
    assert result.success
    assert materialization(instance, "answerability")["llm/status"].startswith("not run")
    published = load_conteb(isolated_env / "conteb" / "demo", "queries")
    assert set(published["answerable_alone"]) == {None}
    assert published["needs_context"] == published["theme_missing"]
    meta = materialization(instance, "conteb_dataset")
    assert meta["count/unlabelled"] == published.num_rows and meta["count/answerable_alone_false"] == 0


def test_answerability_false_removes_the_stage(tmp_path: Path, isolated_env: Path) -> None:
    path = tmp_path / "conteb.yaml"
    path.write_text(
        f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n    answerability: false\n"
    )
    defs = build_definitions(load_config(path))
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert "demo/conteb_dataset" in keys and "demo/answerability" not in keys
