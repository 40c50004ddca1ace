"""Source rows no dataset file can store, quarantined at the source stage instead of failing a later write.

Every loader's result passes through :func:`quarantine_unstorable` (:func:`curation.sources.load_source`):

* a lone surrogate (U+D800..U+DFFF: what JSON's ``"\\ud800"`` escape or an undecodable file name gives) in any text
  of a document (text, title, id, license, metadata) or a query (id, question, answer texts): Arrow, Parquet and
  SQLite refuse such text with ``UnicodeEncodeError``;
* an answer offset outside a 64-bit integer (``answer_start: 1e30`` written as digits): Arrow refuses it with
  ``OverflowError``.

Such a document or query becomes a quarantine row (``invalid_field``, the detail naming the field), the queries of
a refused document ``document_quarantined``; the quarantine rows themselves show a lone surrogate as its escape.
"""

from __future__ import annotations

import dataclasses
import json

from conteb.text import escape_surrogates, lone_surrogate_problem
from curation.quarantine import QuarantineReason, QuarantineRecord
from curation.sources.model import STAGE, SourceDocument, SourceQuery, SourceResult

OFFSET_RANGE = range(-(2**63), 2**63)
"""Offsets a source row may hold: Arrow's ``int64``."""


def surrogate_problem(fields: dict[str, str | None]) -> str | None:
    """Why one of ``fields`` (``{name: text}``) cannot be stored, naming the field and where, or None."""
    for name, text in fields.items():
        if text is None:
            continue
        problem = lone_surrogate_problem(text)
        if problem is not None:
            return f"'{name}': {problem}"
    return None


def document_problem(doc: SourceDocument) -> str | None:
    """Why ``doc`` cannot be stored, or None."""
    metadata = json.dumps(doc.metadata, sort_keys=True, ensure_ascii=False, default=str)
    fields = {"doc_id": doc.doc_id, "title": doc.title, "text": doc.text, "license": doc.license, "source": doc.source}
    return surrogate_problem({**fields, "metadata": metadata})


def query_problem(query: SourceQuery) -> str | None:
    """Why ``query`` cannot be stored, or None."""
    fields = {"id": query.query_id, "question": query.query, "source": query.source, "row": query.source_row}
    answers = {f"answers[{index}].text": text for index, (text, _) in enumerate(query.answers)}
    problem = surrogate_problem({**fields, **answers})
    if problem:
        return problem
    for index, (_, start) in enumerate(query.answers):
        if start not in OFFSET_RANGE:
            shown = str(start) if len(str(start)) <= 40 else f"{str(start)[:20]}... ({len(str(start))} digits)"
            return f"'answers[{index}].answer_start': {shown} does not fit a 64-bit offset"
    return None


def _escaped(record: QuarantineRecord) -> QuarantineRecord:
    """``record`` with any lone surrogate of its texts written as its escape (it names the row that held one)."""
    return dataclasses.replace(
        record,
        object_id=escape_surrogates(record.object_id),
        doc_id=None if record.doc_id is None else escape_surrogates(record.doc_id),
        source=escape_surrogates(record.source),
        row=escape_surrogates(record.row),
        detail=escape_surrogates(record.detail),
    )


def quarantine_unstorable(result: SourceResult) -> SourceResult:
    """Move the documents and queries of ``result`` that no Arrow table can hold into its quarantine (in place)."""
    refused: dict[str, str] = {}
    kept_documents = []
    for doc in result.documents:
        problem = document_problem(doc)
        if problem is None:
            kept_documents.append(doc)
            continue
        refused[doc.doc_id] = problem
        row = str(doc.metadata.get("row") or doc.metadata.get("file") or "document")
        result.quarantine.append(
            QuarantineRecord(
                STAGE, QuarantineReason.INVALID_FIELD, "document", doc.doc_id, doc.doc_id, doc.source, row, problem
            )
        )
    kept_queries = []
    for query in result.queries:
        if query.doc_id in refused:
            reason, problem = QuarantineReason.DOCUMENT_QUARANTINED, f"its document: {refused[query.doc_id]}"
        elif (problem := query_problem(query)) is not None:
            reason = QuarantineReason.INVALID_FIELD
        else:
            kept_queries.append(query)
            continue
        result.quarantine.append(
            QuarantineRecord(
                STAGE, reason, "query", query.query_id, query.doc_id, query.source, query.source_row, problem
            )
        )
    result.documents, result.queries = kept_documents, kept_queries
    result.quarantine = [_escaped(record) for record in result.quarantine]
    return result
