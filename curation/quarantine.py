"""Quarantine: rows a stage refused, each with a reason and where it came from.

Nothing is dropped silently: every refused document, query or answer becomes a
:class:`QuarantineRecord`, stored in the stage's quarantine table (schema ``QUARANTINE``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import StrEnum

import pyarrow as pa

from conteb.names import Stage
from conteb.schemas import QUARANTINE, table_from_rows


class QuarantineReason(StrEnum):
    """Why a row was refused. Values are stable: they are stored and counted in metadata."""

    BINARY_FILE = "binary_file"  # a text-folder file holding NUL bytes
    NOT_A_REGULAR_FILE = (
        "not_a_regular_file"  # a text-folder entry that is a FIFO, a device, a socket or a dangling link
    )
    DUPLICATE_QUERY_ID = "duplicate_query_id"  # a second query with an id already seen
    NO_ANSWER = "no_answer"  # an answerable query with an empty answer list
    EMPTY_QUERY = "empty_query"  # the question is blank (conteb.text.is_blank)
    # a field of the row has the wrong JSON type, or a value no dataset file can hold: a lone surrogate, an offset
    # beyond 64 bits (curation.sources.storable; detail: the field and value)
    INVALID_FIELD = "invalid_field"
    UNKNOWN_DOCUMENT = "unknown_document"  # a query naming a document the source lacks
    EMPTY_DOCUMENT = "empty_document"  # blank text (conteb.text.is_blank): nothing to chunk
    DOCUMENT_QUARANTINED = "document_quarantined"  # the query's document was quarantined
    EMPTY_ANSWER = "empty_answer"  # answer text blank (conteb.text.is_blank)
    SPAN_OUT_OF_BOUNDS = "span_out_of_bounds"  # the answer span falls outside the document
    SPAN_TEXT_MISMATCH = "span_text_mismatch"  # document text at the span differs from the answer
    ANSWER_OUTSIDE_CHUNKS = "answer_outside_chunks"  # the span touches no chunk (whitespace gap)
    LLM_NO_CHUNK = "llm_no_chunk"  # the LLM said no chunk of the document answers the query
    LLM_FAILED = "llm_failed"  # the LLM call failed, or its answer stayed invalid (detail: the error)
    TITLE_UNMATCHED = "title_unmatched"  # pseudo-queries: the title does not match pseudo_queries.title_pattern


@dataclass(frozen=True)
class QuarantineRecord:
    """One refused object. ``row`` locates it in the source (e.g. ``data[3].paragraphs[0].qas[2]``)."""

    stage: Stage  # the stage that refused it (stored as its value)
    reason: QuarantineReason
    object_kind: str  # document | chunk | query | answer
    object_id: str
    doc_id: str | None
    source: str
    row: str
    detail: str

    def where_and_why(self) -> str:
        """``<source>: <row>: <reason>: <detail>``: the one line that shows a user this row."""
        return f"{self.source}: {self.row}: {self.reason}: {self.detail}"

    def as_row(self) -> dict:
        row = asdict(self)
        row["stage"], row["reason"] = str(self.stage), str(self.reason)
        return row


def quarantine_table(records: Iterable[QuarantineRecord]) -> pa.Table:
    """Table (schema ``QUARANTINE``) of ``records``."""
    return table_from_rows([record.as_row() for record in records], QUARANTINE)


def count_reasons(table: pa.Table) -> dict[str, int]:
    """``{reason: count}`` of a quarantine table, most frequent first."""
    return dict(Counter(table.column("reason").to_pylist()).most_common())
