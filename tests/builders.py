"""Small stage tables for unit tests (one place, so every test builds them the same way)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa

from conteb.schemas import CHUNKS, SOURCE_DOCUMENTS, SOURCE_QUERIES

LYON_TEXTS = [
    "Lyon is a city in France on the Rhône.",
    "Lyon's metro opened in 1978 and has four lines.",
    "The Lyon metro is run by TCL.",
]


def chunk_row(doc_id: str, index: int, text: str, start: int = 0, end: int = 0, title: str | None = None) -> dict:
    return {"chunk_id": f"{doc_id}_{index}", "doc_id": doc_id, "chunk_index": index, "char_start": start,
            "char_end": end, "og_chunk": text, "title": title}  # fmt: skip


def chunks_of(doc_id: str, text: str, bounds: Sequence[tuple[int, int]], reverse: bool = False) -> pa.Table:
    """CHUNKS of one document cut at ``bounds`` (``reverse``: rows out of chunk order)."""
    rows = [chunk_row(doc_id, i, text[s:e], s, e) for i, (s, e) in enumerate(bounds)]
    return pa.Table.from_pylist(rows[::-1] if reverse else rows, schema=CHUNKS)


def chunks_from_texts(doc_id: str, texts: Sequence[str], title: str | None = None) -> pa.Table:
    """CHUNKS whose spans do not matter (all [0, 0))."""
    return pa.Table.from_pylist([chunk_row(doc_id, i, t, title=title) for i, t in enumerate(texts)], schema=CHUNKS)


def documents(rows: Iterable[tuple[str, str | None, str]]) -> pa.Table:
    """SOURCE_DOCUMENTS from ``(doc_id, title, text)``."""
    return pa.Table.from_pylist(
        [{"doc_id": d, "title": t, "text": x, "source": "f"} for d, t, x in rows], schema=SOURCE_DOCUMENTS
    )


def queries(specs: Iterable[dict], default_doc: str = "d") -> pa.Table:
    """SOURCE_QUERIES from ``{"id", "doc"?, "answers": [(text, start)]}``."""
    rows = [
        {"query_id": q["id"], "doc_id": q.get("doc", default_doc), "query": f"query {q['id']}?", "source": "f",
         "source_row": f"r{q['id']}", "answers": [{"text": t, "char_start": s} for t, s in q.get("answers", [])]}
        for q in specs
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=SOURCE_QUERIES)
