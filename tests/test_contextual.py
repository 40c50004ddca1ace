import pyarrow as pa

from conteb.names import Stage
from conteb.schemas import CHUNK_CONTEXTS, CHUNKS, SOURCE_DOCUMENTS
from curation.contextual import (
    CONTEXT_SCHEMA,
    CUSTOM_ID_PREFIX,
    build_context_requests,
    contexts_table,
    validate_context,
)
from curation.llm_results import chunk_failures
from curation.quarantine import quarantine_table
from llm.prompts import load_prompt
from llm.types import LLMResult

TEXT = "a" * 40 + "PASSAGE" + "b" * 40


def tables() -> tuple[pa.Table, pa.Table]:
    docs = pa.Table.from_pylist([{"doc_id": "d", "title": "D", "text": TEXT, "source": "f"}], schema=SOURCE_DOCUMENTS)
    chunks = pa.Table.from_pylist(
        [
            {
                "chunk_id": "d_0",
                "doc_id": "d",
                "chunk_index": 0,
                "char_start": 0,
                "char_end": 40,
                "og_chunk": TEXT[:40],
            },
            {
                "chunk_id": "d_1",
                "doc_id": "d",
                "chunk_index": 1,
                "char_start": 40,
                "char_end": 47,
                "og_chunk": "PASSAGE",
            },
            {
                "chunk_id": "d_2",
                "doc_id": "d",
                "chunk_index": 2,
                "char_start": 47,
                "char_end": 87,
                "og_chunk": TEXT[47:],
            },
            {"chunk_id": "x_0", "doc_id": "x", "chunk_index": 0, "char_start": 0, "char_end": 1, "og_chunk": "?"},
        ],
        schema=CHUNKS,
    )
    return chunks, docs


def test_schema_is_strict() -> None:
    assert CONTEXT_SCHEMA == {
        "type": "object",
        "properties": {"context": {"type": "string"}},
        "required": ["context"],
        "additionalProperties": False,
    }


def test_requests_use_the_shared_window() -> None:
    chunks, docs = tables()
    requests = build_context_requests(chunks, docs)
    assert [r.custom_id for r in requests] == ["context:d_0", "context:d_1", "context:d_2"]  # x: unknown document
    assert f"<document>\nTitle: D\n\n{TEXT}\n</document>" in requests[1].messages[1]["content"]
    assert requests[1].prompt_tag == load_prompt("chunk_context").tag and requests[1].schema == CONTEXT_SCHEMA
    [_, middle, _] = build_context_requests(chunks, docs, max_document_chars=17)
    user = middle.messages[1]["content"]
    assert "<document>\nTitle: D\n\n[...] aaaaaPASSAGEbbbbb [...]\n</document>" in user
    assert middle.prefix_group == "d@35:52" and requests[1].prefix_group == "d@0:87"  # the window shown
    assert "<passage>\nPASSAGE\n</passage>" in user


def test_validator() -> None:
    assert validate_context({"context": "From the D article, on its passage."}) is None
    assert validate_context({"context": "x" * 600}) is None
    assert "601 characters" in validate_context({"context": "x" * 601})
    assert "non-empty" in validate_context({"context": "  "})
    assert "non-empty" in validate_context({})


def test_contexts_table_and_failures() -> None:
    chunks, _ = tables()
    results = {
        "context:d_0": LLMResult("context:d_0", value={"context": "  Opening of D.  "}),
        "context:d_1": LLMResult("context:d_1", error="HTTP 500"),
        "context:d_2": LLMResult("context:d_2", value={"context": ""}),
    }
    table, failures = contexts_table(chunks, results, model="gpt-4o-mini", prompt_version="chunk_context@v1:abc")
    assert table.schema == CHUNK_CONTEXTS
    assert table.to_pylist() == [
        {
            "chunk_id": "d_0",
            "doc_id": "d",
            "context": "Opening of D.",
            "method": "llm",
            "model": "gpt-4o-mini",
            "prompt_version": "chunk_context@v1:abc",
        }
    ]
    assert [chunk_id for chunk_id, _ in failures] == ["d_1", "d_2", "x_0"]
    assert failures[0][1] == "the LLM call failed: HTTP 500" and "non-empty" in failures[1][1]
    assert failures[2][1] == "no result for this request"
    records = chunk_failures(Stage.CHUNK_CONTEXTS, CUSTOM_ID_PREFIX, failures, chunks, "gpt-4o-mini")
    assert [row for row in quarantine_table(records).to_pylist() if row["object_id"] == "d_1"] == [
        {
            "stage": "chunk_contexts",
            "reason": "llm_failed",
            "object_kind": "chunk",
            "object_id": "d_1",
            "doc_id": "d",
            "source": "llm:gpt-4o-mini",
            "row": "context:d_1",
            "detail": "the LLM call failed: HTTP 500",
        }
    ]
    assert [record.doc_id for record in records] == ["d", "d", "x"]
    empty, failures = contexts_table(chunks.slice(0, 0), {}, model="m", prompt_version="p")
    assert empty.num_rows == 0 and empty.schema == CHUNK_CONTEXTS and failures == []
