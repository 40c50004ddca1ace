"""Id-keyed lookups over the stage tables the curation stages share: ``CHUNKS`` and ``SOURCE_DOCUMENTS``
(schemas in ``conteb.schemas``)."""

from __future__ import annotations

import pyarrow as pa


def chunk_texts(chunks: pa.Table) -> dict[str, str]:
    """``{chunk_id: og_chunk}``: the original text of every chunk of ``chunks``."""
    return dict(zip(chunks.column("chunk_id").to_pylist(), chunks.column("og_chunk").to_pylist(), strict=True))


def document_titles(documents: pa.Table) -> dict[str, str]:
    """``{doc_id: title}`` of a ``SOURCE_DOCUMENTS`` table."""
    return dict(zip(documents.column("doc_id").to_pylist(), documents.column("title").to_pylist(), strict=True))


def by_document(rows: list[dict]) -> list[dict]:
    """``rows`` with each ``doc_id``'s rows together, documents in order of first appearance (stable)."""
    order: dict[str, list[dict]] = {}
    for row in rows:
        order.setdefault(row["doc_id"], []).append(row)
    return [row for group in order.values() for row in group]
