"""Review items: the generic constructor and the items built from reformulated chunks (failed LLM rewrites
included: flagged with their reason, the mask proposed, never accepted automatically)."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa

from conteb.names import Stage
from conteb.schemas import PAIRED_QUERIES, REVIEW_ITEMS, SYNTHETIC_QUERIES, THEMES
from curation.llm_results import failure_reason
from curation.quarantine import QuarantineReason, QuarantineRecord, quarantine_table
from curation.reformulation import apply_reformulations, rewrite_validator
from curation.review_items import (
    NO_PROPOSAL,
    review_item,
    review_items_from_llm_pairs,
    review_items_from_reformulations,
    review_items_from_synthetic,
    review_items_table,
)
from llm.types import LLMResult
from review.gate import AutoAcceptance, auto_acceptances
from review.model import is_llm_failure
from tests.builders import LYON_TEXTS, chunks_from_texts, queries

TEXTS = LYON_TEXTS


def _chunks() -> pa.Table:
    return pa.concat_tables(
        [chunks_from_texts("lyon", TEXTS, title="Lyon"), chunks_from_texts("alps", ["The Alps are mountains."])]
    )


def _themes() -> pa.Table:
    rows = [
        {"doc_id": "lyon", "theme": "Lyon", "aliases": [], "method": "title"},
        {"doc_id": "alps", "theme": "Alps", "aliases": [], "method": "title"},
    ]
    return pa.Table.from_pylist(rows, schema=THEMES)


def test_review_item_rules() -> None:
    row = review_item(
        "geo",
        "pairing",
        "q1",
        "lyon",
        "lyon_2",
        "llm",
        title="Lyon",
        context={"query": "Où?", "answer": "ici"},
        flags=["low_confidence"],
    )
    assert row == {
        "item_id": "geo:pairing:q1",
        "task": "geo",
        "kind": "pairing",
        "object_id": "q1",
        "doc_id": "lyon",
        "title": "Lyon",
        "original": None,
        "proposed": "lyon_2",
        "context": '{"answer": "ici", "query": "Où?"}',
        "flags": ["low_confidence"],
        "flagged": True,
        "method": "llm",
        "proposed_sha256": hashlib.sha256(b"lyon_2").hexdigest(),
    }
    plain = review_item("geo", "synthetic_query", "s1", "lyon", "Où ça?", "llm")
    assert plain["flagged"] is False and plain["context"] is None and plain["flags"] == []
    assert plain["proposed_sha256"] == hashlib.sha256("Où ça?".encode()).hexdigest()
    assert review_items_table([row, plain]).schema == REVIEW_ITEMS
    assert review_items_table([]).num_rows == 0


def test_items_from_masked_reformulations() -> None:
    answers = {"lyon_1": ["1978"], "lyon_2": ["Lyon metro"]}
    reformulated = apply_reformulations(_chunks(), _themes(), answers, None, None, None).table
    items = review_items_from_reformulations("geo", reformulated, _chunks(), {"lyon": "Lyon"})
    assert items.schema == REVIEW_ITEMS
    rows = items.to_pylist()
    assert [r["item_id"] for r in rows] == ["geo:reformulation:lyon_1", "geo:reformulation:lyon_2"]  # no first chunks
    first, second = rows
    assert (
        first["original"] == TEXTS[1] and first["proposed"] == "The subject's metro opened in 1978 and has four lines."
    )
    assert first["method"] == "mask" and first["flags"] == [] and first["flagged"] is False and first["title"] == "Lyon"
    assert first["proposed_sha256"] == hashlib.sha256(first["proposed"].encode()).hexdigest()
    assert json.loads(first["context"]) == {
        "theme": "Lyon",
        "chunk_index": 1,
        "previous_chunk": TEXTS[0],
        "next_chunk": TEXTS[2],
    }
    assert json.loads(second["context"])["next_chunk"] is None
    assert second["flags"] == ["lost_answer:Lyon metro"] and second["flagged"] is True


def _paired(rows: list[tuple[str, str, str, str]]) -> pa.Table:
    """PAIRED_QUERIES of ``(query_id, query, chunk_id, answer)`` (span pairings of document ``lyon``)."""
    return pa.Table.from_pylist(
        [
            {"query_id": qid, "query": query, "chunk_id": cid, "chunk_ids": [cid], "answer": answer,
             "answer_start": 0, "answer_end": len(answer), "doc_id": "lyon", "pairing": "span", "source": "f"}
            for qid, query, cid, answer in rows
        ],
        schema=PAIRED_QUERIES,
    )  # fmt: skip


def test_a_lost_answer_names_the_queries_that_lose_it() -> None:
    """The item's context lists the paired queries whose answer the mask removed (id, question, answer), so the
    page can say "the mask removes the answer of lyon-q2"; the flag keeps its form (stores already hold it)."""
    queries = _paired(
        [
            ("lyon-q1", "When did the metro open?", "lyon_1", "1978"),
            ("lyon-q2", "What is the network called?", "lyon_2", "Lyon metro"),
            ("lyon-q3", "Which network runs in Lyon?", "lyon_2", "Lyon metro"),
            ("lyon-q4", "Who runs it?", "lyon_2", "TCL"),
        ]
    )
    answers = {"lyon_1": ["1978"], "lyon_2": ["Lyon metro", "TCL"]}
    reformulated = apply_reformulations(_chunks(), _themes(), answers, None, None, None).table
    first, second = review_items_from_reformulations("geo", reformulated, _chunks(), {}, queries).to_pylist()
    assert "lost_answers" not in json.loads(first["context"])  # nothing lost: the context is as before
    assert second["flags"] == ["lost_answer:Lyon metro"]
    assert json.loads(second["context"])["lost_answers"] == [
        {"query_id": "lyon-q2", "query": "What is the network called?", "answer": "Lyon metro"},
        {"query_id": "lyon-q3", "query": "Which network runs in Lyon?", "answer": "Lyon metro"},
    ]


def test_items_from_llm_reformulations_carry_leak_flags() -> None:
    results = {
        "reformulate:lyon_1": LLMResult("reformulate:lyon_1", value={"rewritten": "Its metro opened in 1978, Lyon."}),
        "reformulate:lyon_2": LLMResult("reformulate:lyon_2", value={"rewritten": "The local metro is run by TCL."}),
    }
    answers = {"lyon_1": ["1978"], "lyon_2": ["Lyon metro", "TCL"]}
    reformulated = apply_reformulations(_chunks(), _themes(), answers, results, "gpt-4o", None).table
    items = review_items_from_reformulations("geo", reformulated, _chunks(), {}).to_pylist()
    assert [(r["object_id"], r["method"], r["flags"], r["title"]) for r in items] == [
        ("lyon_1", "llm", ["leak:Lyon"], None),
        ("lyon_2", "llm", ["lost_answer:Lyon metro"], None),
    ]


def test_a_failed_or_refused_rewrite_waits_for_a_person_with_its_reason_and_the_mask() -> None:
    results = {
        "reformulate:lyon_1": LLMResult("reformulate:lyon_1", error="InternalServerError: Error code: 500", attempts=5),
        "reformulate:lyon_2": LLMResult("reformulate:lyon_2", value={"rewritten": "TCL."}),  # the detector: too short
    }
    reformulated = apply_reformulations(_chunks(), _themes(), {}, results, "gpt-4o", None).table
    items = review_items_from_reformulations("geo", reformulated, _chunks(), {}).to_pylist()
    assert [(r["object_id"], r["method"], r["flagged"], r["original"]) for r in items] == [
        ("lyon_1", "mask", True, TEXTS[1]),
        ("lyon_2", "mask", True, TEXTS[2]),
    ]
    broken, refused = items
    assert broken["flags"] == ["llm_failed: the LLM call failed after 5 tries: InternalServerError: Error code: 500"]
    assert broken["proposed"] == "The subject's metro opened in 1978 and has four lines."  # the offline mask
    assert refused["flags"][0].startswith(
        f"llm_failed: the LLM's rewrite was refused: the rewrite has 4 characters, less than half of the original's "
        f"{len(TEXTS[2])}"
    )
    assert refused["proposed"] == "The subject metro is run by TCL."
    assert auto_acceptances(items, unchanged=True, methods=["mask"]) == [
        AutoAcceptance("auto", [], None),
        AutoAcceptance("auto:mask", [], "mask"),
    ]


def test_a_mask_that_changes_nothing_still_waits_when_the_llm_failed() -> None:
    """The issue's case: the fallback equals the original (no mention to mask), yet a person must see it."""
    chunks = chunks_from_texts("alps", ["The Alps are mountains.", "They are high and cold."])
    themes = pa.Table.from_pylist([{"doc_id": "alps", "theme": "Alps", "aliases": [], "method": "title"}], THEMES)
    results = {"reformulate:alps_1": LLMResult("reformulate:alps_1", value={"rewritten": "Cold."})}
    reformulated = apply_reformulations(chunks, themes, {}, results, "gpt-4o", None).table
    [item] = review_items_from_reformulations("geo", reformulated, chunks, {}).to_pylist()
    assert item["proposed"] == item["original"] == "They are high and cold." and item["flagged"]
    assert is_llm_failure(item["flags"])
    assert [plan.item_ids for plan in auto_acceptances([item], unchanged=True, methods=["mask"])] == [[], []]


def test_failure_reasons_in_words() -> None:
    validator = rewrite_validator("x" * 100)
    assert failure_reason(LLMResult("a", value={"rewritten": "x" * 100}), validator, "rewrite") == ""
    assert failure_reason(None, validator, "rewrite") == (
        "the LLM gave no rewrite for this item (no result for its request)"
    )
    assert failure_reason(LLMResult("a", error="APIConnectionError: boom", attempts=1)) == (
        "the LLM call failed after 1 try: APIConnectionError: boom"
    )
    remembered = LLMResult("a", error="invalid answer: not JSON (remembered from an earlier run, ...)", remembered=True)
    assert failure_reason(remembered, validator, "rewrite") == (
        "the LLM's rewrite was refused: not JSON (remembered from an earlier run, ...)"
    )


def _failures(*rows: tuple[str, str, str, str]) -> pa.Table:
    """A quarantine table of ``(stage, reason, object_id, detail)`` rows of document lyon."""
    records = [
        QuarantineRecord(Stage(stage), QuarantineReason(reason), "x", object_id, "lyon", "llm:m", "row", detail)
        for stage, reason, object_id, detail in rows
    ]
    return quarantine_table(records)


def test_a_stage_without_fallback_puts_its_failed_items_in_front_of_a_person_proposing_nothing() -> None:
    synthetic_failures = _failures(("synthetic_queries", "llm_failed", "lyon_1", "the LLM call failed: HTTP 500"))
    [item] = review_items_from_synthetic(
        "geo", SYNTHETIC_QUERIES.empty_table(), _chunks(), {"lyon": "Lyon"}, synthetic_failures
    ).to_pylist()
    assert (item["item_id"], item["proposed"], item["method"], item["original"], item["flagged"]) == (
        "geo:synthetic_query:synth-lyon_1-0", "", NO_PROPOSAL, None, True
    )  # fmt: skip
    assert item["flags"] == [
        "llm_failed: the LLM wrote no query for this chunk (write one, or reject): the LLM call failed: HTTP 500"
    ]
    assert json.loads(item["context"]) == {"chunk_id": "lyon_1", "chunk": TEXTS[1], "answer": None}

    pairing_failures = _failures(
        ("llm_pairing", "llm_failed", "q1", "invalid answer: chunk index 7 does not exist"),
        ("llm_pairing", "llm_failed", "q2", "HTTP 500"),  # paired by its span: the span's pairing is published
        ("llm_pairing", "llm_no_chunk", "q3", "the LLM found none"),  # an answer, not a failure
    )
    asked = queries([{"id": "q1", "doc": "lyon", "answers": [("1978", 20)]}, {"id": "q2", "doc": "lyon"}])
    span = pa.Table.from_pylist([{"query_id": "q2", "chunk_ids": ["lyon_1"]}])
    items = review_items_from_llm_pairs(
        "geo", PAIRED_QUERIES.empty_table(), _chunks(), {}, span, pairing_failures, asked
    ).to_pylist()
    assert [(i["object_id"], i["proposed"], i["method"], i["flagged"]) for i in items] == [("q1", "", "none", True)]
    assert items[0]["flags"][0].startswith("llm_failed: the LLM named no chunk for this query (give the chunk ids")
    assert json.loads(items[0]["context"]) == {"query": "query q1?", "answer": "1978", "source": "f", "chunks": {}}


def test_rewrites_made_against_a_fallback_theme_wait_for_a_person() -> None:
    same = {f"reformulate:lyon_{i}": LLMResult(f"reformulate:lyon_{i}", value={"rewritten": TEXTS[i]}) for i in (1, 2)}
    reformulated = apply_reformulations(
        _chunks(), _themes(), {}, same, "gpt-4o", None, {"lyon": "the LLM call failed: HTTP 500"}
    ).table
    items = review_items_from_reformulations("geo", reformulated, _chunks(), {}).to_pylist()
    assert [(i["object_id"], i["method"], i["proposed"] == i["original"]) for i in items] == [
        ("lyon_1", "llm", True),
        ("lyon_2", "llm", True),
    ]
    assert items[0]["flags"][0] == (
        "llm_failed: the LLM's theme of this document failed (the LLM call failed: HTTP 500); "
        "the rewrite used the offline theme 'Lyon'"
    )
    assert [plan.item_ids for plan in auto_acceptances(items, unchanged=True, methods=["llm"])] == [[], []]
