"""The review gate's rules, applied by the pipeline: which pushed items need no person, and when a task's
review is complete.

Contracts:

* Automatic acceptances (a task's ``review:`` settings) come in this order, each as a bulk accept
  of the queue's *pending* items (an item already decided, by a person or by an earlier rule,
  keeps its decision; each accepted item gets its own versioned decision and audit row):
  ``unchanged`` (``auto_accept_unchanged``): every unflagged item whose proposal equals its
  original text (nothing to verify), by reviewer ``auto``; then, per method of
  ``auto_accept_methods``, every item with that method, flagged or not, by ``auto:<method>``
  (:func:`review.model.auto_reviewer`).
* No rule accepts an item whose LLM answer failed or was refused (:func:`review.model.is_llm_failure` of its
  flags: it waits for a person, flagged, with the stage's fallback as its proposal), nor an item a person has
  decided at any version (:meth:`review.queries.QueueQueries.person_decided`: when a rerun brings a new
  proposal, e.g. the LLM's answer to an item that had failed, a person decides again, never the pipeline).
* A task's review is complete when at least one of its queues holds items and none has a pending
  one; its completion key is ``<task>:<kind>@<revision>,...`` over its queues in the given order,
  so a new push or a changed decision that completes the queues again gives a new key.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from review.model import QueueStats, auto_reviewer, is_llm_failure
from review.store import ReviewStore


@dataclass(frozen=True)
class AutoAcceptance:
    """Items to accept under ``reviewer``; ``method`` is None for the unchanged proposals."""

    reviewer: str
    item_ids: list[str]
    method: str | None


@dataclass(frozen=True)
class AutoAccepted:
    """How many items each rule accepted: ``unchanged`` proposals, and those accepted ``by_method``."""

    unchanged: int
    by_method: int


def auto_acceptances(
    items: Iterable[Mapping[str, Any]],
    *,
    unchanged: bool,
    methods: Sequence[str],
    person_decided: Collection[str] = (),
) -> list[AutoAcceptance]:
    """The acceptances of the module doc for ``REVIEW_ITEMS`` rows (``item_id``, ``original``, ``proposed``,
    ``flags``, ``flagged``, ``method``), in the order they apply; a rule with no matching item still has its
    entry. ``person_decided``: the ids of items a person has decided (never accepted automatically)."""
    decided = set(person_decided)
    rows = [row for row in items if row["item_id"] not in decided and not is_llm_failure(row["flags"])]
    plans = []
    if unchanged:
        same = [
            row["item_id"]
            for row in rows
            if row["original"] is not None and row["proposed"] == row["original"] and not row["flagged"]
        ]
        plans.append(AutoAcceptance(auto_reviewer(), same, None))
    for method in methods:
        ids = [row["item_id"] for row in rows if row["method"] == method]
        plans.append(AutoAcceptance(auto_reviewer(method), ids, method))
    return plans


def auto_accept(
    store: ReviewStore, task: str, kind: str, items: pa.Table, *, unchanged: bool, methods: Sequence[str]
) -> AutoAccepted:
    """Apply :func:`auto_acceptances` of ``items`` (just pushed) to the ``task``/``kind`` queue of ``store``."""
    columns = ["item_id", "original", "proposed", "flags", "flagged", "method"]
    counts = {"unchanged": 0, "by_method": 0}
    rows = items.select(columns).to_pylist()
    decided = store.person_decided(task, kind)
    for plan in auto_acceptances(rows, unchanged=unchanged, methods=methods, person_decided=decided):
        if plan.item_ids:
            accepted = store.bulk_decide("accept", plan.reviewer, task, kind, ids=plan.item_ids)
            counts["unchanged" if plan.method is None else "by_method"] += accepted
    return AutoAccepted(**counts)


def completion_key(task: str, queues: Sequence[QueueStats]) -> str | None:
    """``task``'s completion key over its ``queues`` (those pushed so far), or None while its review waits
    (no queue holds items, or one has a pending item)."""
    if not any(queue.total for queue in queues) or any(queue.pending for queue in queues):
        return None
    return task + ":" + ",".join(f"{queue.kind}@{queue.revision}" for queue in queues)
