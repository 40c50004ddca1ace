"""Small stage tables for unit tests (one place, so every test builds them the same way)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

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


SPEAKERS = ("Alder", "Birch", "Cedar", "Dogwood", "Elm", "Fir", "Hazel", "Juniper")
"""The speakers of :func:`write_speeches` (one address each, years 1950, 1951, ...)."""
HARBOUR = "The harbour of district {k} will receive new cranes and a wider channel before winter ends."
PROMISE = "We will keep every promise we made to the families of this land."  # in every paragraph: a duplicate


def speech(speaker: str, year: int) -> str:
    """A documents-only address: an opening naming the speaker, then ten short paragraphs, each with sentences a
    pseudo-query may take and sentences it must refuse (a stage direction, a salutation, the speaker's name, a
    sentence repeated in every paragraph, a short one)."""
    paragraphs = [f"Mr. Speaker, members of the assembly:\n\n{speaker} opens the {year} address to the nation."]
    for k in range(1, 6):
        paragraphs.append(
            f"{HARBOUR.format(k=k)} Farmers in valley {k} asked for cheaper credit, and the council agreed to "
            "lower the rate. (Applause.)"
        )
        paragraphs.append(
            f"Schools in town {k} will hire more teachers so that no class holds more than twenty children. "
            f"{speaker} thanks the workers of district {k} for their long and patient service. {PROMISE} Thank you."
        )
    return "\n\n".join(paragraphs) + "\n"


def write_speeches(folder: Path, count: int = len(SPEAKERS)) -> Path:
    """``folder`` with ``count`` files ``<year>-<Speaker>.txt`` (:func:`speech`), like the State of the Union
    corpus's ``YEAR-President.txt``."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, speaker in enumerate(SPEAKERS[:count]):
        (folder / f"{1950 + index}-{speaker}.txt").write_text(speech(speaker, 1950 + index), encoding="utf-8")
    return folder
