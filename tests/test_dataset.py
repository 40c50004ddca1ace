import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from conteb.published import config_shards
from conteb.schemas import CHUNKS, PAIRED_QUERIES
from curation.dataset import DatasetCard, conteb_documents, write_conteb_dataset
from tests.conftest import load_conteb


def sample_tables() -> tuple[pa.Table, pa.Table]:
    chunks = pa.Table.from_pylist(
        [
            {
                "chunk_id": "lyon_0",
                "doc_id": "lyon",
                "chunk_index": 0,
                "char_start": 0,
                "char_end": 15,
                "og_chunk": "Lyon is a city.",
                "title": "Lyon",
            },
            {
                "chunk_id": "lyon_1",
                "doc_id": "lyon",
                "chunk_index": 1,
                "char_start": 17,
                "char_end": 40,
                "og_chunk": "It has a metro (1978).",
                "title": "Lyon",
            },
        ],
        schema=CHUNKS,
    )
    queries = pa.Table.from_pylist(
        [
            {
                "query_id": "q1",
                "query": "When did Lyon's metro open?",
                "chunk_id": "lyon_1",
                "chunk_ids": ["lyon_1"],
                "answer": "1978",
                "answer_start": 33,
                "answer_end": 37,
                "doc_id": "lyon",
                "pairing": "span",
                "source": "s",
            }
        ],
        schema=PAIRED_QUERIES,
    )
    return conteb_documents(chunks), queries


def card(split: str) -> DatasetCard:
    return DatasetCard(
        task="demo",
        split=split,
        source="data/sample",
        source_kind="sample",
        license="cc0-1.0",
        description=None,
        counts={"chunks": 2, "queries": 1},
        settings={"chunk_size": 1000},
        quarantine={"pairing": {"span_text_mismatch": 3}},
    )


def test_folder_loads_with_datasets_offline(tmp_path: Path) -> None:
    documents, queries = sample_tables()
    written = write_conteb_dataset(tmp_path / "demo", documents, queries, card("test"))
    assert written["documents"].parent == tmp_path / "demo" / "documents"
    assert re.fullmatch(r"test-[0-9a-f]{16}\.parquet", written["documents"].name)  # named by its content
    loaded_docs = load_conteb(tmp_path / "demo", "documents", "test")
    loaded_queries = load_conteb(tmp_path / "demo", "queries", "test")
    assert loaded_docs["chunk_id"] == ["lyon_0", "lyon_1"]
    assert loaded_docs["chunk"] == loaded_docs["og_chunk"]
    assert loaded_queries[0]["chunk_ids"] == ["lyon_1"]


def test_card_front_matter_and_provenance(tmp_path: Path) -> None:
    documents, queries = sample_tables()
    write_conteb_dataset(tmp_path / "demo", documents, queries, card("test"))
    text = (tmp_path / "demo" / "README.md").read_text()
    front = yaml.safe_load(text.split("---")[1])
    assert front["license"] == "cc0-1.0"
    assert [c["config_name"] for c in front["configs"]] == ["documents", "queries"]
    assert "| pairing | 3 rows quarantined | `span_text_mismatch`: 3 |  |" in text
    assert "| chunk_size | `1000` |" in text


def test_rewriting_with_another_split_removes_stale_shards(tmp_path: Path) -> None:
    documents, queries = sample_tables()
    write_conteb_dataset(tmp_path / "demo", documents, queries, card("test"))
    write_conteb_dataset(tmp_path / "demo", documents, queries, card("validation"))
    documents_files = [p.name for p in (tmp_path / "demo" / "documents").iterdir()]
    assert len(documents_files) == 1 and documents_files[0].startswith("validation-")
    assert not list((tmp_path / "demo").rglob("*.tmp"))
    assert [pq.read_table(p).num_rows for p in config_shards(tmp_path / "demo", "queries", "validation")] == [1]


def two_document_tables() -> tuple[pa.Table, pa.Table]:
    documents, queries = sample_tables()
    other = documents.slice(0, 1).to_pylist()[0] | {"chunk_id": "rome_0", "doc_id": "rome", "title": "Rome"}
    return pa.concat_tables([documents, pa.Table.from_pylist([other], schema=documents.schema)]), queries


def test_splits_by_document_with_a_split_without_queries(tmp_path: Path) -> None:
    documents, queries = two_document_tables()
    split_card = card("test")
    split_card.splits = ("train", "test")
    written = write_conteb_dataset(
        tmp_path / "demo", documents, queries, split_card, assignment={"lyon": "train", "rome": "test"}
    )
    assert set(written) == {"documents/train", "documents/test", "queries/train", "card"}
    assert load_conteb(tmp_path / "demo", "documents", "test")["chunk_id"] == ["rome_0"]
    assert load_conteb(tmp_path / "demo", "queries", "train")["query_id"] == ["q1"]
    text = (tmp_path / "demo" / "README.md").read_text()
    front = yaml.safe_load(text.split("---")[1])
    queries_files = next(c["data_files"] for c in front["configs"] if c["config_name"] == "queries")
    assert queries_files == [{"split": "train", "path": str(written["queries/train"].relative_to(tmp_path / "demo"))}]
    assert "**Splits without rows** (not published for that config): `queries/test`" in text
    assert "| test | 1 | 1 | 0 |" in text  # documents, chunks, queries of the test split


def test_a_document_without_a_split_is_an_error_naming_the_row(tmp_path: Path) -> None:
    documents, queries = two_document_tables()
    split_card = card("test")
    split_card.splits = ("train", "test")
    with pytest.raises(ValueError, match=r"documents: row 2: document 'rome' has no split"):
        write_conteb_dataset(tmp_path / "demo", documents, queries, split_card, assignment={"lyon": "train"})
    with pytest.raises(ValueError, match=r"split\(s\) \['test'\] have no documents"):
        write_conteb_dataset(
            tmp_path / "demo", documents, queries, split_card, assignment={"lyon": "train", "rome": "train"}
        )
    assert not (tmp_path / "demo" / "README.md").exists()
