"""evaluation.targets: a registry task's stage tables are found where conteb.storage puts them."""

from __future__ import annotations

from pathlib import Path

from conteb.names import StageTable
from conteb.schemas import SOURCE_DOCUMENTS, SOURCE_QUERIES, table_from_rows
from conteb.storage import stage_table_path, write_parquet_atomic
from evaluation.targets import EvalTarget


def test_sources_are_read_from_the_stage_tables(tmp_path: Path) -> None:
    target = EvalTarget(name="demo", path=str(tmp_path / "conteb" / "demo"), split="test", data_dir=tmp_path)
    sources, why = target.sources()
    documents = stage_table_path(tmp_path, "demo", StageTable.SOURCE_DOCUMENTS)
    assert sources is None and why == f"{documents} missing: materialize the task's source assets first"
    doc = {"doc_id": "d1", "title": None, "text": "Some text.", "source": "s", "license": None, "metadata": "{}"}
    query = {"query_id": "q1", "doc_id": "d1", "query": "q?", "answers": [], "source": "s", "source_row": "0"}
    write_parquet_atomic(table_from_rows([doc], SOURCE_DOCUMENTS), documents)
    write_parquet_atomic(
        table_from_rows([query], SOURCE_QUERIES), stage_table_path(tmp_path, "demo", StageTable.SOURCE_QUERIES)
    )
    sources, why = target.sources()
    assert why is None and sources.documents.column("doc_id").to_pylist() == ["d1"]
    assert sources.queries.column("query_id").to_pylist() == ["q1"]
    unannotated = EvalTarget("demo", target.path, "test", data_dir=tmp_path, span_annotated=False)
    assert unannotated.sources()[0] is None
    assert EvalTarget("demo", target.path, "test").llm_usage() is None  # external: no ledger consulted
