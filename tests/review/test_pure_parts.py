"""The pure parts of the review package: vocabulary, audit replay, agreement figures and export files."""

from __future__ import annotations

import pytest

from review.agreement import cohen_kappa, queue_agreement
from review.exchange import EXPORT_COLUMNS, ImportRejected, csv_escape, csv_unescape, parse_import_row
from review.history import decision_label, live_decisions
from review.model import auto_reviewer, proposal_sha256, reviewer_label, reviewer_or_none


def test_export_columns_are_the_stored_file_format() -> None:
    assert EXPORT_COLUMNS == (
        "item_id", "task", "kind", "object_id", "doc_id", "title", "original", "proposed", "context", "flags",
        "flagged", "method", "proposed_sha256", "status", "edited_text", "reviewer", "note", "version",
        "created_at", "updated_at",
    )  # fmt: skip


def test_automatic_reviewers_are_named_and_marked() -> None:
    assert (auto_reviewer(), auto_reviewer("mask")) == ("auto", "auto:mask")
    assert reviewer_label("auto:mask") == "auto:mask (automatic)" and reviewer_label("automaton") == "automaton"
    assert reviewer_label(None, missing="the pipeline") == "the pipeline"
    assert reviewer_or_none("  ana ") == "ana" and reviewer_or_none("a\x07b") is None and reviewer_or_none(None) is None
    assert proposal_sha256("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def _row(id: int, action: str, reviewer: str | None = None, to_status: str = "accepted") -> dict:
    return {"id": id, "action": action, "reviewer": reviewer, "to_status": to_status}


def test_replay_keeps_the_live_decisions_only() -> None:
    rows = [_row(1, "push"), _row(2, "accept", "ana"), _row(3, "edit", "ben", "edited"), _row(4, "undo", "ben")]
    assert [row["id"] for row in live_decisions(rows)] == [2]
    assert live_decisions([*rows, _row(5, "reopen"), _row(6, "undo", "ana")]) == []  # a reopen clears the stack
    assert decision_label(_row(7, "import", "cy", "rejected")) == "reject" and decision_label(_row(8, "edit")) == "edit"


def test_kappa_by_hand() -> None:
    # observed 3/4; chance = (2*1 + 1*2 + 1*1) / 16 = 5/16; kappa = (12/16 - 5/16) / (11/16) = 7/11
    observed, kappa = cohen_kappa([("accept", "accept"), ("accept", "reject"), ("reject", "reject"), ("edit", "edit")])
    assert observed == 0.75 and kappa == pytest.approx(7 / 11)
    assert cohen_kappa([("accept", "accept")]) == (1.0, None)  # chance agreement of 1: undefined
    labels = {"i1": {"ana": "accept", "ben": "accept", "cy": "reject"}, "i2": {"ana": "reject", "ben": "reject"}}
    agreement = queue_agreement("geo", "pairing", labels)
    assert (agreement.reviewers, agreement.items, agreement.observed) == (("ana", "ben"), 2, 1.0)
    assert queue_agreement("geo", "pairing", {}).reviewers is None


def test_agreement_is_between_people_only() -> None:
    # auto and auto:<method> share the most items with ana, yet agreement is between people: ana and ben
    labels = {
        "i1": {"auto": "accept", "ana": "reject", "ben": "reject"},
        "i2": {"auto:mask": "accept", "ana": "accept"},
        "i3": {"auto": "accept", "ana": "edit"},
        "i4": {"auto": "accept"},
    }
    agreement = queue_agreement("geo", "pairing", labels)
    got = (agreement.reviewers, agreement.items, agreement.observed, agreement.automatic)
    assert got == (("ana", "ben"), 1, 1.0, 4)
    only_auto = queue_agreement("geo", "pairing", {"i1": {"auto": "accept", "ana": "reject"}, "i2": {"auto": "edit"}})
    assert (only_auto.reviewers, only_auto.items, only_auto.kappa, only_auto.automatic) == (None, 0, None, 2)


def test_csv_cells_that_a_spreadsheet_would_run_are_escaped_reversibly() -> None:
    for text in ("=SUM(A1)", "+1", "-1", "@x", "\tx", "\rx", "'quoted"):
        assert csv_escape(text) == "'" + text and csv_unescape(csv_escape(text)) == text
    assert csv_escape("plain") == "plain" and csv_escape(3) == 3 and csv_unescape("") is None


def test_import_rows_are_checked_on_their_own_first() -> None:
    good = {"item_id": "geo:pairing:q1", "version": "2", "status": "edited", "edited_text": " ", "reviewer": " ana "}
    parsed = parse_import_row(good, None)
    assert (parsed.version, parsed.edited_text, parsed.reviewer, parsed.note) == (2, None, "ana", None)
    assert parse_import_row(good, "dave").reviewer == "dave"
    for row, reason in [
        ({**good, "item_id": ""}, "missing item_id"),
        ({**good, "version": "two"}, "invalid version 'two'"),
        ({**good, "reviewer": "a\x00b"}, "control characters"),
        ({**good, "note": "a\x00b"}, "the note contains a NUL"),
    ]:
        with pytest.raises(ImportRejected, match=reason):
            parse_import_row(row, None)
