"""``sample``: the corpus bundled in ``data/sample/`` (see its README).

``documents/<doc-id>.txt``: line 1 is the title, line 2 is empty, the rest is the body (the
document text). ``queries.jsonl``: ``{"query_id", "doc_id", "question", "answer",
"answer_start"}`` with ``answer_start`` a code-point offset into the body.
"""

from __future__ import annotations

import json
from pathlib import Path

from conteb.ids import is_valid_doc_id
from conteb.text import blank_words, is_blank
from curation.encoding import normalize_newlines
from curation.quarantine import QuarantineReason, QuarantineRecord
from curation.sources.articles import EMPTY_QUESTION
from curation.sources.model import STAGE, SourceDocument, SourceError, SourceQuery, SourceResult

SAMPLE_LICENSE = "cc0-1.0"


def load_sample(folder: Path) -> SourceResult:
    """Load the sample corpus at ``folder``."""
    result = SourceResult()
    for path in sorted((folder / "documents").glob("*.txt")):
        result.documents.append(_read_document(path))
    queries_path = folder / "queries.jsonl"
    known = {doc.doc_id for doc in result.documents}
    seen: dict[str, int] = {}
    with queries_path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            row = f"line {line_number}"
            record = _parse_query_line(queries_path, row, line)
            query_id, doc_id = record["query_id"], record["doc_id"]
            result.count("questions_read")

            def refuse(reason: QuarantineReason, detail: str, query_id=query_id, doc_id=doc_id, row=row) -> None:
                result.quarantine.append(
                    QuarantineRecord(STAGE, reason, "query", query_id, doc_id, str(queries_path), row, detail)
                )

            blank = blank_words(record["question"], EMPTY_QUESTION)
            if blank:
                refuse(QuarantineReason.EMPTY_QUERY, blank)
                continue
            if query_id in seen:
                refuse(QuarantineReason.DUPLICATE_QUERY_ID, f"query id already used at line {seen[query_id]}")
                continue
            seen[query_id] = line_number
            if doc_id not in known:
                refuse(QuarantineReason.UNKNOWN_DOCUMENT, f"no documents/{doc_id}.txt in {folder}")
                continue
            result.queries.append(
                SourceQuery(
                    query_id,
                    doc_id,
                    record["question"],
                    [(record["answer"], record["answer_start"])],
                    str(queries_path),
                    row,
                )
            )
    return result


def _read_document(path: Path) -> SourceDocument:
    doc_id = path.stem
    if not is_valid_doc_id(doc_id):
        raise SourceError(f"{path}: file name is not a valid doc id (lowercase letters, digits, '-')")
    try:
        content = normalize_newlines(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise SourceError(f"{path}: not UTF-8 at byte {error.start}") from None
    title, blank, body = [*content.split("\n", 2), "", ""][:3]
    if is_blank(title) or blank.strip():
        raise SourceError(f"{path}: line 1 must be the title and line 2 empty")
    return SourceDocument(doc_id, title.strip(), body, str(path), SAMPLE_LICENSE, {"file": path.name})


def _parse_query_line(path: Path, row: str, line: str) -> dict:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise SourceError(f"{path}: {row}: invalid JSON: {error.msg}") from None
    expected = {"query_id": str, "doc_id": str, "question": str, "answer": str, "answer_start": int}
    for key, kind in expected.items():
        if type(record.get(key)) is not kind:  # exact: JSON true is no answer_start
            raise SourceError(f"{path}: {row}: '{key}' missing or not a {kind.__name__}")
    return record
