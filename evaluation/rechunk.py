"""Chunk-size robustness study: the same documents and queries re-chunked at another size.

:func:`rechunk_corpus` re-chunks the *original* document texts (``SOURCE_DOCUMENTS``) with the project's recursive
splitter (:func:`curation.chunking.chunk_documents`, ``chunk_overlap=0``) and re-pairs every query by its answer span
(:func:`curation.pairing.pair_by_span`, ``SOURCE_QUERIES``): the gold chunk is the chunk holding the most answer
characters (earliest on a tie), so an answer straddling a boundary goes to the chunk with its larger part. Chunks are
embedded as their original text (no reformulation at other sizes). Queries that do not pair any more are counted in
``EvalCorpus.notes`` with the pairing stage's reasons, never silently dropped.

:func:`sources_from_dataset` rebuilds those inputs from a published ConTEB folder (an external dataset without stage
tables): each document's text is its ``og_chunk`` texts placed at their ``char_start``
(:func:`conteb.content.rebuild_text`, the one rule for a document's text from its chunks); the characters between
chunks (whitespace the splitter stripped) are unknown and filled with whitespace. Newlines inside chunks are kept as
they are.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from conteb.config import ChunkingConfig
from conteb.content import rebuild_text
from conteb.schemas import SOURCE_DOCUMENTS, SOURCE_QUERIES, table_from_rows
from curation.chunking import chunk_documents
from curation.pairing import pair_by_span
from evaluation.corpus import EvalCorpus
from evaluation.indexed import NotRunnable


@dataclass(frozen=True)
class SpanSources:
    """Original documents and span-annotated queries (``SOURCE_DOCUMENTS`` / ``SOURCE_QUERIES`` tables)."""

    documents: pa.Table
    queries: pa.Table


def rechunk_corpus(
    source_documents: pa.Table,
    source_queries: pa.Table,
    chunk_size: int,
    *,
    name: str,
    split: str = "test",
    source: str | None = None,
) -> EvalCorpus:
    """An :class:`EvalCorpus` of ``source_documents`` chunked at ``chunk_size`` characters, queries paired by span.

    Chunk order: documents in table order, chunks by ``chunk_index``; ``chunks`` are the original texts. Queries that
    no longer pair (and answers refused) are counted by reason in ``notes``, as are straddling answers.
    """
    chunking = chunk_documents(source_documents, ChunkingConfig(chunk_size=chunk_size, chunk_overlap=0))
    chunks = chunking.chunks
    pairing = pair_by_span(source_queries, source_documents, chunks)
    chunk_ids = chunks.column("chunk_id").to_pylist()
    row_of = {cid: row for row, cid in enumerate(chunk_ids)}
    rows = pairing.rows
    notes: list[str] = []
    if chunking.quarantine:
        reasons = Counter(str(record.reason.value) for record in chunking.quarantine)
        count = len(chunking.quarantine)
        notes.append(f"chunk size {chunk_size}: {count} document(s) not chunked ({_counts(reasons)})")
    refused = [r for r in pairing.quarantine if r.object_kind == "query"]
    if refused:
        reasons = Counter(str(record.reason.value) for record in refused)
        notes.append(
            f"chunk size {chunk_size}: {len(refused)} of {source_queries.num_rows} queries not paired by span "
            f"({_counts(reasons)}); they are left out of this size's scores"
        )
    answers = pairing.stats.get("answers_quarantined", 0)
    if answers:
        notes.append(f"chunk size {chunk_size}: {answers} answer(s) refused (span not found); other answers used")
    straddling = pairing.stats.get("straddling", 0)
    if straddling:
        notes.append(
            f"chunk size {chunk_size}: {straddling} answer(s) straddle a chunk boundary "
            "(gold: the chunk holding most of the answer)"
        )
    return EvalCorpus(
        name=name,
        source=source if source is not None else f"re-chunked at {chunk_size} characters",
        split=split,
        chunk_ids=chunk_ids,
        chunks=chunks.column("og_chunk").to_pylist(),
        doc_ids=chunks.column("doc_id").to_pylist(),
        chunk_index=np.asarray(chunks.column("chunk_index").to_numpy(), dtype=np.int32),
        titles=chunks.column("title").to_pylist(),
        query_ids=[row["query_id"] for row in rows],
        queries=[row["query"] for row in rows],
        gold=np.fromiter((row_of[row["chunk_id"]] for row in rows), dtype=np.int64, count=len(rows)),
        notes=notes,
        char_starts=chunks.column("char_start").to_pylist(),
    )


def _counts(counter: Counter) -> str:
    return ", ".join(f"{reason}: {count}" for reason, count in sorted(counter.items()))


def _column(table: pa.Table, name: str) -> list | None:
    return table.column(name).to_pylist() if name in table.column_names else None


def _doc_of(chunk_id: str) -> str:
    return chunk_id.rsplit("_", 1)[0]


def sources_from_dataset(
    documents: pa.Table, queries: pa.Table, *, source: str = "dataset"
) -> tuple[pa.Table, pa.Table]:
    """``SOURCE_DOCUMENTS`` and ``SOURCE_QUERIES`` tables rebuilt from a ConTEB ``documents`` / ``queries`` pair.

    Documents: ``og_chunk`` (``chunk`` when absent) placed at ``char_start``; ``doc_id`` from the column or the
    ``chunk_id`` (``{doc_id}_{index}``), ``title`` from the first chunk. Queries: ``answer`` at ``answer_start`` in
    document coordinates; a start that only matches relative to the query's chunk (``chunk_id``) is shifted by that
    chunk's ``char_start``. A query without an answer span is kept with an empty answer, so that pairing refuses it
    and the refusal is counted. Raises :class:`NotRunnable` when no query has an answer span or the documents have no
    ``char_start``.
    """
    answers, starts = _column(queries, "answer"), _column(queries, "answer_start")
    if not answers or not starts or all(a is None or s is None for a, s in zip(answers, starts, strict=True)):
        raise NotRunnable("queries have no answer spans: the chunk-size study needs span-annotated queries")
    chunk_ids = _column(documents, "chunk_id") or []
    char_starts = _column(documents, "char_start")
    if char_starts is None or any(s is None for s in char_starts):
        raise NotRunnable("documents have no char_start offsets: the chunk-size study needs to rebuild their texts")
    texts = _column(documents, "og_chunk") or _column(documents, "chunk") or []
    doc_ids = _column(documents, "doc_id") or [_doc_of(c) for c in chunk_ids]
    titles = _column(documents, "title") or [None] * len(chunk_ids)

    pieces: dict[str, list[tuple[int, str]]] = {}
    title_of: dict[str, str | None] = {}
    chunk_start: dict[str, int] = {}
    for cid, doc, start, text, title in zip(chunk_ids, doc_ids, char_starts, texts, titles, strict=True):
        pieces.setdefault(doc, []).append((int(start), text))
        title_of.setdefault(doc, title)
        chunk_start[cid] = int(start)
    full = {doc: rebuild_text(parts) for doc, parts in pieces.items()}
    document_rows = [
        {
            "doc_id": doc,
            "title": title_of[doc],
            "text": full[doc],
            "source": source,
            "license": None,
            "metadata": json.dumps({"rebuilt_from_chunks": len(parts)}),
        }
        for doc, parts in pieces.items()
    ]

    n = queries.num_rows
    query_ids = _column(queries, "query_id") or [f"q{i}" for i in range(n)]
    gold_ids = _column(queries, "chunk_id") or [None] * n
    if "chunk_id" not in queries.column_names and "chunk_ids" in queries.column_names:
        gold_ids = [ids[0] if ids else None for ids in queries.column("chunk_ids").to_pylist()]
    query_docs = _column(queries, "doc_id") or [_doc_of(c) if c else "" for c in gold_ids]
    query_sources = _column(queries, "source") or [source] * n
    query_rows = []
    for i, (qid, doc, text, answer, start, gold) in enumerate(
        zip(query_ids, query_docs, queries.column("query").to_pylist(), answers, starts, gold_ids, strict=True)
    ):
        start = -1 if start is None else int(start)
        answer = answer or ""
        body = full.get(doc, "")
        if answer and body[start : start + len(answer)] != answer and gold in chunk_start:
            shifted = chunk_start[gold] + start
            if start >= 0 and body[shifted : shifted + len(answer)] == answer:
                start = shifted
        query_rows.append(
            {
                "query_id": qid,
                "doc_id": doc,
                "query": text,
                "answers": [{"text": answer, "char_start": start}],
                "source": query_sources[i] or source,
                "source_row": f"queries[{i}]",
            }
        )
    return table_from_rows(document_rows, SOURCE_DOCUMENTS), table_from_rows(query_rows, SOURCE_QUERIES)
