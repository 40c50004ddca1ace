"""The review gate's rules (``review.gate``): automatic acceptances and a task's completion key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from curation.review_items import review_item, review_items_table
from review.gate import AutoAccepted, auto_accept, auto_acceptances, completion_key
from review.model import InvalidDecisionError, QueueStats, llm_failure_flag
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


FAILED = llm_failure_flag("the LLM call failed after 5 tries: InternalServerError: Error code: 500")


def test_no_rule_accepts_an_item_whose_llm_answer_failed() -> None:
    failed = [
        review_item(TASK, KIND, "failed_same", "lyon", "Lyon.", "mask", original="Lyon.", flags=[FAILED]),
        review_item(TASK, KIND, "failed_masked", "lyon", "The subject.", "mask", original="Lyon.", flags=[FAILED]),
    ]
    plans = auto_acceptances([*ROWS, *failed], unchanged=True, methods=["mask"])
    assert all(
        f"{TASK}:{KIND}:{name}" not in plan.item_ids for plan in plans for name in ("failed_same", "failed_masked")
    )
    assert plans == auto_acceptances(ROWS, unchanged=True, methods=["mask"])


def test_reruns_keep_a_persons_decision_on_a_failed_item_and_never_decide_it_automatically(store: ReviewStore) -> None:
    item_id = f"{TASK}:{KIND}:c1"
    before = review_item(TASK, KIND, "c1", "lyon", "Lyon.", "mask", original="Lyon.")  # a failure, as main pushed it
    store.push([before])
    assert auto_accept(store, TASK, KIND, review_items_table([before]), unchanged=True, methods=[]).unchanged == 1

    # Pushed with its failure flag, the automatic acceptance does not stand: pending, flagged, counted.
    failed = review_items_table([review_item(TASK, KIND, "c1", "lyon", "Lyon.", "mask", original="Lyon.",
                                             flags=[FAILED])])  # fmt: skip
    assert store.push(failed).reopened == 1
    assert auto_accept(store, TASK, KIND, failed, unchanged=True, methods=["mask"]) == AutoAccepted(0, 0)
    item = store.get(item_id)
    assert (item.status, item.flags, item.reviewer) == ("pending", [FAILED], None)
    assert store.audit(item_id)[-1].note == "the LLM answer failed: an automatic decision does not stand for it"
    [stats] = store.stats(task=TASK, kind=KIND)
    assert (stats.pending, stats.flagged_pending, stats.failed_pending) == (1, 1, 1)

    # A person's decision stays through a rerun that fails the same way.
    store.decide(item_id, "edit", "ana", item.version, edited_text="The city.")
    assert store.push(failed).unchanged == 1
    assert (store.get(item_id).status, store.get(item_id).edited_text) == ("edited", "The city.")
    assert store.stats(task=TASK, kind=KIND)[0].failed_pending == 0

    # A later successful answer is a new proposal: the item reopens for a person (the edit stays in the audit log),
    # and no automatic rule decides it, not even an unchanged, unflagged one.
    answered = review_items_table([review_item(TASK, KIND, "c1", "lyon", "Lyon.!", "llm", original="Lyon.!")])
    assert store.push(answered).reopened == 1
    assert auto_accept(store, TASK, KIND, answered, unchanged=True, methods=["llm"]) == AutoAccepted(0, 0)
    assert store.get(item_id).status == "pending" and store.person_decided(TASK, KIND) == {item_id}
    assert [(e.action, e.reviewer, e.text) for e in store.audit(item_id)][-2] == ("edit", "ana", "The city.")


def test_an_item_that_proposes_nothing_can_be_edited_or_rejected_never_accepted(store: ReviewStore) -> None:
    nothing = review_item(TASK, "synthetic_query", "synth-c1-0", "lyon", "", "none", flags=[FAILED])
    other = review_item(TASK, "synthetic_query", "synth-c2-0", "lyon", "Where?", "llm", flags=[FAILED])
    store.push([nothing, other])
    item_id = nothing["item_id"]
    with pytest.raises(InvalidDecisionError, match=r"proposes nothing .*edit it with what is missing, or reject it"):
        store.decide(item_id, "accept", "ana", 1)
    assert store.bulk_decide("accept", "ana", TASK, "synthetic_query") == 1  # the other one only
    assert store.get(item_id).status == "pending"
    assert store.decide(item_id, "edit", "ana", 1, edited_text="Which chunk is this?").status == "edited"


def test_an_unchanged_proposal_gets_the_flags_of_the_last_llm_outcome_and_keeps_its_decision(
    store: ReviewStore,
) -> None:
    refused = llm_failure_flag("the LLM's rewrite was refused: the rewrite has 4 characters")
    item_id = f"{TASK}:{KIND}:c1"
    store.push([review_item(TASK, KIND, "c1", "lyon", "Lyon.", "mask", original="Lyon.", flags=[FAILED])])
    store.push([review_item(TASK, KIND, "c1", "lyon", "Lyon.", "mask", original="Lyon.", flags=[refused])])
    assert (store.get(item_id).flags, store.get(item_id).version) == ([refused], 1)
    store.decide(item_id, "accept", "ana", 1)
    # The LLM now answers with the same text as the fallback: the decision stays, the failure flag goes.
    report = store.push([review_item(TASK, KIND, "c1", "lyon", "Lyon.", "llm", original="Lyon.")])
    item = store.get(item_id)
    assert report.unchanged == 1 and (item.status, item.reviewer, item.flags, item.flagged) == (
        "accepted", "ana", [], False
    )  # fmt: skip
    assert store.stats(task=TASK, kind=KIND)[0].failed_pending == 0
