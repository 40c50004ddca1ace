"""What every source loader returns: documents, queries, quarantine and counts."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pyarrow as pa

from conteb.names import Stage
from conteb.schemas import SOURCE_DOCUMENTS, SOURCE_QUERIES, table_from_rows
from curation.quarantine import QuarantineRecord, quarantine_table

STAGE = Stage.SOURCE


class SourceError(ValueError):
    """A source is unusable as a whole; the message names the file, the row and the reason."""


@dataclass
class SourceDocument:
    doc_id: str
    title: str | None
    text: str
    source: str
    license: str | None = None
    metadata: dict = field(default_factory=dict)


@dataclass
class SourceQuery:
    """A query with its answers in *document* coordinates: ``[(text, char_start), ...]``."""

    query_id: str
    doc_id: str
    query: str
    answers: list[tuple[str, int]]
    source: str
    source_row: str


@dataclass
class SourceResult:
    documents: list[SourceDocument] = field(default_factory=list)
    queries: list[SourceQuery] = field(default_factory=list)
    quarantine: list[QuarantineRecord] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # to be logged, e.g. a non-UTF-8 file

    def count(self, key: str, amount: int = 1) -> None:
        self.stats[key] = self.stats.get(key, 0) + amount

    def keep_first_documents(self, limit: int | None) -> None:
        """Keep the first ``limit`` documents (source order) and their queries; the rest are counted, not lost.

        Counts: ``documents_left_out`` and ``queries_left_out`` (their questions are in the source, not in the
        task); a ``limit`` of None keeps everything.
        """
        if limit is None or len(self.documents) <= limit:
            return
        kept = {d.doc_id for d in self.documents[:limit]}
        before = len(self.queries)
        self.count("documents_left_out", len(self.documents) - limit)
        self.documents = self.documents[:limit]
        self.queries = [q for q in self.queries if q.doc_id in kept]
        self.count("queries_left_out", before - len(self.queries))
        self.warnings.append(
            f"max_documents={limit}: kept the first {limit} documents; {self.stats['documents_left_out']} documents "
            f"and {self.stats['queries_left_out']} queries left out"
        )

    def documents_table(self) -> pa.Table:
        rows = [
            {
                "doc_id": d.doc_id,
                "title": d.title,
                "text": d.text,
                "source": d.source,
                "license": d.license,
                "metadata": json.dumps(d.metadata, sort_keys=True, ensure_ascii=False),
            }
            for d in self.documents
        ]
        return table_from_rows(rows, SOURCE_DOCUMENTS)

    def queries_table(self) -> pa.Table:
        rows = [
            {
                "query_id": q.query_id,
                "doc_id": q.doc_id,
                "query": q.query,
                "answers": [{"text": text, "char_start": start} for text, start in q.answers],
                "source": q.source,
                "source_row": q.source_row,
            }
            for q in self.queries
        ]
        return table_from_rows(rows, SOURCE_QUERIES)

    def quarantine_table(self) -> pa.Table:
        return quarantine_table(self.quarantine)
