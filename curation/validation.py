"""Invariants of a published ConTEB task, as pure functions (the Dagster asset checks call them).

Each check returns a :class:`CheckOutcome`: whether it passed, how many rows fail and a few
examples that name the offending ids.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa

from conteb.ids import CHUNK_ID_PATTERN
from conteb.names import Pairing
from conteb.text import is_blank

MAX_EXAMPLES = 5


@dataclass(frozen=True)
class CheckOutcome:
    passed: bool
    failures: int
    checked: int
    examples: list[str] = field(default_factory=list)


def _outcome(bad: list[str], checked: int) -> CheckOutcome:
    return CheckOutcome(not bad, len(bad), checked, bad[:MAX_EXAMPLES])


def chunk_ids_unique_and_well_formed(documents: pa.Table) -> CheckOutcome:
    """Every ``chunk_id`` matches ``<doc_id>_<chunk_index>`` for its row, and none repeats."""
    bad = []
    rows = zip(*(documents.column(c).to_pylist() for c in ("chunk_id", "doc_id", "chunk_index")), strict=True)
    for cid, doc_id, index in rows:
        match = CHUNK_ID_PATTERN.match(cid)
        if match is None or match["doc_id"] != doc_id or int(match["index"]) != index:
            bad.append(f"{cid!r}: not '<doc_id>_<chunk_index>' for doc {doc_id!r}, index {index}")
    duplicates = [cid for cid, n in Counter(documents.column("chunk_id").to_pylist()).items() if n > 1]
    bad.extend(f"{cid!r}: duplicate chunk id" for cid in duplicates)
    return _outcome(bad, documents.num_rows)


def query_chunk_ids_exist(queries: pa.Table, documents: pa.Table) -> CheckOutcome:
    """Every query's ``chunk_id`` and each of its ``chunk_ids`` is a chunk of ``documents``."""
    known = set(documents.column("chunk_id").to_pylist())
    bad = []
    for qid, cid, cids in zip(
        *(queries.column(c).to_pylist() for c in ("query_id", "chunk_id", "chunk_ids")), strict=True
    ):
        missing = [c for c in [cid, *cids] if c not in known]
        if missing:
            bad.append(f"query {qid!r}: unknown chunk(s) {sorted(set(missing))}")
        elif cid not in cids:
            bad.append(f"query {qid!r}: chunk_id {cid!r} not among its chunk_ids")
    return _outcome(bad, queries.num_rows)


def chunks_within_size(documents: pa.Table, chunk_size: int) -> CheckOutcome:
    """No ``og_chunk`` is longer than ``chunk_size`` characters."""
    bad = [
        f"{cid!r}: {len(text)} characters > {chunk_size}"
        for cid, text in zip(
            documents.column("chunk_id").to_pylist(), documents.column("og_chunk").to_pylist(), strict=True
        )
        if len(text) > chunk_size
    ]
    return _outcome(bad, documents.num_rows)


def chunks_match_source(documents: pa.Table, source_documents: pa.Table) -> CheckOutcome:
    """``og_chunk == text[char_start:char_end]`` of its source document, for every chunk."""
    texts = dict(
        zip(source_documents.column("doc_id").to_pylist(), source_documents.column("text").to_pylist(), strict=True)
    )
    bad = []
    columns = ("chunk_id", "doc_id", "char_start", "char_end", "og_chunk")
    for cid, doc_id, start, end, chunk in zip(*(documents.column(c).to_pylist() for c in columns), strict=True):
        text = texts.get(doc_id)
        if text is None:
            bad.append(f"{cid!r}: source document {doc_id!r} missing")
        elif text[start:end] != chunk:
            bad.append(f"{cid!r}: differs from text[{start}:{end}] of {doc_id!r}")
    return _outcome(bad, documents.num_rows)


def no_empty_chunks(documents: pa.Table) -> CheckOutcome:
    """Neither ``chunk`` nor ``og_chunk`` is blank (:func:`conteb.text.is_blank`)."""
    bad = [
        f"{cid!r}: empty text"
        for cid, chunk, og in zip(
            *(documents.column(c).to_pylist() for c in ("chunk_id", "chunk", "og_chunk")), strict=True
        )
        if is_blank(chunk) or is_blank(og)
    ]
    return _outcome(bad, documents.num_rows)


def no_empty_queries(queries: pa.Table) -> CheckOutcome:
    """No ``query`` is blank (:func:`conteb.text.is_blank`: empty, whitespace or invisible characters only)."""
    bad = [
        f"query {qid!r}: empty text"
        for qid, text in zip(queries.column("query_id").to_pylist(), queries.column("query").to_pylist(), strict=True)
        if is_blank(text)
    ]
    return _outcome(bad, queries.num_rows)


def splits_by_document(documents: dict[str, pa.Table], queries: dict[str, pa.Table]) -> CheckOutcome:
    """Document-level splits hold: every split (``{split: table}``) has documents, no document is in
    two splits, and each query's document (``doc_id``, else from ``chunk_id``) is in the query's split."""
    bad = []
    seen: dict[str, str] = {}
    for split, table in documents.items():
        if table.num_rows == 0:
            bad.append(f"split {split!r}: no documents")
        for doc_id in dict.fromkeys(table.column("doc_id").to_pylist()):
            if doc_id in seen:
                bad.append(f"document {doc_id!r}: in split {seen[doc_id]!r} and in split {split!r}")
            else:
                seen[doc_id] = split
    checked = sum(t.num_rows for t in documents.values())
    for split, table in queries.items():
        checked += table.num_rows
        doc_ids = (
            table.column("doc_id").to_pylist()
            if "doc_id" in table.column_names
            else [cid.rsplit("_", 1)[0] for cid in table.column("chunk_id").to_pylist()]
        )
        for qid, doc_id in zip(table.column("query_id").to_pylist(), doc_ids, strict=True):
            if seen.get(doc_id) != split:
                where = f"split {seen[doc_id]!r}" if doc_id in seen else "no split"
                bad.append(f"query {qid!r} (split {split!r}): its document {doc_id!r} is in {where}")
    return _outcome(bad, checked)


def pseudo_queries_only_in(queries: dict[str, pa.Table], split: str | None) -> CheckOutcome:
    """No pseudo-query (``pairing`` = :attr:`conteb.names.Pairing.PSEUDO`) of ``queries`` (``{split: table}``) is
    outside ``split``, the one split a task's ``pseudo_queries`` names (None: the task has none, so none may be
    anywhere): pseudo-queries are training data and never land in an evaluated split."""
    bad = []
    checked = 0
    for name, table in queries.items():
        checked += table.num_rows
        if name == split or "pairing" not in table.column_names:
            continue
        for qid, pairing in zip(table.column("query_id").to_pylist(), table.column("pairing").to_pylist(), strict=True):
            if pairing == Pairing.PSEUDO:
                allowed = f"only split {split!r} may hold them" if split else "the task declares no pseudo_queries"
                bad.append(f"query {qid!r}: a pseudo-query in split {name!r} ({allowed})")
    return _outcome(bad, checked)
