"""Applying review decisions to stage tables (``curation.reviewed``), on hand-built tables."""

from __future__ import annotations

import pyarrow as pa
import pytest

from conteb.names import ReviewKind
from conteb.schemas import PAIRED_QUERIES, REFORMULATED_CHUNKS
from curation.reviewed import (
    DROP_QUERIES,
    Decision,
    FailedItem,
    PendingReviewError,
    apply_query_reviews,
    apply_reformulation_reviews,
    llm_failure_counts,
    person_supplied_counts,
    queries_after_rejections,
)


def _chunk(index: int, method: str) -> dict:
    return {
        "chunk_id": f"lyon_{index}",
        "doc_id": "lyon",
        "chunk_index": index,
        "og_chunk": f"Lyon, part {index}.",
        "chunk": f"The city, part {index}.",
        "theme": "Lyon",
        "leaked_mentions": [],
        "lost_answers": [],
        "flagged": False,
        "method": method,
    }


def _query(query_id: str, chunk_id: str, text: str = "When?") -> dict:
    return {
        "query_id": query_id,
        "query": text,
        "chunk_id": chunk_id,
        "chunk_ids": [chunk_id],
        "doc_id": "lyon",
        "pairing": "llm",
        "source": "test",
    }


REFORMULATED = pa.Table.from_pylist([_chunk(0, "unchanged"), _chunk(1, "llm"), _chunk(2, "mask")], REFORMULATED_CHUNKS)
QUERIES = pa.Table.from_pylist([_query("q1", "lyon_1"), _query("q2", "lyon_2")], PAIRED_QUERIES)


def test_reformulation_decisions_give_each_chunk_its_final_text() -> None:
    decisions = {
        "lyon_1": Decision("edited", "Its reviewed text.", "ana"),
        "lyon_2": Decision("rejected", None, "ben"),
    }
    result = apply_reformulation_reviews(REFORMULATED, decisions)
    rows = {row["chunk_id"]: row for row in result.table.to_pylist()}
    assert (rows["lyon_0"]["chunk"], rows["lyon_0"]["review_status"]) == ("The city, part 0.", "not_reviewed")
    assert (rows["lyon_1"]["chunk"], rows["lyon_1"]["reviewer"]) == ("Its reviewed text.", "ana")
    assert (rows["lyon_2"]["chunk"], rows["lyon_2"]["review_status"]) == ("Lyon, part 2.", "rejected")
    assert result.stats == {"accepted": 0, "edited": 1, "rejected": 1, "not_reviewed": 1}
    with pytest.raises(PendingReviewError, match="1 reformulation items still pending"):
        apply_reformulation_reviews(REFORMULATED, {"lyon_1": decisions["lyon_1"]})


def test_query_decisions_edit_or_leave_out_rows() -> None:
    decisions = {"q1": Decision("edited", "When did it open?", "ana"), "q2": Decision("rejected", None, "ana")}
    result = apply_query_reviews(ReviewKind.SYNTHETIC_QUERY, QUERIES, decisions)
    assert result.table.column("query").to_pylist() == ["When did it open?"]
    assert result.stats == {"accepted": 0, "edited": 1, "rejected": 1}
    edited = {"q1": Decision("edited", "lyon_2, lyon_1", "ana"), "q2": Decision("accepted", "lyon_2", "ana")}
    pairing = apply_query_reviews(ReviewKind.PAIRING, QUERIES, edited)
    assert pairing.table.column("chunk_ids").to_pylist() == [["lyon_2", "lyon_1"], ["lyon_2"]]
    assert pairing.table.column("chunk_id").to_pylist() == ["lyon_2", "lyon_2"]
    elsewhere = {"q1": Decision("edited", "paris_0", "ana"), "q2": Decision("accepted", None, "ana")}
    with pytest.raises(ValueError, match="not in document lyon"):
        apply_query_reviews(ReviewKind.PAIRING, QUERIES, elsewhere)


def test_rejected_rewrites_drop_their_queries_only_with_drop_queries() -> None:
    reviewed = apply_reformulation_reviews(
        REFORMULATED,
        {"lyon_1": Decision("accepted", "The city, part 1.", "ana"), "lyon_2": Decision("rejected", None, "ana")},
    ).table
    assert queries_after_rejections(QUERIES, reviewed, DROP_QUERIES).column("query_id").to_pylist() == ["q1"]
    assert queries_after_rejections(QUERIES, reviewed, "original") is QUERIES
    assert queries_after_rejections(QUERIES, None, DROP_QUERIES) is QUERIES  # no reformulation in the task


def test_the_card_counts_the_llm_failures_people_decided() -> None:
    rows = [_chunk(0, "unchanged"), *(_chunk(i, "mask") | {"llm_failure": "the LLM call failed"} for i in (1, 2, 3))]
    rows.append(_chunk(4, "llm"))
    decisions = {
        "lyon_1": Decision("accepted", "The city, part 1.", "ana"),
        "lyon_2": Decision("accepted", "The city, part 2.", "ben"),
        "lyon_3": Decision("edited", "Edited.", "ana"),
        "lyon_4": Decision("accepted", "The city, part 4.", "auto"),  # not a failure: not counted
    }
    reviewed = apply_reformulation_reviews(pa.Table.from_pylist(rows, schema=REFORMULATED_CHUNKS), decisions).table
    assert llm_failure_counts(reviewed) == {
        "LLM failures decided by a person": 3,
        "LLM failures decided by a person: accepted the fallback (the mask)": 2,
        "LLM failures decided by a person: edited": 1,
    }
    assert llm_failure_counts(apply_reformulation_reviews(
        pa.Table.from_pylist(rows[:1] + rows[4:], schema=REFORMULATED_CHUNKS), decisions).table) == {}  # fmt: skip
    decisions["lyon_2"] = Decision("accepted", "The city, part 2.", "auto")  # a store from before the rule
    reviewed = apply_reformulation_reviews(pa.Table.from_pylist(rows, schema=REFORMULATED_CHUNKS), decisions).table
    assert llm_failure_counts(reviewed)["LLM failures decided automatically (before that was refused)"] == 1


def test_failed_items_that_propose_nothing_become_rows_only_when_a_person_supplies_them() -> None:
    written = FailedItem("synth-lyon_2-0", "lyon", {"chunk_id": "lyon_2", "chunk": "Lyon, part 2.", "answer": None})
    left_out = FailedItem("synth-lyon_3-0", "lyon", {"chunk_id": "lyon_3", "chunk": "Lyon, part 3.", "answer": None})
    decisions = {
        "q1": Decision("accepted", "When?", "auto"),
        "q2": Decision("accepted", "When?", "auto"),
        written.object_id: Decision("edited", " Which part is this? ", "ana"),
        left_out.object_id: Decision("rejected", None, "ana"),
    }
    result = apply_query_reviews(ReviewKind.SYNTHETIC_QUERY, QUERIES, decisions, [written, left_out])
    rows = {row["query_id"]: row for row in result.table.to_pylist()}
    assert set(rows) == {"q1", "q2", written.object_id}
    assert {k: rows[written.object_id][k] for k in ("query", "chunk_id", "chunk_ids", "answer", "source", "model")} == {
        "query": "Which part is this?", "chunk_id": "lyon_2", "chunk_ids": ["lyon_2"], "answer": None,
        "source": "review", "model": None,
    }  # fmt: skip
    assert result.stats == {"accepted": 2, "edited": 1, "rejected": 1}
    with pytest.raises(PendingReviewError, match="1 synthetic_query items still pending"):
        apply_query_reviews(ReviewKind.SYNTHETIC_QUERY, QUERIES, {k: decisions[k] for k in ("q1", "q2")}, [written])
    with pytest.raises(ValueError, match="proposes nothing"):
        accepted = decisions | {written.object_id: Decision("accepted", "", "ana")}
        apply_query_reviews(ReviewKind.SYNTHETIC_QUERY, QUERIES, accepted, [written])

    unpaired = FailedItem("q9", "lyon", {"query": "Where?", "answer": "Rhône", "source": "squad", "chunks": {}})
    pairs = apply_query_reviews(
        ReviewKind.PAIRING, QUERIES, decisions | {"q9": Decision("edited", "lyon_1, lyon_0", "ben")}, [unpaired]
    ).table
    by_llm = pairs.set_column(pairs.schema.get_field_index("model"), "model", pa.array(["m", "m", None]))
    assert person_supplied_counts(by_llm, result.table) == {
        "LLM failures decided by a person: pairings given": 1,  # the row without a model: a person gave it
        "LLM failures decided by a person: synthetic queries written": 1,
    }
    assert person_supplied_counts(by_llm.slice(0, 2), QUERIES) == {}
    paired = pairs.to_pylist()[-1]
    assert (paired["query_id"], paired["query"], paired["chunk_id"], paired["chunk_ids"], paired["answer"]) == (
        "q9", "Where?", "lyon_1", ["lyon_1", "lyon_0"], "Rhône"
    )  # fmt: skip
