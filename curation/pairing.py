"""Stage 2: pairing each query with the chunk that answers it.

A pairing method turns source queries into ``PAIRED_QUERIES`` rows plus quarantine records.
This module holds the span method; further methods (e.g. an LLM) implement the same
:class:`PairingMethod` protocol and register in ``PAIRING_METHODS``.

Span rule (documented in the dataset card): each answer span ``[start, start + len(answer))`` is
checked against the document text. The query's primary answer is its first valid answer. Its
*touched* chunks are all chunks overlapping the span (listed in ``chunk_ids``); the gold
``chunk_id`` is the touched chunk holding the most answer characters (earliest on a tie). A span
not contained in a single chunk is counted as ``straddling``. Invalid answers are quarantined one
by one (``object_kind="answer"``); a query left with no valid answer is quarantined whole.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

from conteb.names import Pairing, Stage
from conteb.perf import gc_paused
from conteb.schemas import PAIRED_QUERIES
from conteb.text import is_blank
from curation.quarantine import QuarantineReason, QuarantineRecord

STAGE = Stage.PAIRING


@dataclass
class PairingResult:
    rows: list[dict] = field(default_factory=list)  # PAIRED_QUERIES rows
    quarantine: list[QuarantineRecord] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)

    def count(self, key: str, amount: int = 1) -> None:
        self.stats[key] = self.stats.get(key, 0) + amount

    def table(self) -> pa.Table:
        return pa.Table.from_pylist(self.rows, schema=PAIRED_QUERIES) if self.rows else PAIRED_QUERIES.empty_table()


@dataclass(frozen=True)
class DocumentChunks:
    """Chunks of one document in order: ids and spans (``starts`` sorted ascending)."""

    ids: list[str]
    starts: list[int]
    ends: list[int]

    def touched(self, start: int, end: int) -> list[tuple[int, int]]:
        """``[(chunk position, overlapping characters)]`` for chunks overlapping ``[start, end)``."""
        hits = []
        position = bisect.bisect_left(self.starts, end) - 1  # last chunk starting before `end`
        while position >= 0:
            overlap = min(end, self.ends[position]) - max(start, self.starts[position])
            if overlap > 0:
                hits.append((position, overlap))
            elif self.ends[position] <= start:
                break  # chunk ends are increasing: every chunk further left ends before `start`
            position -= 1
        return hits[::-1]


def index_chunks(chunks: pa.Table) -> dict[str, DocumentChunks]:
    """Group a ``CHUNKS`` table by document, in chunk order."""
    grouped: dict[str, DocumentChunks] = {}
    columns = [
        chunks.column(name).to_pylist() for name in ("doc_id", "chunk_id", "char_start", "char_end", "chunk_index")
    ]
    for doc_id, cid, start, end, _ in sorted(zip(*columns, strict=True), key=lambda row: (row[0], row[4])):
        entry = grouped.setdefault(doc_id, DocumentChunks([], [], []))
        entry.ids.append(cid)
        entry.starts.append(start)
        entry.ends.append(end)
    return grouped


PairingMethod = Callable[[pa.Table, pa.Table, pa.Table], PairingResult]
"""``(SOURCE_QUERIES, SOURCE_DOCUMENTS, CHUNKS) -> PairingResult``; registered by name below."""


def pair_by_span(queries: pa.Table, documents: pa.Table, chunks: pa.Table) -> PairingResult:
    """Pair ``SOURCE_QUERIES`` with ``CHUNKS`` using their answer spans (rule in the module doc)."""
    texts = dict(zip(documents.column("doc_id").to_pylist(), documents.column("text").to_pylist(), strict=True))
    by_doc = index_chunks(chunks)
    result = PairingResult()
    with gc_paused():
        for query in queries.to_pylist():
            _pair_one(query, texts, by_doc, result)
    result.stats["queries"] = queries.num_rows
    result.stats["paired"] = len(result.rows)
    return result


PAIRING_METHODS: dict[str, PairingMethod] = {"span": pair_by_span}


def check_answer(text: str, answer: str, start: int) -> tuple[QuarantineReason, str] | None:
    """Why the span ``(answer, start)`` is invalid in ``text``, or ``None`` when it matches."""
    if is_blank(answer):
        return QuarantineReason.EMPTY_ANSWER, "answer text is blank (empty, whitespace or invisible characters only)"
    end = start + len(answer)
    if start < 0 or end > len(text):
        return QuarantineReason.SPAN_OUT_OF_BOUNDS, f"span [{start}, {end}) outside the document (length {len(text)})"
    found = text[start:end]
    if found != answer:
        return QuarantineReason.SPAN_TEXT_MISMATCH, f"document has {found!r} at [{start}, {end}), answer is {answer!r}"
    return None


def _pair_one(query: dict, texts: dict[str, str], by_doc: dict[str, DocumentChunks], result: PairingResult) -> None:
    query_id, doc_id = query["query_id"], query["doc_id"]

    def refuse(reason: QuarantineReason, detail: str, kind: str = "query", object_id: str = query_id) -> None:
        result.quarantine.append(
            QuarantineRecord(STAGE, reason, kind, object_id, doc_id, query["source"], query["source_row"], detail)
        )

    text = texts.get(doc_id)
    if text is None:
        refuse(QuarantineReason.UNKNOWN_DOCUMENT, f"document {doc_id!r} is not in the source documents")
        return
    chunks = by_doc.get(doc_id)
    if chunks is None:
        refuse(QuarantineReason.DOCUMENT_QUARANTINED, f"document {doc_id!r} has no chunks (see chunk quarantine)")
        return
    valid, problems = [], []
    for index, answer in enumerate(query["answers"]):
        problem = check_answer(text, answer["text"], answer["char_start"])
        if problem is None:
            valid.append(answer)
        else:
            problems.append((index, *problem))
    if not valid:
        refuse(problems[0][1], "; ".join(f"answer {i}: {detail}" for i, _, detail in problems))
        return
    for index, reason, detail in problems:
        refuse(reason, detail, kind="answer", object_id=f"{query_id}#answer{index}")
        result.count("answers_quarantined")
    primary = valid[0]
    start, end = primary["char_start"], primary["char_start"] + len(primary["text"])
    touched = chunks.touched(start, end)
    if not touched:
        refuse(QuarantineReason.ANSWER_OUTSIDE_CHUNKS, f"span [{start}, {end}) lies between chunks")
        return
    best_position = max(touched, key=lambda hit: (hit[1], -hit[0]))[0]
    if all(overlap < end - start for _, overlap in touched):
        result.count("straddling")
    if len(touched) > 1:
        result.count("multi_chunk")
    result.rows.append(
        {
            "query_id": query_id,
            "query": query["query"],
            "chunk_id": chunks.ids[best_position],
            "chunk_ids": [chunks.ids[position] for position, _ in touched],
            "answer": primary["text"],
            "answer_start": start,
            "answer_end": end,
            "doc_id": doc_id,
            "pairing": Pairing.SPAN,
            "source": query["source"],
        }
    )
