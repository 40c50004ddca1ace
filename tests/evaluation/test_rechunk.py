"""Chunk-size study inputs (``evaluation.rechunk``): re-chunking, span re-pairing, rebuilding sources."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from conteb.config import ChunkingConfig
from conteb.schemas import CONTEB_DOCUMENTS, SOURCE_DOCUMENTS, SOURCE_QUERIES
from curation.chunking import chunk_documents
from curation.pairing import pair_by_span
from curation.sources.sample import load_sample
from evaluation.indexed import NotRunnable
from evaluation.rechunk import rebuild_text, rechunk_corpus, sources_from_dataset
from tests.conftest import SAMPLE_DIR

SIZES = (8000, 1000, 500, 300, 200, 100)

PARAGRAPHS = [
    "Marie Curie was born in Warsaw in 1867. She moved to Paris to study physics and mathematics at the Sorbonne.",
    "In 1903 she shared the Nobel Prize in Physics with Pierre Curie and Henri Becquerel for work on radioactivity.",
    "She discovered polonium, named after her native Poland, and radium. A second Nobel Prize followed in 1911.",
    "During the First World War she developed mobile radiography units known as little Curies.",
]
ANSWERS = [("Where was Curie born?", "Warsaw"), ("Which element is named after Poland?", "polonium"),
           ("When was the second prize?", "1911"), ("What were the units called?", "little Curies"),
           ("Who shared the 1903 prize?", "Pierre Curie and Henri Becquerel")]  # fmt: skip


def synthetic_sources() -> tuple[pa.Table, pa.Table]:
    """Two documents of paragraphs (``\\n\\n``) and span-annotated queries (document coordinates)."""
    texts = {"curie": "\n\n".join(PARAGRAPHS), "short": "A one-line document about the Danube river."}
    documents = pa.Table.from_pylist(
        [
            {"doc_id": d, "title": d.title(), "text": t, "source": "test", "license": None, "metadata": "{}"}
            for d, t in texts.items()
        ],
        schema=SOURCE_DOCUMENTS,
    )
    rows = [
        {
            "query_id": f"q{i}",
            "doc_id": "curie",
            "query": q,
            "answers": [{"text": a, "char_start": texts["curie"].index(a)}],
            "source": "test",
            "source_row": str(i),
        }
        for i, (q, a) in enumerate(ANSWERS)
    ]
    rows.append(
        {
            "query_id": "q-danube",
            "doc_id": "short",
            "query": "Which river?",
            "answers": [{"text": "Danube", "char_start": texts["short"].index("Danube")}],
            "source": "test",
            "source_row": "x",
        }
    )
    return documents, pa.Table.from_pylist(rows, schema=SOURCE_QUERIES)


def straddle_count(corpus) -> int:
    notes = [n for n in corpus.notes if "straddle" in n]
    return int(re.search(r": (\d+) answer", notes[0]).group(1)) if notes else 0


def check_gold(corpus, answers: dict[str, str]) -> int:
    """Every query kept; its gold chunk contains the answer unless it straddles; returns the straddling count."""
    straddling = 0
    for qid, gold in zip(corpus.query_ids, corpus.gold, strict=True):
        if answers[qid] not in corpus.chunks[gold]:
            straddling += 1
    assert straddling == straddle_count(corpus)
    return straddling


@pytest.mark.parametrize("size", SIZES)
def test_gold_chunk_contains_the_answer_at_every_size(size):
    documents, queries = synthetic_sources()
    corpus = rechunk_corpus(documents, queries, size, name=f"toy@{size}")
    answers = {row["query_id"]: row["answers"][0]["text"] for row in queries.to_pylist()}
    assert corpus.n_queries == queries.num_rows
    assert all(len(chunk) <= size for chunk in corpus.chunks)
    single_words = {qid for qid, a in answers.items() if " " not in a}
    for qid, gold in zip(corpus.query_ids, corpus.gold, strict=True):
        if qid in single_words:  # the splitter never cuts inside a word shorter than the chunk size
            assert answers[qid] in corpus.chunks[gold]
    check_gold(corpus, answers)
    assert corpus.document_order == ["curie", "short"]
    if size >= 1000:
        assert corpus.n_chunks == 2 and straddle_count(corpus) == 0


@pytest.mark.parametrize("size", SIZES)
def test_sample_corpus_at_every_size(size):
    source = load_sample(SAMPLE_DIR)
    documents, queries = source.documents_table(), source.queries_table()
    corpus = rechunk_corpus(documents, queries, size, name="sample")
    assert corpus.n_queries == queries.num_rows  # nothing dropped
    answers = {row["query_id"]: row["answers"][0]["text"] for row in queries.to_pylist()}
    straddling = check_gold(corpus, answers)
    assert straddling <= corpus.n_queries // 4


def test_straddling_answer_goes_to_the_chunk_with_most_of_it():
    text = "aaaa bbbb cccc dddd"
    documents = pa.Table.from_pylist(
        [{"doc_id": "d", "title": None, "text": text, "source": "t", "license": None, "metadata": "{}"}],
        schema=SOURCE_DOCUMENTS,
    )
    spans = [("tie", "bbbb cccc"), ("later", "bbbb cccc dddd")]
    queries = pa.Table.from_pylist(
        [
            {"query_id": q, "doc_id": "d", "query": q, "answers": [{"text": a, "char_start": text.index(a)}],
             "source": "t", "source_row": q}
            for q, a in spans
        ],
        schema=SOURCE_QUERIES,
    )  # fmt: skip
    corpus = rechunk_corpus(documents, queries, 12, name="t")
    assert corpus.chunks == ["aaaa bbbb", "cccc dddd"]
    assert corpus.gold.tolist() == [0, 1]  # tie (4 vs 4 characters) -> earlier chunk; 4 vs 9 -> the later one
    assert straddle_count(corpus) == 2


def test_unpaired_queries_are_counted_in_notes():
    documents, queries = synthetic_sources()
    rows = queries.to_pylist()
    rows[0]["answers"] = [{"text": "Warsaw", "char_start": 3}]  # the span does not hold the answer
    rows[1]["doc_id"] = "unknown"
    corpus = rechunk_corpus(documents, pa.Table.from_pylist(rows, schema=SOURCE_QUERIES), 300, name="t")
    assert corpus.n_queries == len(rows) - 2
    (note,) = [n for n in corpus.notes if "not paired" in n]
    assert "2 of 6 queries not paired" in note and "span_text_mismatch: 1" in note and "unknown_document: 1" in note


# ------------------------------------------------------------------ sources_from_dataset


def published(documents: pa.Table, queries: pa.Table, size: int) -> tuple[pa.Table, pa.Table, pa.Table]:
    """A ConTEB ``documents`` / ``queries`` pair as the pipeline publishes it (chunk = og_chunk), and the chunks."""
    chunks = chunk_documents(documents, ChunkingConfig(chunk_size=size)).chunks
    conteb_documents = pa.Table.from_pydict(
        {name: chunks.column("og_chunk" if name == "chunk" else name) for name in CONTEB_DOCUMENTS.names},
        schema=CONTEB_DOCUMENTS,
    )
    return conteb_documents, pair_by_span(queries, documents, chunks).table(), chunks


@pytest.mark.parametrize("size", [1000, 300, 100])
def test_sources_round_trip_reproduces_chunk_offsets(size):
    documents, queries = synthetic_sources()
    conteb_documents, conteb_queries, chunks = published(documents, queries, size)
    rebuilt_documents, rebuilt_queries = sources_from_dataset(conteb_documents, conteb_queries)
    texts = dict(zip(*(rebuilt_documents.column(c).to_pylist() for c in ("doc_id", "text")), strict=True))
    for row in chunks.to_pylist():
        assert texts[row["doc_id"]][row["char_start"] : row["char_end"]] == row["og_chunk"]
    again = chunk_documents(rebuilt_documents, ChunkingConfig(chunk_size=size)).chunks
    for name in ("chunk_id", "char_start", "char_end", "og_chunk"):
        assert again.column(name).to_pylist() == chunks.column(name).to_pylist()
    corpus = rechunk_corpus(rebuilt_documents, rebuilt_queries, size, name="t")
    assert [corpus.chunk_ids[g] for g in corpus.gold] == conteb_queries.column("chunk_id").to_pylist()
    assert rebuilt_documents.column("title").to_pylist() == ["Curie", "Short"]


def test_chunk_relative_answer_starts_are_shifted():
    documents, queries = synthetic_sources()
    conteb_documents, conteb_queries, chunks = published(documents, queries, 200)
    starts = dict(zip(*(chunks.column(c).to_pylist() for c in ("chunk_id", "char_start")), strict=True))
    relative = [
        {**row, "answer_start": row["answer_start"] - starts[row["chunk_id"]]} for row in conteb_queries.to_pylist()
    ]
    _, rebuilt = sources_from_dataset(conteb_documents, pa.Table.from_pylist(relative))
    assert [r["answers"][0]["char_start"] for r in rebuilt.to_pylist()] == conteb_queries.column(
        "answer_start"
    ).to_pylist()


def test_external_columns_are_optional_but_spans_are_required():
    documents = pa.table({"chunk_id": ["a_0", "a_1"], "chunk": ["Hello world.", "Bye now."], "char_start": [0, 14]})
    queries = pa.table({"query": ["greeting?", "no span"], "chunk_id": ["a_0", "a_1"], "answer": ["Hello", None],
                        "answer_start": [0, None]})  # fmt: skip
    rebuilt_documents, rebuilt_queries = sources_from_dataset(documents, queries)
    assert rebuilt_documents.column("text").to_pylist() == ["Hello world.\n\nBye now."]
    assert rebuilt_queries.column("doc_id").to_pylist() == ["a", "a"]
    corpus = rechunk_corpus(rebuilt_documents, rebuilt_queries, 100, name="t")
    assert corpus.query_ids == ["q0"] and any("empty_answer: 1" in n for n in corpus.notes)
    with pytest.raises(NotRunnable, match="queries have no answer spans"):
        sources_from_dataset(documents, pa.table({"query": ["x"], "answer": ["y"], "answer_start": [None]}))
    with pytest.raises(NotRunnable, match="queries have no answer spans"):
        sources_from_dataset(documents, pa.table({"query": ["x"], "chunk_id": ["a_0"]}))
    with pytest.raises(NotRunnable, match="char_start"):
        sources_from_dataset(documents.drop(["char_start"]), queries)


def test_rebuild_text_gaps_and_overlaps():
    assert rebuild_text([(4, "b"), (0, "a")]) == "a\n\n\nb"
    assert rebuild_text([(0, "ab"), (3, "c")]) == "ab c"
    assert rebuild_text([(0, "abcd"), (2, "cdef")]) == "abcdef"
