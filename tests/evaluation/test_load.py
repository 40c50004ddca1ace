"""Loading ConTEB folders for evaluation: ordering, derived ids, and errors naming file and row."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conteb.config import ConfigError
from evaluation.load import CorpusError, load_config_table, load_corpus
from project.config import load_config
from tests.conftest import SAMPLE_DIR


def write_task(folder: Path, documents: list[dict], queries: list[dict], split: str = "test") -> Path:
    for config, rows in (("documents", documents), ("queries", queries)):
        (folder / config).mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), folder / config / f"{split}-00000-of-00001.parquet")
    return folder


DOCS = [
    {"chunk_id": "b_1", "chunk": "second of b"},
    {"chunk_id": "a_0", "chunk": "first of a"},
    {"chunk_id": "b_0", "chunk": "first of b"},
]
QUERIES = [{"query": "which is first of b?", "chunk_id": "b_0"}, {"query": "and a?", "chunk_id": "a_0"}]


def test_order_and_ids_are_derived_when_the_public_layout_has_only_chunk_ids(tmp_path: Path) -> None:
    corpus = load_corpus(write_task(tmp_path / "t", DOCS, QUERIES), name="t")
    assert corpus.chunk_ids == ["b_0", "b_1", "a_0"]  # documents by first appearance, chunks by index
    assert corpus.doc_ids == ["b", "b", "a"]
    assert corpus.chunk_index.tolist() == [0, 1, 0]
    assert corpus.query_ids == ["q0", "q1"]
    assert corpus.gold.tolist() == [0, 2]
    assert corpus.documents() == [["first of b", "second of b"], ["first of a"]]
    assert corpus.chunk_doc_index().tolist() == [0, 0, 1]


def test_datasets_route_reads_the_same_folder(tmp_path: Path) -> None:
    folder = write_task(tmp_path / "t", DOCS, QUERIES)
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: documents\n  data_files:\n  - split: test\n    path: documents/test-*.parquet\n"
        "- config_name: queries\n  data_files:\n  - split: test\n    path: queries/test-*.parquet\n---\n"
    )
    table, label = load_config_table(str(folder), "documents", "test")
    assert table.num_rows == 3 and label.endswith(".parquet")
    with pytest.raises(CorpusError, match="cannot load config 'documents' split 'dev'"):
        load_config_table(str(folder), "documents", "dev")


def test_hub_layout_is_read_directly(tmp_path: Path) -> None:
    """``data/<config>/`` with the hub's suffixed shard names; ids with ``_`` in the document part."""
    folder = tmp_path / "hub"
    docs = [{"chunk_id": "Doc_A_1", "chunk": "second"}, {"chunk_id": "Doc_A_0", "chunk": "first"}]
    for config, rows in (("documents", docs), ("queries", [{"query": "first?", "chunk_id": "Doc_A_0"}])):
        (folder / "data" / config).mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows), folder / "data" / config / "test-00000-of-00001-0a1b2c.parquet")
    corpus = load_corpus(folder, name="hub")
    assert corpus.chunk_ids == ["Doc_A_0", "Doc_A_1"] and corpus.doc_ids == ["Doc_A", "Doc_A"]
    table, label = load_config_table(str(folder), "queries", "test")
    assert table.num_rows == 1 and label == str(folder / "data" / "queries" / "test-00000-of-00001-0a1b2c.parquet")


@pytest.mark.parametrize(
    ("documents", "queries", "message"),
    [
        (
            [*DOCS, {"chunk_id": "a_0", "chunk": "again"}],
            QUERIES,
            r"documents/test-00000-of-00001.parquet: row 3: duplicate chunk_id 'a_0' \(first at row 1\)",
        ),
        (
            DOCS,
            [*QUERIES, {"query": "lost?", "chunk_id": "c_0"}],
            r"queries/test-00000-of-00001.parquet: row 2: query 'q2': gold chunk_id 'c_0' is not in documents",
        ),
        (DOCS, [{"query": "  ", "chunk_id": "a_0"}], r"row 0: query 'q0' is empty"),
        (
            [{"chunk_id": "no-index", "chunk": "x"}],
            QUERIES,
            r"row 0: chunk_id 'no-index' is not '<doc_id>_<chunk_index>'",
        ),
        ([{"chunk_id": "a 0", "chunk": "x"}], QUERIES, r"row 0: chunk_id 'a 0' contains whitespace"),
        ([{"id": "a_0", "chunk": "x"}], QUERIES, r"missing column\(s\) \['chunk_id'\]"),
    ],
)
def test_bad_rows_name_file_row_and_reason(tmp_path: Path, documents, queries, message: str) -> None:
    with pytest.raises(CorpusError, match=message):
        load_corpus(write_task(tmp_path / "t", documents, queries), name="t")


def test_evaluation_block_is_validated(tmp_path: Path) -> None:
    base = f"tasks:\n  - name: s\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n"
    path = tmp_path / "conteb.yaml"
    path.write_text(base + "evaluation:\n  tasks: [nope]\n")
    with pytest.raises(ConfigError, match=r"evaluation.tasks: unknown task\(s\) \['nope'\]"):
        load_config(path)
    path.write_text(base + "evaluation:\n  systems:\n    - {name: x, kind: dense, model: m, trained: insent_model}\n")
    with pytest.raises(ConfigError, match="not both"):
        load_config(path)
    bm25 = "    - {name: b, kind: bm25}\n    - {name: t, kind: bm25, context: title}\n"
    fused = "    - {name: f, kind: fusion, systems: [b, t], weights: [0.5, 0.5], fit: validation}\n"
    path.write_text(base + "evaluation:\n  systems:\n" + bm25 + fused)
    with pytest.raises(ConfigError, match=r"evaluation.systems\[2\]: set either weights \(fixed\) or fit: validation"):
        load_config(path)
    path.write_text(base + "evaluation:\n  chunk_sizes: {systems: [bm25, ghost]}\n")
    with pytest.raises(ConfigError, match=r"unknown system\(s\) \['ghost'\]"):
        load_config(path)
    path.write_text(base + "evaluation:\n  external: [{name: s, path: /tmp}]\n")
    with pytest.raises(ConfigError, match="already used by tasks"):
        load_config(path)
    path.write_text(base + "evaluation:\n  external: [{name: ext, path: ./missing-folder}]\n")
    with pytest.raises(ConfigError, match=r"evaluation.external\[0\] \(ext\): path: no such folder"):
        load_config(path)
