import pyarrow as pa
import pytest

from conteb.schemas import PAIRED_QUERIES
from curation.llm_pairing import (
    apply_llm_pairing,
    build_pairing_requests,
    combine_pairings,
    pairing_agreement,
    pairing_schema,
)
from curation.quarantine import QuarantineReason
from llm.prompts import load_prompt
from llm.types import LLMResult
from tests.builders import chunks_of, documents, queries

TEXT = "Alpha one. " + "Beta two. " + "Gamma three."  # chunks [0,11) [11,21) [21,33)
BOUNDS = ((0, 11), (11, 21), (21, 33))


def tables(specs: list[dict]) -> tuple[pa.Table, pa.Table, pa.Table]:
    docs = documents([("d", "Greek", TEXT), ("e", "Empty", " ")])
    # chunk rows deliberately out of order: the prompt must list them by chunk_index
    return queries(specs), docs, chunks_of("d", TEXT, BOUNDS, reverse=True)


def ok(query_id: str, *indices: int) -> tuple[str, LLMResult]:
    return f"pair:{query_id}", LLMResult(f"pair:{query_id}", value={"chunk_indices": list(indices)})


def test_schema_bounds_indices() -> None:
    schema = pairing_schema(3)
    assert schema["required"] == ["chunk_indices"] and schema["additionalProperties"] is False
    items = schema["properties"]["chunk_indices"]
    assert items["type"] == "array"
    assert items["items"] == {"type": "integer", "minimum": 0, "maximum": 2}
    with pytest.raises(ValueError):
        pairing_schema(0)


def test_requests_list_chunks_in_order_with_answer_when_known() -> None:
    queries, docs, chunks = tables(
        [
            {"id": "a", "answers": [("two", 16)]},
            {"id": "b"},  # no answer
            {"id": "x", "doc": "e"},  # document without chunks: not requested
            {"id": "y", "doc": "missing"},  # unknown document: not requested
        ]
    )
    requests = build_pairing_requests(queries, docs, chunks)
    assert [r.custom_id for r in requests] == ["pair:a", "pair:b"]
    first, second = requests
    user = first.messages[1]["content"]
    assert user.index("[chunk 0]\nAlpha one.") < user.index("[chunk 1]\nBeta two.") < user.index("[chunk 2]\nGamma")
    assert "Answer: two" in user and "Document title: Greek" in user and "query a?" in user
    assert "Answer:" not in second.messages[1]["content"]
    assert first.prompt_tag == load_prompt("pairing").tag
    assert first.schema == pairing_schema(3)


def test_validator_accepts_valid_and_names_range() -> None:
    queries, docs, chunks = tables([{"id": "a"}])
    [request] = build_pairing_requests(queries, docs, chunks)
    validate = request.validator
    assert validate({"chunk_indices": [2, 0]}) is None
    assert validate({"chunk_indices": []}) is None
    assert "0..2" in validate({"chunk_indices": [3]}) and "does not exist" in validate({"chunk_indices": [3]})
    assert "0..2" in validate({"chunk_indices": [-1]})
    assert "twice" in validate({"chunk_indices": [1, 1]})
    assert "not an integer" in validate({"chunk_indices": ["1"]})
    assert "not an integer" in validate({"chunk_indices": [True]})
    assert "list" in validate({})


def test_apply_pairs_and_quarantines() -> None:
    queries, docs, chunks = tables(
        [
            {"id": "a", "answers": [("two", 16)]},  # valid span
            {"id": "b", "answers": [("free-form answer", -1)]},  # no usable span
            {"id": "c"},  # no answer
            {"id": "none"},
            {"id": "err"},
            {"id": "bad"},
            {"id": "lost"},  # no result at all
            {"id": "x", "doc": "e"},
            {"id": "y", "doc": "missing"},
        ]
    )
    results = dict(
        [
            ok("a", 1),
            ok("b", 2, 0),
            ok("c", 0),
            ok("none"),
            ("pair:err", LLMResult("pair:err", error="timeout after 3 attempts")),
            ok("bad", 7),
        ]
    )
    result = apply_llm_pairing(queries, docs, chunks, results, model="gpt-4o", prompt_version="pairing@v1:abc")
    a, b, c = result.rows
    assert (a["chunk_id"], a["chunk_ids"], a["answer"], a["answer_start"], a["answer_end"]) == (
        "d_1",
        ["d_1"],
        "two",
        16,
        19,
    )
    assert (b["chunk_id"], b["chunk_ids"], b["answer"], b["answer_start"]) == (
        "d_2",
        ["d_2", "d_0"],
        "free-form answer",
        None,
    )
    assert (c["chunk_id"], c["answer"], c["answer_start"], c["answer_end"]) == ("d_0", None, None, None)
    assert {row["pairing"] for row in result.rows} == {"llm"}
    reasons = {record.object_id: (str(record.reason), record.detail) for record in result.quarantine}
    failed = QuarantineReason.LLM_FAILED
    assert reasons["none"][0] == QuarantineReason.LLM_NO_CHUNK
    assert reasons["err"] == (failed, "timeout after 3 attempts")
    assert reasons["bad"][0] == failed and "0..2" in reasons["bad"][1]
    assert reasons["lost"][0] == failed and "no LLM result" in reasons["lost"][1]
    assert reasons["x"][0] == QuarantineReason.DOCUMENT_QUARANTINED
    assert reasons["y"][0] == QuarantineReason.UNKNOWN_DOCUMENT
    assert {record.stage for record in result.quarantine} == {"llm_pairing"}  # told apart from span pairing
    assert result.stats == {
        "queries": 9,
        "paired": 3,
        "none": 1,
        "failed": 3,
        "missing_document": 2,
        "multi_chunk": 1,
        "answer_without_span": 1,
    }
    table = result.table()
    assert table.schema == PAIRED_QUERIES and table.num_rows == 3


def paired(rows: list[tuple[str, str, list[str], str]]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"query_id": q, "query": "?", "chunk_id": c, "chunk_ids": ids, "doc_id": "d", "pairing": p, "source": "f"}
            for q, c, ids, p in rows
        ],
        schema=PAIRED_QUERIES,
    )


SPAN = paired(
    [
        ("q1", "d_0", ["d_0"], "span"),
        ("q2", "d_1", ["d_0", "d_1"], "span"),
        ("q3", "d_2", ["d_2"], "span"),
        ("q4", "d_1", ["d_1"], "span"),
        ("s5", "d_0", ["d_0"], "span"),  # span only
    ]
)
LLM = paired(
    [
        ("q4", "d_2", ["d_2"], "llm"),  # differs, outside span chunk_ids
        ("q1", "d_0", ["d_0"], "llm"),  # exact
        ("q2", "d_0", ["d_0"], "llm"),  # differs, inside span chunk_ids
        ("q3", "d_2", ["d_2", "d_1"], "llm"),  # exact
        ("l6", "d_1", ["d_1"], "llm"),  # llm only
    ]
)


def test_agreement_by_hand() -> None:
    assert pairing_agreement(SPAN, LLM) == {
        "count": 4,
        "exact": 2,
        "exact_rate": 0.5,
        "contained": 3,
        "contained_rate": 0.75,
        "span_only": 1,
        "llm_only": 1,
        "disagreements": ["q4", "q2"],  # outside the span's chunks first
    }


def test_agreement_empty_and_capped() -> None:
    empty = pairing_agreement(SPAN, PAIRED_QUERIES.empty_table())
    assert (empty["count"], empty["exact_rate"], empty["disagreements"]) == (0, 0.0, [])
    many_span = paired([(f"q{i:02d}", "d_0", ["d_0"], "span") for i in range(30)])
    many_llm = paired([(f"q{i:02d}", "d_1", ["d_1"], "llm") for i in range(30)])
    capped = pairing_agreement(many_span, many_llm)
    assert capped["count"] == 30 and capped["exact"] == 0
    assert capped["disagreements"] == [f"q{i:02d}" for i in range(20)]


def test_combine_prefers_span() -> None:
    combined = combine_pairings(SPAN, LLM)
    assert combined.schema == PAIRED_QUERIES
    by_id = {row["query_id"]: row for row in combined.to_pylist()}
    assert sorted(by_id) == ["l6", "q1", "q2", "q3", "q4", "s5"]
    assert by_id["q4"]["pairing"] == "span" and by_id["q4"]["chunk_id"] == "d_1"
    assert by_id["l6"]["pairing"] == "llm"
    assert combine_pairings(SPAN, PAIRED_QUERIES.empty_table()).num_rows == 5
