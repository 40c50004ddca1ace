"""Review items: the generic constructor and the items built from reformulated chunks."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa

from conteb.schemas import REVIEW_ITEMS, THEMES
from curation.reformulation import apply_reformulations
from curation.review_items import review_item, review_items_from_reformulations, review_items_table
from llm.types import LLMResult
from tests.builders import LYON_TEXTS, chunks_from_texts

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
