"""Applying review decisions to stage tables: what the benchmark may use.

A :class:`Decision` per reviewed object id (chunk id or query id) comes from the review store.
Rules (per kind):

* ``reformulation``: accepted -> the proposed rewrite; edited -> the reviewer's text; rejected ->
  the original chunk. Chunks that were never up for review (first chunks, method ``unchanged``)
  pass through. With ``on_reject: drop_queries`` the queries whose gold chunk's rewrite was
  rejected are left out of the benchmark too (:func:`queries_after_rejections`; with
  ``on_reject: original`` they stay).
* ``synthetic_query``: accepted -> kept; edited -> kept with the reviewer's query text; rejected
  -> left out.
* ``pairing``: accepted -> kept; edited -> the reviewer's comma-separated chunk ids (each must be a
  chunk of the query's document); rejected -> left out.
* an item whose LLM answer failed in those two stages proposes nothing (:class:`FailedItem`): edited -> a row
  with what the person supplied; rejected -> left out (as the stage left it).

Any item still pending is an error: the review gate (a blocking asset check) runs first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from conteb.ids import parse_chunk_id
from conteb.names import Pairing, ReviewKind
from conteb.schemas import REVIEWED_CHUNKS
from review.model import REVIEW_COMMAND, is_auto_reviewer

DROP_QUERIES = "drop_queries"
"""The ``review.on_reject`` setting that leaves out the queries of chunks whose rewrite was rejected."""


@dataclass(frozen=True)
class Decision:
    """A reviewed object's decision, as the review store holds it."""

    status: str  # pending | accepted | rejected | edited
    final_text: str | None  # edited text, or the accepted proposal
    reviewer: str | None


class PendingReviewError(RuntimeError):
    """Some items have no decision yet."""


@dataclass
class Reviewed:
    """A stage table with the decisions applied, and how many rows ended in each review status."""

    table: pa.Table
    stats: dict[str, int] = field(default_factory=dict)


def _require_decided(kind: str, decisions: Mapping[str, Decision], ids: list[str]) -> None:
    pending = [
        object_id for object_id in ids if decisions.get(object_id, Decision("pending", None, None)).status == "pending"
    ]
    if pending:
        raise PendingReviewError(
            f"{len(pending)} {kind} items still pending review (e.g. {pending[:3]}): decide them in the review "
            f"queue (`{REVIEW_COMMAND}`) first"
        )


def apply_reformulation_reviews(reformulated: pa.Table, decisions: Mapping[str, Decision]) -> Reviewed:
    """``REVIEWED_CHUNKS``: each chunk's final text after review (rules in the module doc)."""
    rows = reformulated.to_pylist()
    under_review = [row["chunk_id"] for row in rows if row["method"] != "unchanged"]
    _require_decided(ReviewKind.REFORMULATION, decisions, under_review)
    result = Reviewed(
        REVIEWED_CHUNKS.empty_table(), dict.fromkeys(("accepted", "edited", "rejected", "not_reviewed"), 0)
    )
    for row in rows:
        decision = decisions.get(row["chunk_id"]) if row["method"] != "unchanged" else None
        if decision is None:
            row.update(review_status="not_reviewed", reviewer=None)
        else:
            row.update(review_status=decision.status, reviewer=decision.reviewer)
            if decision.status == "rejected":
                row["chunk"] = row["og_chunk"]
            else:
                row["chunk"] = decision.final_text
        result.stats[row["review_status"]] += 1
    result.table = pa.Table.from_pylist(rows, schema=REVIEWED_CHUNKS)
    return result


FAILURE_DECISIONS = {
    "accepted": "accepted the fallback (the mask)",
    "edited": "edited",
    "rejected": "rejected (the original chunk kept)",
}
"""How the dataset card names each decision on a chunk whose LLM rewrite failed (:func:`llm_failure_counts`)."""


def llm_failure_counts(reviewed: pa.Table) -> dict[str, int]:
    """The dataset card's rows for the chunks of ``reviewed`` (``REVIEWED_CHUNKS``) whose LLM rewrite failed or was
    refused (``llm_failure`` set): ``LLM failures decided by a person`` and, per decision that happened, ``... :
    accepted the fallback (the mask)`` / ``edited`` / ``rejected (the original chunk kept)``; a failure decided
    automatically (only a store from before that rule could hold one) is counted apart. Empty when none failed."""
    if "llm_failure" not in reviewed.column_names or "review_status" not in reviewed.column_names:
        return {}
    columns = ("llm_failure", "review_status", "reviewer")
    failed = [(status, reviewer) for reason, status, reviewer in zip(*(reviewed.column(c).to_pylist() for c in columns),
                                                                     strict=True) if reason]  # fmt: skip
    if not failed:
        return {}
    by_person = [status for status, reviewer in failed if reviewer is not None and not is_auto_reviewer(reviewer)]
    counts = {"LLM failures decided by a person": len(by_person)}
    for status, words in FAILURE_DECISIONS.items():
        if status in by_person:
            counts[f"LLM failures decided by a person: {words}"] = by_person.count(status)
    if len(by_person) < len(failed):
        counts["LLM failures decided automatically (before that was refused)"] = len(failed) - len(by_person)
    return counts


@dataclass(frozen=True)
class FailedItem:
    """A review item that proposes nothing because its LLM answer failed (method
    :data:`curation.review_items.NO_PROPOSAL`): its object id, document and context, from which the row is built
    when a person supplies what is missing."""

    object_id: str
    doc_id: str
    context: Mapping[str, Any]


SUPPLIED_SOURCE = "review"
"""The ``source`` of a synthetic query a person wrote where the LLM failed (:func:`apply_query_reviews`)."""


def person_supplied_counts(queries: pa.Table, synthetic: pa.Table | None) -> dict[str, int]:
    """The dataset card's rows for what people supplied where the LLM failed and the stage had no fallback: LLM
    pairings they gave (``pairing`` llm with no model) and synthetic queries they wrote (source
    :data:`SUPPLIED_SOURCE`); only those that happened."""
    counts = {}
    if "model" in queries.column_names:
        rows = zip(queries.column("pairing").to_pylist(), queries.column("model").to_pylist(), strict=True)
        paired = sum(pairing == Pairing.LLM and model is None for pairing, model in rows)
        if paired:
            counts["LLM failures decided by a person: pairings given"] = paired
    if synthetic is not None:
        written = synthetic.column("source").to_pylist().count(SUPPLIED_SOURCE)
        if written:
            counts["LLM failures decided by a person: synthetic queries written"] = written
    return counts


def apply_query_reviews(
    kind: str, queries: pa.Table, decisions: Mapping[str, Decision], failed: Sequence[FailedItem] = ()
) -> Reviewed:
    """Reviewed ``synthetic_query`` or ``pairing`` rows (``PAIRED_QUERIES`` shape), rejected ones left out; then a
    row for each ``failed`` item (not in ``queries``) a person edited: the query they wrote for the item's chunk
    (``synthetic_query``: no answer, source :data:`SUPPLIED_SOURCE`), or the chunk ids they gave the item's query
    (``pairing``); a rejected one is left out, as the stage left it; it cannot have been accepted (ValueError)."""
    rows = queries.to_pylist()
    present = {row["query_id"] for row in rows}
    supplied = [item for item in failed if item.object_id not in present]
    _require_decided(kind, decisions, [row["query_id"] for row in rows] + [item.object_id for item in supplied])
    kept, stats = [], dict.fromkeys(("accepted", "edited", "rejected"), 0)
    for row in rows:
        decision = decisions[row["query_id"]]
        stats[decision.status] += 1
        if decision.status == "rejected":
            continue
        if decision.status == "edited":
            if kind == ReviewKind.SYNTHETIC_QUERY:
                row["query"] = decision.final_text
            else:
                row["chunk_ids"] = _edited_chunk_ids(row, decision.final_text or "")
                row["chunk_id"] = row["chunk_ids"][0]
        kept.append(row)
    for item in supplied:
        decision = decisions[item.object_id]
        stats[decision.status] += 1
        if decision.status == "rejected":
            continue
        if decision.status != "edited" or not decision.final_text:
            raise ValueError(f"{kind} item {item.object_id}: it proposes nothing (its LLM answer failed), so only an "
                             f"edit or a rejection can decide it, not {decision.status!r}")  # fmt: skip
        kept.append(_supplied_row(kind, item, decision.final_text))
    return Reviewed(pa.Table.from_pylist(kept, schema=queries.schema) if kept else queries.schema.empty_table(), stats)


def _supplied_row(kind: str, item: FailedItem, text: str) -> dict[str, Any]:
    """The row of a :class:`FailedItem` a person edited with ``text`` (rules in :func:`apply_query_reviews`)."""
    context = item.context
    row: dict[str, Any] = {"query_id": item.object_id, "doc_id": item.doc_id, "pairing": Pairing.LLM}
    if kind == ReviewKind.SYNTHETIC_QUERY:
        chunk_id = context["chunk_id"]
        return row | {"query": text.strip(), "chunk_id": chunk_id, "chunk_ids": [chunk_id], "source": SUPPLIED_SOURCE}
    row |= {"query": context["query"], "answer": context.get("answer"), "source": context["source"]}
    row["chunk_ids"] = _edited_chunk_ids(row, text)
    row["chunk_id"] = row["chunk_ids"][0]
    return row


def _edited_chunk_ids(row: dict, text: str) -> list[str]:
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids:
        raise ValueError(f"query {row['query_id']}: the edited pairing names no chunk")
    for chunk_id in ids:
        doc_id, _ = parse_chunk_id(chunk_id)
        if doc_id != row["doc_id"]:
            raise ValueError(f"query {row['query_id']}: edited chunk {chunk_id} is not in document {row['doc_id']}")
    return ids


def drop_queries_of_chunks(queries: pa.Table, chunk_ids: set[str]) -> pa.Table:
    """``queries`` without those whose gold chunk is in ``chunk_ids``."""
    if not chunk_ids:
        return queries
    return queries.filter(pc.invert(pc.is_in(queries.column("chunk_id"), value_set=pa.array(sorted(chunk_ids)))))


def queries_after_rejections(queries: pa.Table, reviewed_chunks: pa.Table | None, on_reject: str) -> pa.Table:
    """``queries`` without those whose gold chunk's rewrite was rejected (``review_status`` of
    ``reviewed_chunks``, ``REVIEWED_CHUNKS``) when ``on_reject`` is :data:`DROP_QUERIES`; otherwise, or
    without reviewed chunks (no reformulation), ``queries`` as they are."""
    if reviewed_chunks is None or on_reject != DROP_QUERIES:
        return queries
    statuses = zip(
        reviewed_chunks.column("chunk_id").to_pylist(), reviewed_chunks.column("review_status").to_pylist(), strict=True
    )
    return drop_queries_of_chunks(queries, {chunk_id for chunk_id, status in statuses if status == "rejected"})
