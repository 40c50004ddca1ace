"""Load a ConTEB-layout task (a local folder or a Hugging Face hub dataset id) as an :class:`EvalCorpus`.

Layout (the public ConTEB one, and what ``build_conteb`` publishes): config ``documents`` with
``chunk_id`` and ``chunk`` (``doc_id``/``chunk_index`` optional: derived from ``chunk_id`` =
``"{doc_id}_{chunk_index}"``), config ``queries`` with ``query`` and the gold ``chunk_id``
(``query_id`` optional: ``"q{row}"``; ``needs_context`` optional: the context-necessity label that
``build_conteb`` publishes — without it the corpus is unlabelled, noted, and the ``needs_context``
subset is not reported). Local folders are read with pyarrow from the split's files as the dataset card names
them (:func:`conteb.published.read_config`; a card naming a missing file is an error); anything else goes
through ``datasets.load_dataset(path, config, split=split)``, which is also how hub ids load where a
network exists. Bad rows raise :class:`CorpusError` naming the file, the row and the reason. Queries with
``pairing: pseudo`` (inverse-cloze pseudo-queries, ``curation/pseudo_queries.py``) are training data: a split that
holds any is refused, naming how many and the first one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from conteb.ids import split_chunk_id
from conteb.names import Pairing
from conteb.published import CardError, read_config
from conteb.text import is_blank
from evaluation.corpus import EvalCorpus


class CorpusError(ValueError):
    """The task's files are unusable for evaluation; the message names the file, row and reason."""


def load_config_table(path: str, config: str, split: str) -> tuple[pa.Table, str]:
    """The ``config`` table of ``split`` and a label of where it came from (for error messages).

    A local folder's files (those its card names) are read directly; without them (or for a hub id)
    ``datasets`` loads it.
    """
    folder = Path(path).expanduser()
    if folder.is_dir():
        try:
            found = read_config(folder, config, split)
        except CardError as error:
            raise CorpusError(str(error)) from error
        if found:
            return found[0], str(found[1][0])
    import datasets

    try:
        dataset = datasets.load_dataset(str(folder) if folder.is_dir() else path, config, split=split)
    except Exception as error:  # datasets raises many types; name what was asked for
        raise CorpusError(f"{path}: cannot load config {config!r} split {split!r}: {error}") from error
    return dataset.with_format("arrow")[:], f"{path} [{config}/{split}]"


def _bad(where: str, row: int, reason: str) -> CorpusError:
    return CorpusError(f"{where}: row {row}: {reason}")


def _require(table: pa.Table, where: str, columns: tuple[str, ...]) -> None:
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise CorpusError(f"{where}: missing column(s) {missing}; has {table.column_names}")


def _split_chunk_id(chunk_id: str, where: str, row: int) -> tuple[str, int]:
    """:func:`conteb.ids.split_chunk_id`, its error naming the file and row."""
    try:
        return split_chunk_id(chunk_id)
    except ValueError:
        raise _bad(
            where, row, f"chunk_id {chunk_id!r} is not '<doc_id>_<chunk_index>' and there is no doc_id column"
        ) from None


def _refuse_pseudo_queries(queries: pa.Table, where: str, split: str) -> None:
    """Raise :class:`CorpusError` when ``queries`` holds a pseudo-query (``pairing`` = ``pseudo``)."""
    if "pairing" not in queries.column_names:
        return
    rows = [row for row, value in enumerate(queries.column("pairing").to_pylist()) if value == Pairing.PSEUDO]
    if rows:
        qid = queries.column("query_id")[rows[0]].as_py() if "query_id" in queries.column_names else None
        raise CorpusError(
            f"{where}: {len(rows)} of the {queries.num_rows} queries of split {split!r} are pseudo-queries "
            f"(pairing 'pseudo', e.g. row {rows[0]}{f': {qid!r}' if qid else ''}): inverse-cloze training data, never "
            "evaluated; evaluate a split without them (the task's evaluation split)"
        )


def corpus_from_tables(
    documents: pa.Table,
    queries: pa.Table,
    *,
    name: str,
    source: str,
    split: str,
    documents_label: str = "documents",
    queries_label: str = "queries",
    contexts: dict[str, str] | None = None,
) -> EvalCorpus:
    """Validate and order the two tables (see the module docstring for the columns)."""
    _require(documents, documents_label, ("chunk_id", "chunk"))
    _require(queries, queries_label, ("query", "chunk_id"))
    _refuse_pseudo_queries(queries, queries_label, split)
    chunk_ids = documents.column("chunk_id").to_pylist()
    texts = documents.column("chunk").to_pylist()
    if not chunk_ids:
        raise CorpusError(f"{documents_label}: no chunks")
    has_doc = "doc_id" in documents.column_names and "chunk_index" in documents.column_names
    doc_ids: list[Any] = documents.column("doc_id").to_pylist() if has_doc else []
    indices: list[Any] = documents.column("chunk_index").to_pylist() if has_doc else []
    titles = documents.column("title").to_pylist() if "title" in documents.column_names else [None] * len(chunk_ids)
    originals = documents.column("og_chunk").to_pylist() if "og_chunk" in documents.column_names else None
    starts = documents.column("char_start").to_pylist() if "char_start" in documents.column_names else None
    rows = []
    seen: dict[str, int] = {}
    for row, (chunk_id, text) in enumerate(zip(chunk_ids, texts, strict=True)):
        if chunk_id is None or text is None:
            raise CorpusError(f"{documents_label}: row {row}: null chunk_id or chunk")
        if chunk_id in seen:
            raise _bad(documents_label, row, f"duplicate chunk_id {chunk_id!r} (first at row {seen[chunk_id]})")
        seen[chunk_id] = row
        if any(c.isspace() for c in chunk_id):
            raise _bad(documents_label, row, f"chunk_id {chunk_id!r} contains whitespace (TREC files split on it)")
        doc, index = (doc_ids[row], indices[row]) if has_doc else _split_chunk_id(chunk_id, documents_label, row)
        rows.append((doc, int(index), row))
    first_seen = {doc: i for i, (doc, _, _) in reversed(list(enumerate(rows)))}
    order = sorted(range(len(rows)), key=lambda i: (first_seen[rows[i][0]], rows[i][1]))
    ordered = [rows[i][2] for i in order]
    position = {chunk_ids[r]: i for i, r in enumerate(ordered)}

    query_texts = queries.column("query").to_pylist()
    golds = queries.column("chunk_id").to_pylist()
    qids = (
        queries.column("query_id").to_pylist()
        if "query_id" in queries.column_names
        else [f"q{row}" for row in range(queries.num_rows)]
    )
    if not query_texts:
        raise CorpusError(f"{queries_label}: no queries")
    needs_context, notes = _needs_context(queries, queries_label)
    seen_q: dict[str, int] = {}
    gold = np.empty(len(qids), dtype=np.int64)
    for row, (qid, text, chunk_id) in enumerate(zip(qids, query_texts, golds, strict=True)):
        if qid is None or any(c.isspace() for c in str(qid)):
            raise CorpusError(f"{queries_label}: row {row}: query_id {qid!r} is null or contains whitespace")
        if qid in seen_q:
            raise CorpusError(f"{queries_label}: row {row}: duplicate query_id {qid!r} (first at row {seen_q[qid]})")
        seen_q[qid] = row
        if is_blank(text):
            raise CorpusError(f"{queries_label}: row {row}: query {qid!r} is empty (blank)")
        if chunk_id not in position:
            raise _bad(queries_label, row, f"query {qid!r}: gold chunk_id {chunk_id!r} is not in documents")
        gold[row] = position[chunk_id]
    return EvalCorpus(
        name=name,
        source=source,
        split=split,
        chunk_ids=[chunk_ids[r] for r in ordered],
        chunks=[texts[r] for r in ordered],
        doc_ids=[rows[i][0] for i in order],
        chunk_index=np.array([rows[i][1] for i in order], dtype=np.int32),
        titles=[titles[r] for r in ordered],
        query_ids=[str(q) for q in qids],
        queries=query_texts,
        gold=gold,
        contexts=contexts,
        needs_context=needs_context,
        notes=notes,
        og_chunks=[originals[r] if originals[r] is not None else texts[r] for r in ordered] if originals else None,
        char_starts=[starts[r] for r in ordered] if starts else None,
    )


def _needs_context(queries: pa.Table, where: str) -> tuple[np.ndarray | None, list[str]]:
    """The ``needs_context`` labels (bool [Q]) and notes; ``None`` with a note when the column is absent."""
    if "needs_context" not in queries.column_names:
        return None, [
            "queries carry no context-necessity labels (no needs_context column, e.g. an external ConTEB "
            "dataset): the needs_context subset is not reported"
        ]
    values = queries.column("needs_context").to_pylist()
    for row, value in enumerate(values):
        if not isinstance(value, bool):
            raise _bad(where, row, f"needs_context is {value!r}, not true or false")
    return np.array(values, dtype=np.bool_), []


def load_corpus(
    path: str | Path, *, name: str, split: str = "test", contexts: dict[str, str] | None = None
) -> EvalCorpus:
    """The task at ``path`` (folder or hub id), validated; ``contexts`` (chunk_id -> LLM context) when known."""
    documents, doc_label = load_config_table(str(path), "documents", split)
    queries, query_label = load_config_table(str(path), "queries", split)
    return corpus_from_tables(
        documents,
        queries,
        name=name,
        source=str(path),
        split=split,
        documents_label=doc_label,
        queries_label=query_label,
        contexts=contexts,
    )


def read_contexts(path: Path) -> dict[str, str] | None:
    """``chunk_id -> context`` from a ``chunk_contexts`` stage table, or None when the file is absent or empty."""
    if not path.is_file():
        return None
    table = pq.read_table(path, columns=["chunk_id", "context"])
    if table.num_rows == 0:
        return None
    return dict(zip(table.column("chunk_id").to_pylist(), table.column("context").to_pylist(), strict=True))
