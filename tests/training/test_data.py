"""Training samples, splits, batches and stats from a ConTEB folder built from data/sample."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conteb.config import ChunkingConfig
from conteb.published import config_splits
from conteb.schemas import CONTEB_DOCUMENTS, PAIRED_QUERIES
from curation.chunking import chunk_documents
from curation.dataset import DatasetCard, conteb_documents, write_conteb_dataset
from curation.pairing import pair_by_span
from curation.sources.sample import load_sample
from curation.splits import assign_splits
from tests.conftest import SAMPLE_DIR, published_table, sample_counts
from training.data import (
    DataStats,
    count_tokens,
    documents_seen,
    load_samples,
    make_batches,
    split_by_document,
    step_batches,
    steps_per_epoch,
    validation_groups,
)

SYNTHETIC = [
    ("What is built in the yards of Arlenmouth?", "arlenmouth", 1),
    ("Where is Corvessa?", "corvessa", 0),
]
N_DOCUMENTS = sample_counts().documents


def batch_sizes(n: int, k: int) -> list[int]:
    """Sizes of ``n`` documents in batches of ``k``: the last holds the rest; a rest of one joins the batch before."""
    full, rest = divmod(n, k)
    sizes = [k] * full + ([rest] if rest else [])
    return [*sizes[:-2], k + 1] if rest == 1 and full else sizes


def build_sample_conteb(
    out: Path, chunk_size: int = 1000, synthetic: bool = True, splits: dict[str, float] | None = None
) -> Path:
    """The bundled sample corpus curated into a ConTEB folder (span pairing), plus synthetic queries;
    with ``splits``, split by document (seed 0) into one shard per split."""
    source = load_sample(SAMPLE_DIR)
    documents = source.documents_table()
    chunks = chunk_documents(documents, ChunkingConfig(chunk_size=chunk_size)).chunks
    queries = pair_by_span(source.queries_table(), documents, chunks).table()
    synthetic_table = None
    if synthetic:
        rows = [
            {
                "query_id": f"syn-{i}",
                "query": text,
                "chunk_id": f"{doc}_{index}",
                "chunk_ids": [f"{doc}_{index}"],
                "doc_id": doc,
                "pairing": "llm",
                "source": "test",
                "model": "test-model",
                "prompt_version": "synthetic@v1:0",
            }
            for i, (text, doc, index) in enumerate(SYNTHETIC)
        ]
        synthetic_table = pa.Table.from_pylist(rows, schema=PAIRED_QUERIES)
    card = DatasetCard(
        task="sample",
        split="test",
        splits=tuple(splits or ()),
        source=str(SAMPLE_DIR),
        source_kind="sample",
        license="cc0-1.0",
        description=None,
        counts={"chunks": chunks.num_rows, "queries": queries.num_rows},
        settings={"chunk_size": chunk_size},
    )
    assignment = assign_splits(chunks.column("doc_id").to_pylist(), splits, 0) if splits else None
    write_conteb_dataset(
        out, conteb_documents(chunks), queries, card, synthetic_queries=synthetic_table, assignment=assignment
    )
    return out


def test_samples_follow_chunk_order_and_gold(tmp_path: Path) -> None:
    folder = build_sample_conteb(tmp_path / "sample")
    samples, stats = load_samples([folder])
    documents = pq.read_table(folder / "documents").to_pylist()
    queries = pq.read_table(folder / "queries").to_pylist()
    text = {row["chunk_id"]: row["chunk"] for row in documents}
    assert [s.doc_id for s in samples] == sorted({row["doc_id"] for row in documents})
    for sample in samples:
        expected = sorted((r for r in documents if r["doc_id"] == sample.doc_id), key=lambda r: r["chunk_index"])
        assert sample.chunks == [r["chunk"] for r in expected]
        assert len(sample.queries) == len(sample.gold)
    by_doc = {s.doc_id: s for s in samples}
    for row in queries:
        sample = by_doc[row["doc_id"]]
        position = sample.queries.index(row["query"])
        assert sample.chunks[sample.gold[position]] == text[row["chunk_id"]]
    assert stats.documents == len(samples) == N_DOCUMENTS
    assert stats.chunks == len(documents)
    assert stats.queries == len(queries) + len(SYNTHETIC)
    assert stats.synthetic_queries == len(SYNTHETIC)
    assert stats.documents_without_queries == sum(not s.queries for s in samples)
    first = by_doc["arlenmouth"]
    assert first.gold[first.queries.index(SYNTHETIC[0][0])] == 1
    titles = {row["doc_id"]: row["title"] for row in documents}
    assert {s.doc_id: s.title for s in samples} == titles and first.title == "Arlenmouth"
    assert {s.split for s in samples} == {None} and {s.folder for s in samples} == {str(folder)}


def test_synthetic_queries_can_be_left_out(tmp_path: Path) -> None:
    folder = build_sample_conteb(tmp_path / "sample")
    samples, stats = load_samples([folder], include_synthetic=False)
    assert stats.synthetic_queries == 0
    assert not any(SYNTHETIC[0][0] in s.queries for s in samples)


def test_shuffled_chunk_rows_and_filtered_queries(tmp_path: Path) -> None:
    folder = tmp_path / "task"
    rows = [
        {
            "chunk_id": f"d{d}_{i}",
            "chunk": f"doc {d} chunk {i}",
            "og_chunk": "x",
            "doc_id": f"d{d}",
            "chunk_index": i,
            "char_start": 0,
            "char_end": 1,
            "title": None,
        }
        for d in range(3)
        for i in range(3)
    ][::-1]  # reverse: the reader must sort by chunk_index
    (folder / "documents").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=CONTEB_DOCUMENTS), folder / "documents" / "test.parquet")
    base = {"pairing": "span", "source": "t"}
    queries = [
        {"query_id": "a", "query": "q a", "chunk_id": "d0_2", "chunk_ids": ["d0_2"], "doc_id": "d0", **base},
        {"query_id": "b", "query": "q b", "chunk_id": "d0_9", "chunk_ids": ["d0_9"], "doc_id": "d0", **base},
        {"query_id": "c", "query": "q c", "chunk_id": "x9_0", "chunk_ids": ["x9_0"], "doc_id": "x9", **base},
        {"query_id": "d", "query": " ", "chunk_id": "d1_0", "chunk_ids": ["d1_0"], "doc_id": "d1", **base},
        {"query_id": "e", "query": "q a", "chunk_id": "d0_2", "chunk_ids": ["d0_2"], "doc_id": "d0", **base},
        {"query_id": "f", "query": "q f", "chunk_id": "d1_1", "chunk_ids": ["d1_1"], "doc_id": "d1", **base},
    ]
    (folder / "queries").mkdir()
    pq.write_table(pa.Table.from_pylist(queries, schema=PAIRED_QUERIES), folder / "queries" / "test.parquet")
    samples, stats = load_samples([folder])
    assert samples[0].chunks == ["doc 0 chunk 0", "doc 0 chunk 1", "doc 0 chunk 2"]
    assert (samples[0].queries, samples[0].gold) == (["q a"], [2])
    assert (samples[1].queries, samples[1].gold) == (["q f"], [1])
    assert stats.filtered == {
        "queries:unknown_chunk": 1,
        "queries:unknown_document": 1,
        "queries:empty_query": 1,
        "queries:duplicate_query": 1,
    }
    assert stats.documents_without_queries == 1  # d2: kept as an in-batch negative
    assert stats.documents == 3


def test_two_folders_qualify_clashing_doc_ids(tmp_path: Path) -> None:
    first = build_sample_conteb(tmp_path / "a", synthetic=False)
    second = build_sample_conteb(tmp_path / "b", chunk_size=600, synthetic=False)
    samples, stats = load_samples([first, second])
    assert len({s.doc_id for s in samples}) == 2 * N_DOCUMENTS
    assert "b/arlenmouth" in {s.doc_id for s in samples}
    qualified = next(s for s in samples if s.doc_id == "b/arlenmouth")
    assert (qualified.source_doc_id, qualified.task) == ("arlenmouth", "b")
    original = next(s for s in samples if s.doc_id == "arlenmouth")
    assert original.chunk_ids == [f"arlenmouth_{i}" for i in range(len(original.chunks))]
    assert qualified.chunk_ids == [f"b/arlenmouth_{i}" for i in range(len(qualified.chunks))]  # unique ids
    assert stats.tasks == ["a", "b"]


def test_validation_split_by_document_is_seeded(tmp_path: Path) -> None:
    samples, _ = load_samples([build_sample_conteb(tmp_path / "sample")])
    train, validation = split_by_document(samples, 0.2, seed=3)
    again = split_by_document(samples, 0.2, seed=3)
    assert [s.doc_id for s in validation] == [s.doc_id for s in again[1]]
    assert len(validation) == round(0.2 * N_DOCUMENTS) and all(s.queries for s in validation)  # every one has some
    assert {s.doc_id for s in train}.isdisjoint({s.doc_id for s in validation})
    assert len(train) + len(validation) == len(samples)
    others = {tuple(s.doc_id for s in split_by_document(samples, 0.2, seed=seed)[1]) for seed in range(10)}
    assert len(others) > 1
    assert split_by_document(samples, 0.0, seed=0)[1] == []
    assert len(split_by_document(samples, 0.01, seed=0)[1]) == 1  # at least one when asked for any


def test_batches_are_k_documents_seeded_per_epoch(tmp_path: Path) -> None:
    samples, _ = load_samples([build_sample_conteb(tmp_path / "sample")])
    batches = make_batches(samples, 5, seed=0, epoch=0)
    assert [len(b) for b in batches] == batch_sizes(N_DOCUMENTS, 5)
    assert sorted(i for b in batches for i in b) == list(range(N_DOCUMENTS))
    assert make_batches(samples, 5, seed=0, epoch=0) == batches
    assert make_batches(samples, 5, seed=0, epoch=1) != batches
    lone = N_DOCUMENTS - 1  # N - 1 documents a batch leave one alone: it joins the previous batch
    assert [len(b) for b in make_batches(samples, lone, seed=0, epoch=0)] == [N_DOCUMENTS]
    groups = validation_groups(samples, 5)
    full, rest = divmod(N_DOCUMENTS, 5)
    assert [len(g) for g in groups] == [5] * full + ([rest] if rest else [])  # groups keep a lone document


def test_a_step_reads_the_next_batches_of_the_epoch_dealt_round_robin() -> None:
    """Every batch is read once an epoch, whatever the number of ranks; the last step reads what is left."""
    batches = [[i] for i in range(7)]
    one_step = [step_batches(batches, 3, rank, 2, 1) for rank in range(2)]  # 2 ranks, 1 batch each: 4 steps
    assert steps_per_epoch(7, 2, 1) == 4 and one_step == [([[6]], 1), ([], 1)]  # rank 1 has none left
    two = [[step_batches(batches, step, rank, 2, 2) for rank in range(2)] for step in range(2)]
    assert two == [[([[0], [2]], 4), ([[1], [3]], 4)], [([[4], [6]], 3), ([[5]], 3)]]
    for world_size, accumulation in [(1, 1), (1, 3), (2, 1), (2, 3), (3, 2), (4, 1), (8, 1)]:
        steps = steps_per_epoch(len(batches), world_size, accumulation)
        read = [
            batch
            for step in range(steps)
            for rank in range(world_size)
            for batch in step_batches(batches, step, rank, world_size, accumulation)[0]
        ]
        assert sorted(read) == batches, (world_size, accumulation)
        sizes = {step_batches(batches, steps - 1, 0, world_size, accumulation)[1]}
        assert sizes == {len(batches) - (steps - 1) * world_size * accumulation}
    assert steps_per_epoch(0, 2, 1) == 1


def test_token_counts_flag_windowed_documents(tmp_path: Path) -> None:
    samples, stats = load_samples([build_sample_conteb(tmp_path / "sample")])

    def tokenize(texts: list[str]) -> list[list[int]]:
        return [text.split() for text in texts]

    count_tokens(samples, tokenize, 300, stats)
    lengths = {s.doc_id: s.n_tokens for s in samples}
    assert (
        lengths["arlenmouth"]
        == sum(len(c.split()) for c in samples[[s.doc_id for s in samples].index("arlenmouth")].chunks)
        + len(samples[[s.doc_id for s in samples].index("arlenmouth")].chunks)
        + 1
    )
    assert stats.windowed_documents == sum(n > 300 for n in lengths.values()) > 0
    assert stats.max_document_tokens == max(lengths.values())
    fresh = DataStats()
    count_tokens(samples, tokenize, None, fresh)
    assert fresh.windowed_documents == 0


def test_training_reads_only_the_train_split(tmp_path: Path) -> None:
    folder = build_sample_conteb(tmp_path / "sample", splits={"train": 0.5, "test": 0.5})
    assert config_splits(folder) == ("test", "train")
    split_docs = {
        split: set(published_table(folder, "documents", split).column("doc_id").to_pylist())
        for split in ("train", "test")
    }
    assert split_docs["train"] and split_docs["test"] and split_docs["train"].isdisjoint(split_docs["test"])
    samples, stats = load_samples([folder], split="train")
    assert {s.doc_id for s in samples} == split_docs["train"]
    assert {s.split for s in samples} == {"train"} and stats.splits == {str(folder): "train"} and not stats.warnings
    train_queries = published_table(folder, "queries", "train").num_rows
    synthetic_in_train = sum(doc in split_docs["train"] for _, doc, _ in SYNTHETIC)
    assert stats.queries == train_queries + synthetic_in_train and not stats.filtered
    test_samples, _ = load_samples([folder], split="test")
    assert {s.doc_id for s in test_samples} == split_docs["test"]
    assert len(load_samples([folder], split=None)[0]) == N_DOCUMENTS  # every shard
    [seen] = documents_seen(samples)
    assert {key: seen[key] for key in ("folder", "task", "split", "doc_ids")} == {
        "folder": str(folder),
        "task": "sample",
        "split": "train",
        "doc_ids": sorted(split_docs["train"]),
    }


def test_a_folder_without_the_split(tmp_path: Path) -> None:
    single = build_sample_conteb(tmp_path / "single")  # only "test"
    with pytest.warns(UserWarning, match=r"no split 'train'; reading its only split 'test'"):
        samples, stats = load_samples([single], split="train")
    assert len(samples) == N_DOCUMENTS and stats.splits == {str(single): "test"}
    assert stats.warnings and "single" in stats.warnings[0]
    several = build_sample_conteb(tmp_path / "several", splits={"dev": 0.5, "test": 0.5})
    with pytest.raises(ValueError, match=r"several: no split 'train' to train on; splits found: \['dev', 'test'\]"):
        load_samples([several], split="train")
