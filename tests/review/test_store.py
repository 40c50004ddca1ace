"""The review store: idempotent pushes, versioned decisions, conflicts, undo, audit, files, agreement, crashes."""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from curation.review_items import review_item, review_items_table
from review.model import ConflictError, InvalidDecisionError, ReviewItem, UnknownItemError
from review.store import ReviewStore

ROOT = Path(__file__).resolve().parents[2]
TASK, KIND = "geo", "reformulation"
FLAGGED = {"c1", "c3"}


def _id(object_id: str, kind: str = KIND) -> str:
    return f"{TASK}:{kind}:{object_id}"


def _items(changed: dict[str, str] | None = None) -> pa.Table:
    """Six reformulation items (c1, c3 flagged; c0's proposal spans two lines) and two synthetic queries."""
    changed = changed or {}
    rows = [
        review_item(
            TASK,
            KIND,
            f"c{i}",
            "lyon",
            changed.get(f"c{i}", "The city's metro\nopened in 1978." if i == 0 else f"The city, part {i}."),
            "llm",
            title="Lyon",
            original=f"Lyon, part {i}.",
            context={"theme": "Lyon", "chunk_index": i},
            flags=["leak:Lyon"] if f"c{i}" in FLAGGED else [],
        )
        for i in range(6)
    ]
    rows += [review_item(TASK, "synthetic_query", f"s{i}", "lyon", f"When did it open {i}?", "llm") for i in range(2)]
    return review_items_table(rows)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "review" / "store.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[ReviewStore]:
    with ReviewStore(db_path) as opened:
        opened.push(_items())
        yield opened


def test_database_file_is_created_in_wal_mode(store: ReviewStore, db_path: Path) -> None:
    assert db_path.is_file() and store.path == db_path
    raw = sqlite3.connect(db_path)
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {row[0] for row in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"items", "audit", "queues"} <= tables
    finally:
        raw.close()


def test_push_is_idempotent_keeps_decisions_and_reopens_changed_proposals(db_path: Path) -> None:
    with ReviewStore(db_path) as store:
        first = store.push(_items())
        assert (first.added, first.unchanged, first.reopened, first.total) == (8, 0, 0, 8)
        audit_rows, revision = len(store.audit()), store.revision(TASK, KIND)
        second = store.push(_items())
        assert (second.added, second.unchanged, second.reopened, second.total) == (0, 8, 0, 8)
        assert len(store.audit()) == audit_rows and store.revision(TASK, KIND) == revision

        store.decide(_id("c0"), "accept", "alice", 1)
        store.decide(_id("c2"), "edit", "alice", 1, edited_text="Fixed text.")
        third = store.push(_items().to_pylist())  # an iterable of mappings works too
        assert (third.added, third.unchanged, third.reopened) == (0, 8, 0)
        assert store.get(_id("c0")).status == "accepted" and store.get(_id("c2")).edited_text == "Fixed text."

        fourth = store.push(_items({"c2": "A new proposal."}))
        assert (fourth.added, fourth.unchanged, fourth.reopened, fourth.total) == (0, 7, 1, 8)
        reopened = store.get(_id("c2"))
        assert (reopened.status, reopened.proposed, reopened.edited_text, reopened.reviewer) == (
            "pending",
            "A new proposal.",
            None,
            None,
        )
        assert reopened.version == 3 and store.get(_id("c0")).status == "accepted"
        history = store.audit(_id("c2"))
        assert [(e.action, e.from_status, e.to_status, e.version) for e in history] == [
            ("push", None, "pending", 1),
            ("edit", "pending", "edited", 2),
            ("reopen", "edited", "pending", 3),
        ]
        assert history[1].text == "Fixed text." and history[1].proposed_sha256 != history[2].proposed_sha256
        assert history[2].proposed_sha256 == reopened.proposed_sha256


def test_push_refuses_malformed_items_without_writing(store: ReviewStore) -> None:
    before = store.audit()
    new = review_item(TASK, KIND, "c9", "lyon", "New.", "llm")
    with pytest.raises(ValueError, match="SHA-256"):
        store.push([new, {**review_item(TASK, KIND, "c8", "lyon", "x", "llm"), "proposed_sha256": "0" * 64}])
    with pytest.raises(ValueError, match="repeated"):
        store.push([new, new])
    assert store.audit() == before and store.count() == 8


def test_items_count_and_neighbours(store: ReviewStore) -> None:
    assert [item.item_id for item in store.items(kind=KIND)] == [_id(f"c{i}") for i in range(6)]
    assert [item.object_id for item in store.items(limit=3, offset=1)] == ["c1", "c2", "c3"]
    assert [item.object_id for item in store.items(flagged=True)] == ["c1", "c3"]
    assert store.count() == 8 and store.count(kind="synthetic_query") == 2 and store.count(status="accepted") == 0
    item = store.get(_id("c1"))
    assert item.context == {"chunk_index": 1, "theme": "Lyon"} and item.flags == ["leak:Lyon"] and item.flagged
    assert store.neighbours(_id("c0")) == (None, _id("c1"))
    assert store.neighbours(_id("c5")) == (_id("c4"), None)  # the queue ends at its own last item
    store.decide(_id("c2"), "accept", "alice", 1)
    assert store.neighbours(_id("c1"), status="pending") == (_id("c0"), _id("c3"))
    assert store.neighbours(_id("c2"), status="accepted") == (None, None)
    with pytest.raises(UnknownItemError):
        store.neighbours("geo:reformulation:nope")
    with pytest.raises(ValueError, match="status"):
        store.items(status="done")


def test_decide_sets_status_versions_and_validates(store: ReviewStore) -> None:
    accepted = store.decide(_id("c0"), "accept", "  alice ", 1, note="fine")
    assert (accepted.status, accepted.version, accepted.reviewer, accepted.note) == ("accepted", 2, "alice", "fine")
    assert accepted.final_text == accepted.proposed and accepted.updated_at >= accepted.created_at
    rejected = store.decide(_id("c0"), "reject", "bob", 2)
    assert (rejected.status, rejected.version, rejected.final_text) == ("rejected", 3, None)
    same = store.decide(_id("c1"), "edit", "alice", 1, edited_text=store.get(_id("c1")).proposed)
    assert same.status == "edited" and same.final_text == same.proposed  # identical to the proposal: still edited
    assert store.get(_id("c4")).final_text is None  # pending

    for kwargs, message in [
        ({"action": "edit"}, "non-empty edited_text"),
        ({"action": "edit", "edited_text": "  "}, "non-empty edited_text"),
        ({"action": "accept", "edited_text": "x"}, "no edited_text"),
        ({"action": "approve"}, "unknown action"),
        ({"action": "accept", "reviewer": " "}, "reviewer"),
    ]:
        call = {"reviewer": "alice", **kwargs}
        with pytest.raises(InvalidDecisionError, match=message):
            store.decide(_id("c2"), call.pop("action"), call.pop("reviewer"), 1, **call)
    with pytest.raises(UnknownItemError) as missing:
        store.decide("geo:reformulation:nope", "accept", "alice", 1)
    assert isinstance(missing.value, KeyError) and "nope" in str(missing.value)
    assert store.get(_id("c2")).version == 1  # nothing was written by the refused decisions
    assert [e.action for e in store.audit(_id("c0"))] == ["push", "accept", "reject"]


def test_conflict_between_two_store_objects(store: ReviewStore, db_path: Path) -> None:
    with ReviewStore(db_path) as other:
        mine, theirs = store.get(_id("c0")), other.get(_id("c0"))
        assert mine.version == theirs.version == 1
        store.decide(mine.item_id, "accept", "alice", mine.version)
        with pytest.raises(ConflictError) as conflict:
            other.decide(theirs.item_id, "reject", "bob", theirs.version)
    message = str(conflict.value)
    assert _id("c0") in message and "'alice'" in message and "version 2" in message and "reload" in message
    assert conflict.value.current_version == 2 and conflict.value.changed_by == "alice"
    assert store.get(_id("c0")).status == "accepted"  # the first save won; no lost update
    assert [e.action for e in store.audit(_id("c0"))] == ["push", "accept"]


@pytest.mark.parametrize("shared", [False, True], ids=["store-per-thread", "shared-store"])
def test_conflict_between_two_threads(store: ReviewStore, db_path: Path, shared: bool) -> None:
    stores = [store, store] if shared else [ReviewStore(db_path), ReviewStore(db_path)]
    barrier = threading.Barrier(2)
    outcomes: dict[str, Any] = {}

    def save(reviewer: str, action: str, own: ReviewStore) -> None:
        loaded = own.get(_id("c0"))
        barrier.wait()
        try:
            outcomes[reviewer] = own.decide(loaded.item_id, action, reviewer, loaded.version)
        except ConflictError as exc:
            outcomes[reviewer] = exc

    threads = [
        threading.Thread(target=save, args=("alice", "accept", stores[0])),
        threading.Thread(target=save, args=("bob", "reject", stores[1])),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    if not shared:
        for own in stores:
            own.close()
    winners = [name for name, outcome in outcomes.items() if isinstance(outcome, ReviewItem)]
    losers = [name for name, outcome in outcomes.items() if isinstance(outcome, ConflictError)]
    assert len(winners) == 1 and len(losers) == 1
    assert f"'{winners[0]}'" in str(outcomes[losers[0]]) and _id("c0") in str(outcomes[losers[0]])
    final = store.get(_id("c0"))
    assert final.version == 2 and final.reviewer == winners[0]


def test_undo_and_last_decision(store: ReviewStore) -> None:
    store.decide(_id("c0"), "accept", "alice", 1)
    store.decide(_id("c0"), "edit", "bob", 2, edited_text="Bob's text.", note="typo")
    assert store.last_decision("bob").item_id == _id("c0")
    with pytest.raises(ConflictError):
        store.undo(_id("c0"), "bob", 2)
    restored = store.undo(_id("c0"), "bob", 3)
    assert (restored.status, restored.edited_text, restored.reviewer, restored.version) == (
        "accepted",
        None,
        "alice",
        4,
    )
    assert store.last_decision("bob") is None  # undone
    assert store.last_decision("alice").action == "accept"
    back = store.undo(_id("c0"), "alice", 4)
    assert (back.status, back.reviewer, back.version) == ("pending", None, 5)
    with pytest.raises(InvalidDecisionError, match="no decision to undo"):
        store.undo(_id("c0"), "alice", 5)
    assert store.last_decision("alice") is None
    history = store.audit(_id("c0"))
    assert [(e.action, e.reviewer, e.to_status) for e in history] == [
        ("push", None, "pending"),
        ("accept", "alice", "accepted"),
        ("edit", "bob", "edited"),
        ("undo", "bob", "accepted"),
        ("undo", "alice", "pending"),
    ]
    assert history[2].text == "Bob's text." and history[2].note == "typo"

    store.decide(_id("c1"), "reject", "alice", 1)
    store.decide(_id("c2"), "accept", "alice", 1)
    store.decide(_id("s0", "synthetic_query"), "accept", "alice", 1)
    assert store.last_decision("alice").item_id == _id("s0", "synthetic_query")
    assert store.last_decision("alice", task=TASK, kind=KIND).item_id == _id("c2")
    assert store.last_decision("alice", task="other") is None
    store.undo(_id("c2"), "alice", 2)
    last = store.last_decision("alice", kind=KIND)
    assert (last.item_id, last.action, last.version) == (_id("c1"), "reject", 2)

    store.push(_items({"c1": "Changed upstream."}))  # a reopen leaves nothing to undo on the item
    with pytest.raises(InvalidDecisionError):
        store.undo(_id("c1"), "alice", 3)
    assert store.last_decision("alice", kind=KIND) is None


def test_bulk_accept_of_unflagged_items_only(store: ReviewStore) -> None:
    store.decide(_id("c0"), "reject", "bob", 1)
    assert store.bulk_decide("accept", "alice", TASK, KIND, unflagged_only=True) == 3  # c2, c4, c5
    statuses = {item.object_id: item.status for item in store.items(task=TASK, kind=KIND)}
    expected = ["rejected", "pending", "accepted", "pending", "accepted", "accepted"]
    assert [statuses[f"c{i}"] for i in range(6)] == expected
    assert all(e.action == "accept" for e in store.audit() if e.reviewer == "alice")
    assert store.get(_id("s0", "synthetic_query")).status == "pending"  # another queue
    assert store.bulk_decide("reject", "alice", TASK, KIND, ids=[_id("c1"), _id("c0")]) == 1  # c0 is not pending
    assert store.bulk_decide("reject", "alice", TASK, ids=[_id("c0")], pending_only=False) == 1
    assert store.get(_id("c0")).reviewer == "alice" and store.get(_id("c0")).version == 3
    with pytest.raises(InvalidDecisionError):
        store.bulk_decide("edit", "alice", TASK)
    with pytest.raises(UnknownItemError):
        store.bulk_decide("accept", "alice", TASK, ids=["geo:reformulation:nope"])
    assert store.bulk_decide("accept", "alice", TASK) == 3  # c3 and both synthetic queries


def test_stats_and_revision_bumps(store: ReviewStore) -> None:
    assert store.revision(TASK, KIND) == 1 and store.revision(TASK, "synthetic_query") == 1
    assert store.revision("unknown", KIND) == 0
    store.push(_items())
    assert store.revision(TASK, KIND) == 1  # nothing changed
    store.decide(_id("c0"), "accept", "alice", 1)
    store.decide(_id("c1"), "edit", "alice", 1, edited_text="Edited.")
    assert store.revision(TASK, KIND) == 3 and store.revision(TASK, "synthetic_query") == 1
    store.undo(_id("c1"), "alice", 2)
    assert store.revision(TASK, KIND) == 4
    store.decide(_id("c3"), "reject", "alice", 1)
    store.push(_items({"c0": "Changed."}))
    assert store.revision(TASK, KIND) == 6

    reformulation, queries = store.stats(task=TASK)
    assert (reformulation.task, reformulation.kind, queries.kind) == (TASK, KIND, "synthetic_query")
    counts = (reformulation.pending, reformulation.accepted, reformulation.rejected, reformulation.edited)
    assert counts == (5, 0, 1, 0) and reformulation.total == 6
    assert reformulation.flagged_pending == 1 and reformulation.revision == 6 and not reformulation.complete
    assert store.bulk_decide("accept", "alice", TASK, "synthetic_query") == 2
    [queries] = store.stats(kind="synthetic_query")
    assert queries.complete and queries.accepted == 2 and queries.revision == 3
    assert store.stats(task="unknown") == []


def test_audit_is_append_only(store: ReviewStore, db_path: Path) -> None:
    store.decide(_id("c0"), "accept", "alice", 1)
    raw = sqlite3.connect(db_path)
    try:
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            raw.execute("UPDATE audit SET reviewer = 'mallory'")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            raw.execute("DELETE FROM audit")
    finally:
        raw.close()
    assert [e.reviewer for e in store.audit(_id("c0"))] == [None, "alice"]
    latest = store.audit(limit=2)
    assert len(latest) == 2 and latest[-1].action == "accept" and latest[0].id < latest[1].id


def _rewrite_export(path: Path, fmt: str, change: Callable[[dict[str, Any]], None], extra: list[dict]) -> None:
    """Edit an export file as another tool would: change each row in place, then append ``extra`` rows."""
    if fmt == "jsonl":
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    else:
        with path.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
    for row in rows:
        change(row)
    rows += extra
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    else:
        with path.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_export_import_round_trip(store: ReviewStore, tmp_path: Path, fmt: str) -> None:
    store.decide(_id("c0"), "accept", "alice", 1)
    target = tmp_path / "out" / f"review.{fmt}"
    assert store.export(target, TASK, KIND, fmt=fmt) == 6
    assert not [p for p in target.parent.iterdir() if p != target]  # no temporary file left behind
    if fmt == "jsonl":
        first = json.loads(target.read_text(encoding="utf-8").splitlines()[0])
        assert first["context"] == {"chunk_index": 0, "theme": "Lyon"} and first["status"] == "accepted"
    else:
        with target.open(encoding="utf-8", newline="") as handle:
            first = next(csv.DictReader(handle))
        assert json.loads(first["context"]) == {"chunk_index": 0, "theme": "Lyon"} and first["flags"] == "[]"
    assert first["proposed"] == "The city's metro\nopened in 1978." and first["version"] in (2, "2")

    decisions = {
        "c1": ("rejected", None, "bob"),
        "c2": ("edited", "Bob's fix.", "bob"),
        "c4": ("accepted", "", "carol"),
    }

    def change(row: dict[str, Any]) -> None:
        if row["object_id"] in decisions:
            row["status"], row["edited_text"], row["reviewer"] = decisions[row["object_id"]]

    _rewrite_export(target, fmt, change, [])
    report = store.import_file(target)
    assert (report.applied, report.unchanged, report.rejected) == (3, 3, [])
    c1, c2, c4 = (store.get(_id(name)) for name in ("c1", "c2", "c4"))
    assert (c1.status, c1.reviewer, c1.version) == ("rejected", "bob", 2)
    assert (c2.status, c2.edited_text, c2.final_text, c2.reviewer) == ("edited", "Bob's fix.", "Bob's fix.", "bob")
    assert (c4.status, c4.edited_text, c4.reviewer) == ("accepted", None, "carol")
    assert store.get(_id("c0")).reviewer == "alice" and store.get(_id("c3")).status == "pending"
    entry = store.audit(_id("c2"))[-1]
    assert (entry.action, entry.reviewer, entry.from_status, entry.to_status, entry.text) == (
        "import",
        "bob",
        "pending",
        "edited",
        "Bob's fix.",
    )
    assert store.revision(TASK, KIND) == 5

    again = store.import_file(target)  # the same file again: the applied rows are now stale
    assert again.applied == 0 and again.unchanged == 3
    assert [reason for _, reason in again.rejected] == ["conflict: item is at version 2"] * 3


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_import_rejects_rows_with_reasons_and_line_numbers(store: ReviewStore, tmp_path: Path, fmt: str) -> None:
    store.decide(_id("c0"), "accept", "alice", 1)
    target = tmp_path / f"review.{fmt}"
    store.export(target, TASK, KIND, fmt=fmt)
    edits = {
        "c0": {"status": "pending"},
        "c1": {"status": "maybe", "reviewer": "bob"},
        "c2": {"status": "accepted", "reviewer": "bob", "version": 7},
        "c3": {"status": "edited", "edited_text": "", "reviewer": "bob"},
        "c4": {"status": "accepted", "reviewer": "bob", "proposed_sha256": "0" * 64},
        "c5": {"status": "rejected", "reviewer": ""},
    }
    unknown: dict[str, Any] = {}

    def change(row: dict[str, Any]) -> None:
        if row["object_id"] == "c1":
            unknown.update(row, item_id="geo:reformulation:nope", status="accepted")
        row.update(edits[row["object_id"]])

    _rewrite_export(target, fmt, change, [])
    _rewrite_export(target, fmt, lambda row: None, [unknown])
    expected = [
        "pending is not a decision",
        "unknown status 'maybe'",
        "conflict: item is at version 1",
        "edited without text",
        "proposal changed since export",
        "missing reviewer",
        "unknown item",
    ]
    lines = list(range(1, 8)) if fmt == "jsonl" else [2, 4, 5, 6, 7, 8, 9]  # CSV: header, then c0 spans two lines
    report = store.import_file(target)
    assert report.applied == 0 and report.unchanged == 0
    assert [line for line, _ in report.rejected] == lines
    assert [reason.split(" (")[0] for _, reason in report.rejected] == expected
    assert store.get(_id("c0")).status == "accepted" and store.count(status="pending") == 7

    overridden = store.import_file(target, reviewer="dave")  # the override fills the missing reviewer
    assert overridden.applied == 1 and len(overridden.rejected) == 6
    assert (store.get(_id("c5")).status, store.get(_id("c5")).reviewer) == ("rejected", "dave")
    if fmt == "jsonl":
        with target.open("a", encoding="utf-8") as handle:
            handle.write("not json\n")
        assert store.import_file(target).rejected[-1][0] == 8
    with pytest.raises(ValueError, match=r"jsonl or \.csv"):
        store.import_file(tmp_path / "review.xlsx")


def test_agreement_matches_hand_computed_kappa(store: ReviewStore, db_path: Path) -> None:
    # alice: A A A A R R E E   bob: A A A R R A E R  -> observed 5/8, chance (4*4 + 2*3 + 2*1)/64 = 0.375
    # kappa = (0.625 - 0.375) / (1 - 0.375) = 0.4
    extra = [review_item(TASK, KIND, f"c{i}", "lyon", f"Extra {i}.", "llm") for i in (6, 7)]
    store.push(review_items_table(extra))
    alice = "AAAARREE"
    bob = "AAARRAER"
    actions = {"A": "accept", "R": "reject", "E": "edit"}
    for index, (first, second) in enumerate(zip(alice, bob, strict=True)):
        item_id = _id(f"c{index}")
        for name, label in (("alice", first), ("bob", second)):
            version = store.get(item_id).version
            text = f"{name}'s text" if label == "E" else None
            store.decide(item_id, actions[label], name, version, edited_text=text)
    # bob's earlier, undone decision on c0 must not count, nor a third reviewer on one item
    store.decide(_id("c0"), "reject", "bob", 3)
    store.undo(_id("c0"), "bob", 4)
    store.decide(_id("c1"), "reject", "carol", 3)
    store.decide(_id("s0", "synthetic_query"), "accept", "alice", 1)

    reformulation, queries = store.agreement(task=TASK)
    assert (reformulation.kind, reformulation.items, reformulation.reviewers) == (KIND, 8, ("alice", "bob"))
    assert reformulation.observed == pytest.approx(5 / 8) and reformulation.kappa == pytest.approx(0.4)
    assert (queries.items, queries.reviewers, queries.kappa) == (0, None, None)

    store.push(_items({"c3": "Changed upstream."}))  # decisions on an old proposal no longer count
    [after] = store.agreement(kind=KIND)
    assert after.items == 7 and after.observed == pytest.approx(5 / 7)


def test_agreement_kappa_is_none_when_undefined(store: ReviewStore) -> None:
    for name in ("alice", "bob"):
        store.decide(_id("c0"), "accept", name, store.get(_id("c0")).version)
    [result] = store.agreement(kind=KIND)
    assert (result.items, result.observed, result.kappa) == (1, 1.0, None)


def test_agreement_leaves_automatic_decisions_out(store: ReviewStore) -> None:
    # the gate's auto decisions and auto:<method> ones are not a reviewer: no pair of people, so no kappa
    store.bulk_decide("accept", "auto", TASK, KIND, ids=[_id("c0"), _id("c1")])
    store.bulk_decide("accept", "auto:mask", TASK, KIND, ids=[_id("c2")])
    for index in range(3):
        store.decide(_id(f"c{index}"), "reject", "alice", store.get(_id(f"c{index}")).version)
    [alone] = store.agreement(kind=KIND)
    assert (alone.items, alone.reviewers, alone.kappa, alone.automatic) == (0, None, None, 3)
    store.decide(_id("c0"), "reject", "bob", store.get(_id("c0")).version)
    [pair] = store.agreement(kind=KIND)
    assert (pair.items, pair.reviewers, pair.observed, pair.automatic) == (1, ("alice", "bob"), 1.0, 3)


def test_a_crash_between_two_decisions_loses_neither(store: ReviewStore, db_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from review.store import ReviewStore

        store = ReviewStore(Path({str(db_path)!r}))
        store.decide({_id("c0")!r}, "accept", "alice", 1)
        store.decide({_id("c1")!r}, "edit", "alice", 1, edited_text="Fixed before the crash.")
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    store.close()
    with ReviewStore(db_path) as reopened:
        assert reopened.get(_id("c0")).status == "accepted"
        fixed = reopened.get(_id("c1"))
        assert (fixed.status, fixed.edited_text, fixed.version) == ("edited", "Fixed before the crash.", 2)
        decisions = [(e.item_id, e.action) for e in reopened.audit() if e.reviewer == "alice"]
        assert decisions == [(_id("c0"), "accept"), (_id("c1"), "edit")]
