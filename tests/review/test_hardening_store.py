"""Issue 11 (hardening) for the review store: damaged files, hostile names and texts, undo ownership, CSV export."""

from __future__ import annotations

import csv
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from conteb.sqlite_kinds import StoreFileError
from curation.review_items import review_item, review_items_table
from review.model import InvalidDecisionError, auto_reviewer, reviewer_label
from review.store import ReviewStore

TASK, KIND = "geo", "reformulation"
FORMULAS = ('=HYPERLINK("http://evil.example","x")', "+1+1", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd", "'quoted")


def _id(object_id: str) -> str:
    return f"{TASK}:{KIND}:{object_id}"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "review" / "review.sqlite"


@pytest.fixture
def store(db_path: Path) -> Iterator[ReviewStore]:
    rows = [
        review_item(TASK, KIND, f"c{i}", "doc", f"Proposal {i}.", "llm", original=f"Original {i}.",
                    flags=["leak:Doc"] if i in (1, 3) else [])
        for i in range(5)
    ]  # fmt: skip
    with ReviewStore(db_path) as opened:
        opened.push(review_items_table(rows))
        yield opened


# --------------------------------------------------------------------------------------------
# item 1: damaged store files


def test_empty_store_file_is_refused_not_started_fresh(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"")
    with pytest.raises(StoreFileError, match=r"is empty \(0 bytes\)") as refused:
        ReviewStore(db_path)
    assert str(db_path) in str(refused.value) and "mv " in str(refused.value)
    assert db_path.stat().st_size == 0  # nothing was written over it


def test_corrupt_store_files_are_refused(db_path: Path, store: ReviewStore) -> None:
    store.close()
    good = db_path.read_bytes()
    db_path.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreFileError, match="not a SQLite database"):
        ReviewStore(db_path)
    db_path.write_bytes(good[:100] + b"\xff" * (len(good) - 100))  # a valid header over a damaged body
    with pytest.raises(StoreFileError, match="damaged") as refused:
        ReviewStore(db_path)
    assert str(db_path) in str(refused.value)


# --------------------------------------------------------------------------------------------
# item 2: names, texts, undo, CSV


@pytest.mark.parametrize("name", ["ana\x1b[31m", "ana\nbob", "ana\tb", "a\x00b", "\u202eana", "x" * 65])
def test_reviewer_names_with_control_characters_are_refused(store: ReviewStore, name: str) -> None:
    with pytest.raises(InvalidDecisionError, match="reviewer name"):
        store.decide(_id("c0"), "accept", name, 1)
    with pytest.raises(InvalidDecisionError, match="reviewer name"):
        store.bulk_decide("accept", name, TASK, KIND)
    assert store.get(_id("c0")).status == "pending"
    assert all(entry.action == "push" for entry in store.audit())


@pytest.mark.parametrize("name", ["ana\u2028bob", "ana\u2029bob", "ana\u0085bob", "\ufeffana"])
def test_reviewer_names_with_line_separators_are_refused(store: ReviewStore, name: str) -> None:
    with pytest.raises(InvalidDecisionError, match="control characters or line separators"):
        store.decide(_id("c0"), "accept", name, 1)
    assert store.get(_id("c0")).status == "pending"
    assert store.decide(_id("c0"), "accept", "\u2028ana\u2029", 1).reviewer == "ana"  # at the ends: stripped


def test_import_refuses_the_automatic_reviewers_name_in_rows_that_decide(store: ReviewStore, tmp_path: Path) -> None:
    store.bulk_decide("accept", auto_reviewer(), TASK, KIND, ids=[_id("c4")])  # what the review gate does
    target = tmp_path / "queue.jsonl"
    store.export(target, TASK, KIND)
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    rows[0].update(status="accepted", reviewer="Auto")
    rows[1].update(status="rejected", reviewer="\uff41\uff55\uff54\uff4f:mask")
    rows[2].update(status="accepted", reviewer="ana\u2028bob")
    rows[3].update(status="accepted", reviewer="ana")
    target.write_text("".join(json.dumps(row) + "\n" for row in rows))
    report = store.import_file(target)
    assert (report.applied, report.unchanged) == (1, 1)  # c3 applied; c4, accepted by auto, unchanged
    reasons = dict(report.rejected)
    assert "'Auto' is reserved" in reasons[1] and "--reviewer" in reasons[1]
    assert "reserved" in reasons[2] and "line separators" in reasons[3]
    assert [store.get(_id(f"c{i}")).status for i in range(3)] == ["pending"] * 3
    with pytest.raises(InvalidDecisionError, match="reserved"):
        store.import_file(target, reviewer="AUTO")
    assert store.import_file(target, reviewer="bob").applied == 3


def test_nul_in_edited_text_or_note_is_refused(store: ReviewStore) -> None:
    with pytest.raises(InvalidDecisionError, match="NUL"):
        store.decide(_id("c0"), "edit", "ana", 1, edited_text="fixed\x00 text")
    with pytest.raises(InvalidDecisionError, match="NUL"):
        store.decide(_id("c0"), "accept", "ana", 1, note="ok\x00")
    assert store.get(_id("c0")).version == 1


def test_import_refuses_nul_text_and_bad_reviewer_rows(store: ReviewStore, tmp_path: Path) -> None:
    target = tmp_path / "queue.jsonl"
    store.export(target, TASK, KIND)
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    rows[0].update(status="edited", edited_text="a\x00b", reviewer="ana")
    rows[1].update(status="accepted", reviewer="ana\x1b[2J")
    rows[2].update(status="accepted", reviewer="ana")
    target.write_text("".join(json.dumps(row) + "\n" for row in rows))
    report = store.import_file(target)
    assert report.applied == 1
    reasons = dict(report.rejected)
    assert "NUL" in reasons[1] and "reviewer name" in reasons[2]
    assert store.get(_id("c0")).status == "pending" and store.get(_id("c1")).status == "pending"


def test_only_the_reviewer_who_decided_can_undo(store: ReviewStore) -> None:
    store.decide(_id("c0"), "accept", "alice", 1)
    with pytest.raises(InvalidDecisionError, match="'alice'") as refused:
        store.undo(_id("c0"), "bob", 2)
    assert "only they can undo it" in str(refused.value)
    assert store.get(_id("c0")).status == "accepted"
    restored = store.undo(_id("c0"), "alice", 2)
    assert restored.status == "pending"


def test_csv_export_escapes_formula_cells_and_import_reads_them_back(store: ReviewStore, tmp_path: Path) -> None:
    for index, text in enumerate(FORMULAS[:5]):
        store.decide(_id(f"c{index}"), "edit", "ana", 1, edited_text=text, note=FORMULAS[(index + 5) % 7])
    target = tmp_path / "queue.csv"
    store.export(target, TASK, KIND, fmt="csv")
    with target.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    cells = [value for row in rows for value in row.values() if value]
    assert all(not cell.startswith(("=", "+", "-", "@", "\t", "\r")) for cell in cells)
    assert [row["edited_text"] for row in rows] == ["'" + text for text in FORMULAS[:5]]
    assert rows[0]["note"] == "'\rcmd" and rows[1]["note"] == "''quoted"

    report = store.import_file(target)
    assert (report.applied, report.rejected) == (0, [])  # the escaped cells read back as the stored texts
    assert report.unchanged == 5
    rows[0]["edited_text"] = "'=1+1"  # a reviewer's new text, escaped the same way
    with target.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert store.import_file(target, reviewer="bob").applied == 1
    assert store.get(_id("c0")).edited_text == "=1+1"


# --------------------------------------------------------------------------------------------
# item 3: what the UI and `review stats` need from the store


def test_items_flagged_first_and_position(store: ReviewStore) -> None:
    ordered = [item.object_id for item in store.items(task=TASK, kind=KIND, flagged_first=True)]
    assert ordered == ["c1", "c3", "c0", "c2", "c4"]
    assert store.position(_id("c3")) == (4, 5)
    store.decide(_id("c0"), "accept", "ana", 1)
    assert store.position(_id("c3"), status="pending") == (3, 4)
    assert store.position(_id("c0"), status="pending") == (None, 4)


def test_bulk_decide_records_a_note_per_item(store: ReviewStore) -> None:
    assert store.bulk_decide("accept", "ana", TASK, KIND, unflagged_only=True, note="accept all unflagged") == 3
    entries = [entry for entry in store.audit() if entry.action == "accept"]
    assert [(e.item_id, e.reviewer, e.note) for e in entries] == [
        (_id(f"c{i}"), "ana", "accept all unflagged") for i in (0, 2, 4)
    ]


def test_deciders_and_reviewer_labels(store: ReviewStore, db_path: Path) -> None:
    store.bulk_decide("accept", "auto", TASK, KIND, ids=[_id("c0")])
    store.decide(_id("c2"), "reject", "ana", 1)
    raw = sqlite3.connect(db_path)
    with raw:
        raw.execute(
            "UPDATE items SET status = 'accepted', reviewer = NULL, version = 2 WHERE item_id = ?", (_id("c4"),)
        )
    raw.close()
    assert store.deciders(task=TASK) == {(TASK, KIND): {"ana": 1, "auto": 1, None: 1}}
    assert reviewer_label("auto") == "auto (automatic)"
    assert reviewer_label("auto:mask") == "auto:mask (automatic)"
    assert reviewer_label(None) == "unknown"
    assert reviewer_label(None, missing="the pipeline") == "the pipeline"
    assert reviewer_label("ana") == "ana"


def test_export_respects_the_umask(store: ReviewStore, tmp_path: Path) -> None:
    """Exports are written like any other output (conteb.storage.atomic_path), not mode 0600."""
    import os

    previous = os.umask(0o022)
    try:
        assert store.export(tmp_path / "out" / "queue.jsonl", task=TASK) == 5
    finally:
        os.umask(previous)
    assert (tmp_path / "out" / "queue.jsonl").stat().st_mode & 0o777 == 0o644
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["queue.jsonl"]  # no temporary left
