"""The review gate's rules (``review.gate``): automatic acceptances and a task's completion key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from curation.review_items import review_item, review_items_table
from review.gate import AutoAccepted, auto_accept, auto_acceptances, completion_key
from review.model import QueueStats
from review.store import ReviewStore

TASK, KIND = "geo", "reformulation"


def _row(object_id: str, proposed: str, original: str | None, method: str = "llm", flagged: bool = False) -> dict:
    flags = ["leak:Lyon"] if flagged else []
    return review_item(TASK, KIND, object_id, "lyon", proposed, method, original=original, flags=flags)


ROWS = [
    _row("same", "Lyon.", "Lyon."),  # unchanged, unflagged: nothing to verify
    _row("same_flagged", "Lyon.", "Lyon.", flagged=True),  # unchanged but flagged: a person looks
    _row("new", "A city.", None),  # no original (a new object): never "unchanged"
    _row("rewritten", "The city.", "Lyon."),
    _row("masked", "The subject.", "Lyon.", method="mask", flagged=True),
    _row("masked_same", "Lyon.", "Lyon.", method="mask"),
]


def test_acceptances_follow_the_settings_in_order() -> None:
    [unchanged, masked] = auto_acceptances(ROWS, unchanged=True, methods=["mask"])
    assert (unchanged.reviewer, unchanged.item_ids, unchanged.method) == (
        "auto",
        [f"{TASK}:{KIND}:same", f"{TASK}:{KIND}:masked_same"],
        None,
    )
    assert (masked.reviewer, masked.item_ids, masked.method) == (
        "auto:mask",
        [f"{TASK}:{KIND}:masked", f"{TASK}:{KIND}:masked_same"],  # flagged or not
        "mask",
    )
    assert auto_acceptances(ROWS, unchanged=False, methods=()) == []
    [nothing] = auto_acceptances(ROWS, unchanged=False, methods=["llm-free"])
    assert nothing.item_ids == []


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ReviewStore]:
    with ReviewStore(tmp_path / "review.sqlite") as opened:
        yield opened


def test_auto_accept_decides_only_pending_items_and_counts_each_rule(store: ReviewStore) -> None:
    items = review_items_table(ROWS)
    store.push(items)
    person = store.get(f"{TASK}:{KIND}:masked")
    store.decide(person.item_id, "reject", "ana", person.version)  # a person's decision stays
    accepted = auto_accept(store, TASK, KIND, items, unchanged=True, methods=["mask"])
    assert accepted == AutoAccepted(unchanged=2, by_method=0)  # masked_same went to the first rule
    reviewers = {item.object_id: (item.status, item.reviewer) for item in store.items(task=TASK, kind=KIND)}
    assert reviewers["same"] == reviewers["masked_same"] == ("accepted", "auto")
    assert reviewers["masked"] == ("rejected", "ana")
    assert reviewers["same_flagged"] == reviewers["new"] == reviewers["rewritten"] == ("pending", None)
    assert auto_accept(store, TASK, KIND, items, unchanged=True, methods=["mask"]) == AutoAccepted(0, 0)


def test_auto_accept_by_method_only(store: ReviewStore) -> None:
    items = review_items_table(ROWS)
    store.push(items)
    assert auto_accept(store, TASK, KIND, items, unchanged=False, methods=["mask"]) == AutoAccepted(0, 2)
    assert store.get(f"{TASK}:{KIND}:masked").reviewer == "auto:mask"


def _queue(kind: str, total: int, pending: int, revision: int) -> QueueStats:
    return QueueStats(TASK, kind, pending, total - pending, 0, 0, total, 0, revision)


def test_completion_key_waits_for_every_queue_and_names_each_revision() -> None:
    assert completion_key(TASK, []) is None  # nothing pushed yet
    assert completion_key(TASK, [_queue("reformulation", 0, 0, 0)]) is None  # empty queues: nothing to wait for
    done, waiting = _queue("reformulation", 3, 0, 7), _queue("synthetic_query", 2, 1, 4)
    assert completion_key(TASK, [done, waiting]) is None
    finished = _queue("synthetic_query", 2, 0, 5)
    assert completion_key(TASK, [done, finished]) == "geo:reformulation@7,synthetic_query@5"
    assert completion_key(TASK, [done, _queue("synthetic_query", 0, 0, 1)]) == "geo:reformulation@7,synthetic_query@1"
