"""Review items: what a person verifies or corrects in the review queue (schema ``REVIEW_ITEMS``).

Every kind of item (:class:`conteb.names.ReviewKind`: ``reformulation``, ``pairing``,
``synthetic_query``) is built by :func:`review_item`, so ids, flags and the proposal hash follow
one rule:

* ``item_id`` is ``f"{task}:{kind}:{object_id}"`` (stable across runs);
* ``context`` is a JSON object (keys sorted, UTF-8 kept) or null;
* ``flagged`` is true exactly when ``flags`` is non-empty;
* ``proposed_sha256`` is :func:`review.model.proposal_sha256` of ``proposed``, so the store can
  tell when a re-run proposes something new for an item already reviewed;
* an item whose LLM answer failed or was refused gets :func:`review.model.llm_failure_flag` (the reason in
  words) first among its flags, and the stage's fallback as its proposal: it is flagged, and the review gate
  never accepts it automatically (:mod:`review.gate`); where the stage has no fallback (a synthetic query, an LLM
  pairing), the item proposes nothing (method :data:`NO_PROPOSAL`, ``proposed`` empty): a person edits or rejects.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from conteb.names import ReviewKind
from conteb.schemas import REVIEW_ITEMS, table_from_rows
from curation.lookups import chunk_texts
from curation.quarantine import QuarantineReason
from review.flags import LOST_ANSWERS, leak_flag, lost_answer_flag, lost_answer_queries
from review.model import llm_failure_flag, proposal_sha256

REWRITTEN_METHODS = ("llm", "mask")
"""Reformulation methods that changed (or tried to change) a chunk and so need review."""

NO_PROPOSAL = "none"
"""The ``method`` of an item whose LLM answer failed in a stage with no fallback (a synthetic query, an LLM
pairing): ``proposed`` is empty; a person writes what is missing (edit) or leaves it out (reject)."""


def review_item(
    task: str,
    kind: ReviewKind | str,
    object_id: str,
    doc_id: str,
    proposed: str,
    method: str,
    *,
    title: str | None = None,
    original: str | None = None,
    context: Mapping[str, Any] | None = None,
    flags: Sequence[str] = (),
) -> dict[str, Any]:
    """One ``REVIEW_ITEMS`` row (rules in the module doc)."""
    return {
        "item_id": f"{task}:{kind}:{object_id}",
        "task": task,
        "kind": kind,
        "object_id": object_id,
        "doc_id": doc_id,
        "title": title,
        "original": original,
        "proposed": proposed,
        "context": None if context is None else json.dumps(dict(context), sort_keys=True, ensure_ascii=False),
        "flags": list(flags),
        "flagged": bool(flags),
        "method": method,
        "proposed_sha256": proposal_sha256(proposed),
    }


def review_items_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """A ``REVIEW_ITEMS`` table of ``rows`` (from :func:`review_item`)."""
    return table_from_rows(list(rows), REVIEW_ITEMS)


def reformulation_flags(leaked_mentions: Sequence[str], lost_answers: Sequence[str]) -> list[str]:
    """``leak:<mention>`` for each leaked mention, then ``lost_answer:<answer>`` for each lost answer
    (:mod:`review.flags`)."""
    return [leak_flag(mention) for mention in leaked_mentions] + [lost_answer_flag(answer) for answer in lost_answers]


def _neighbours(chunks: pa.Table) -> dict[str, tuple[str | None, str | None]]:
    """``chunk_id -> (previous og_chunk, next og_chunk)`` within the same document (None at the ends)."""
    columns = (chunks.column(name).to_pylist() for name in ("doc_id", "chunk_index", "chunk_id", "og_chunk"))
    ordered = sorted(zip(*columns, strict=True), key=lambda row: (row[0], row[1]))
    neighbours: dict[str, tuple[str | None, str | None]] = {}
    for position, (doc_id, _, cid, _) in enumerate(ordered):
        previous = ordered[position - 1] if position > 0 and ordered[position - 1][0] == doc_id else None
        following = (
            ordered[position + 1] if position + 1 < len(ordered) and ordered[position + 1][0] == doc_id else None
        )
        neighbours[cid] = (previous[3] if previous else None, following[3] if following else None)
    return neighbours


def _queries_by_chunk(queries: pa.Table | None) -> dict[str, list[dict[str, Any]]]:
    """``chunk_id -> rows`` (query_id, query, answer) of ``queries`` (``PAIRED_QUERIES``; none for None)."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    if queries is not None:
        for row in queries.select(["chunk_id", "query_id", "query", "answer"]).to_pylist():
            grouped.setdefault(row["chunk_id"], []).append(row)
    return grouped


def review_items_from_reformulations(
    task: str, reformulated: pa.Table, chunks: pa.Table, titles: Mapping[str, str], queries: pa.Table | None = None
) -> pa.Table:
    """``REVIEW_ITEMS`` for the rewritten chunks of ``reformulated`` (``REFORMULATED_CHUNKS``).

    One item per row whose method is ``llm`` or ``mask`` (first chunks, method ``unchanged``, get
    none), in input order: kind ``reformulation``, object = the chunk id, ``original`` = og_chunk,
    ``proposed`` = the rewrite (the mask where the LLM's rewrite failed or was refused: ``llm_failure``, whose
    reason leads the flags), ``flags`` from :func:`reformulation_flags`, ``title`` from
    ``titles`` (``doc_id -> title``, null when absent). ``context`` holds ``theme``,
    ``chunk_index`` and the original text of the previous and next chunks of the same document
    (``previous_chunk``/``next_chunk``, taken from ``chunks``, ``CHUNKS``; null at the ends); a chunk that lost
    answers also has :data:`review.flags.LOST_ANSWERS`: the queries of ``queries`` (``PAIRED_QUERIES``, paired with
    the chunk) whose answer it lost, so the flag reads "the mask removes the answer of <query_id>".
    """
    neighbours = _neighbours(chunks)
    paired = _queries_by_chunk(queries)
    items = []
    for row in reformulated.to_pylist():
        if row["method"] not in REWRITTEN_METHODS:
            continue
        previous, following = neighbours.get(row["chunk_id"], (None, None))
        context = {
            "theme": row["theme"],
            "chunk_index": row["chunk_index"],
            "previous_chunk": previous,
            "next_chunk": following,
        }
        if row["lost_answers"]:
            context[LOST_ANSWERS] = lost_answer_queries(row["lost_answers"], paired.get(row["chunk_id"], []))
        flags = reformulation_flags(row["leaked_mentions"], row["lost_answers"])
        if row.get("llm_failure"):
            flags.insert(0, llm_failure_flag(row["llm_failure"]))
        items.append(
            review_item(
                task,
                ReviewKind.REFORMULATION,
                row["chunk_id"],
                row["doc_id"],
                row["chunk"],
                row["method"],
                title=titles.get(row["doc_id"]),
                original=row["og_chunk"],
                context=context,
                flags=flags,
            )
        )
    return review_items_table(items)


def review_items_from_synthetic(
    task: str, synthetic: pa.Table, chunks: pa.Table, titles: Mapping[str, str], failures: pa.Table | None = None
) -> pa.Table:
    """``synthetic_query`` items: one per kept synthetic query (``SYNTHETIC_QUERIES``).

    ``proposed`` = the query (an edit rewrites it); ``context`` holds the chunk it should be
    answered by and the LLM's answer; flag ``answer_not_in_chunk`` when the answer is not a span.
    Then, for each chunk of ``failures`` (``SYNTHETIC_QUARANTINE``) whose LLM call failed or was refused, an
    item with nothing to propose (:data:`NO_PROPOSAL`), object ``synth-<chunk_id>-0`` (the id the chunk's first
    query would have), flagged with the reason: a person writes a query for the chunk (edit) or rejects.
    """
    texts = chunk_texts(chunks)
    items = [
        review_item(
            task,
            ReviewKind.SYNTHETIC_QUERY,
            row["query_id"],
            row["doc_id"],
            row["query"],
            "llm",
            title=titles.get(row["doc_id"]),
            context={"chunk_id": row["chunk_id"], "chunk": texts.get(row["chunk_id"]), "answer": row["answer"]},
            flags=[] if row["answer_start"] is not None else ["answer_not_in_chunk"],
        )
        for row in synthetic.to_pylist()
    ]
    for failure in llm_failed_rows(failures):
        chunk_id = failure["object_id"]
        reason = f"the LLM wrote no query for this chunk (write one, or reject): {failure['detail']}"
        context = {"chunk_id": chunk_id, "chunk": texts.get(chunk_id), "answer": None}
        items.append(_failed_item(task, ReviewKind.SYNTHETIC_QUERY, f"synth-{chunk_id}-0", failure, reason, titles,
                                  context))  # fmt: skip
    return review_items_table(items)


def llm_failed_rows(quarantine: pa.Table | None) -> list[dict[str, Any]]:
    """The rows of a stage's ``quarantine`` (``QUARANTINE``) whose LLM call failed or was refused (reason
    ``llm_failed``); none for None."""
    if quarantine is None:
        return []
    return [row for row in quarantine.to_pylist() if row["reason"] == QuarantineReason.LLM_FAILED]


def _failed_item(
    task: str,
    kind: ReviewKind,
    object_id: str,
    failure: Mapping[str, Any],
    reason: str,
    titles: Mapping[str, str],
    context: Mapping[str, Any],
) -> dict[str, Any]:
    """The :data:`NO_PROPOSAL` item of a ``failure`` (a quarantine row), flagged with ``reason``."""
    doc_id = failure["doc_id"] or ""
    return review_item(task, kind, object_id, doc_id, "", NO_PROPOSAL, title=titles.get(doc_id), context=context,
                       flags=[llm_failure_flag(reason)])  # fmt: skip


def review_items_from_llm_pairs(
    task: str,
    llm_pairs: pa.Table,
    chunks: pa.Table,
    titles: Mapping[str, str],
    span_pairs: pa.Table | None = None,
    failures: pa.Table | None = None,
    queries: pa.Table | None = None,
) -> pa.Table:
    """``pairing`` items: one per LLM-paired query (``PAIRED_QUERIES``).

    ``proposed`` = the chunk ids the LLM chose, comma-separated, gold first (an edit replaces
    them); ``original`` = the span method's chunk ids when the task runs both; ``context`` holds
    the query, its answer and the text of the proposed chunks. Flag ``disagrees_with_span`` when
    the span method chose another gold chunk. Then, for each query of ``failures`` (``LLM_PAIRING_QUARANTINE``)
    whose LLM call failed or was refused and that the span method did not pair (a span pairing is published
    instead), an item with nothing to propose (:data:`NO_PROPOSAL`) flagged with the reason, its context the
    query, answer and source from ``queries`` (``SOURCE_QUERIES``): a person gives the chunk ids (edit) or rejects.
    """
    texts = chunk_texts(chunks)
    span = {}
    if span_pairs is not None:
        span = dict(
            zip(span_pairs.column("query_id").to_pylist(), span_pairs.column("chunk_ids").to_pylist(), strict=True)
        )
    items = []
    for row in llm_pairs.to_pylist():
        span_ids = span.get(row["query_id"])
        items.append(
            review_item(
                task,
                ReviewKind.PAIRING,
                row["query_id"],
                row["doc_id"],
                ", ".join(row["chunk_ids"]),
                "llm",
                title=titles.get(row["doc_id"]),
                original=", ".join(span_ids) if span_ids else None,
                context={
                    "query": row["query"],
                    "answer": row["answer"],
                    "chunks": {cid: texts.get(cid) for cid in row["chunk_ids"]},
                },
                flags=["disagrees_with_span"] if span_ids and row["chunk_id"] not in span_ids else [],
            )
        )
    asked = {row["query_id"]: row for row in queries.to_pylist()} if queries is not None else {}
    for failure in llm_failed_rows(failures):
        query = asked.get(failure["object_id"])
        if failure["object_id"] in span or query is None:
            continue
        answer = query["answers"][0]["text"] if query["answers"] else None
        reason = f"the LLM named no chunk for this query (give the chunk ids, or reject): {failure['detail']}"
        context = {"query": query["query"], "answer": answer, "source": query["source"], "chunks": {}}
        items.append(_failed_item(task, ReviewKind.PAIRING, query["query_id"], failure, reason, titles, context))
    return review_items_table(items)
