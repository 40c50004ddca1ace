"""Stage 3: reformulation requests, validators, the offline mask path, a scripted LLM path, leaks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from conteb.config import ChunkingConfig
from conteb.schemas import REFORMULATED_CHUNKS, THEMES
from curation.chunking import chunk_documents
from curation.pairing import pair_by_span
from curation.reformulation import (
    OUTCOMES,
    REFORMULATION_SCHEMA,
    ReformulationOutput,
    apply_reformulations,
    build_reformulation_requests,
    chunk_outcome,
    describe_stats,
    detect_leaks,
    outcome_counts,
    rewrite_validator,
)
from curation.sources.sample import load_sample
from curation.themes.mentions import find_mentions, theme_variants
from curation.themes.stage import themes_table
from llm.prompts import load_prompt
from llm.types import LLMResult
from tests.builders import LYON_TEXTS, chunks_from_texts

BodyEdit = Callable[[str, pa.Table], tuple[str, pa.Table]]
SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"

TEXTS = LYON_TEXTS


def _chunks() -> pa.Table:
    return chunks_from_texts("lyon", TEXTS)


def _themes(aliases: list[str] | None = None) -> pa.Table:
    row = {"doc_id": "lyon", "theme": "Lyon", "aliases": aliases or [], "method": "title"}
    return pa.Table.from_pylist([row], schema=THEMES)


ANSWERS = {"lyon_1": ["1978", "four lines"], "lyon_2": ["Lyon metro", "TCL"]}


def test_requests_skip_first_chunks() -> None:
    requests = build_reformulation_requests(_chunks(), _themes(["Lugdunum"]))
    assert [r.custom_id for r in requests] == ["reformulate:lyon_1", "reformulate:lyon_2"]
    request = requests[0]
    assert request.schema == REFORMULATION_SCHEMA and request.prompt_tag == load_prompt("reformulation").tag
    user = request.messages[1]["content"]
    assert "Subject: Lyon" in user and "Other names of the subject: Lugdunum" in user and TEXTS[1] in user
    assert REFORMULATION_SCHEMA["required"] == ["rewritten"] and REFORMULATION_SCHEMA["additionalProperties"] is False


def test_requests_need_a_theme_for_every_document() -> None:
    with pytest.raises(ValueError, match="no theme for documents"):
        build_reformulation_requests(_chunks(), THEMES.empty_table())


def test_rewrite_validator_bounds() -> None:
    validate = rewrite_validator("x" * 100)
    assert validate({"rewritten": "y" * 50}) is None and validate({"rewritten": "y" * 150}) is None
    assert "empty" in validate({"rewritten": "  "})
    assert "less than half" in validate({"rewritten": "y" * 49})
    assert "more than 150%" in validate({"rewritten": "y" * 151})


def test_detect_leaks() -> None:
    variants = theme_variants("Lyon", [])
    mentions, lost = detect_leaks("In Lyon and LYON, Lyon's metro opened in 1979.", variants, ["1978", "metro", "1978"])
    assert mentions == ["Lyon", "LYON", "Lyon's"]
    assert lost == ["1978"]
    assert detect_leaks("The city metro.", variants, ["metro", " "]) == ([], [])


def test_offline_mask_path() -> None:
    output = apply_reformulations(_chunks(), _themes(), ANSWERS, None, None, None)
    assert output.table.schema == REFORMULATED_CHUNKS and output.failures == []
    rows = output.table.to_pylist()
    assert rows[0] == {
        "chunk_id": "lyon_0",
        "doc_id": "lyon",
        "chunk_index": 0,
        "og_chunk": TEXTS[0],
        "chunk": TEXTS[0],
        "theme": "Lyon",
        "leaked_mentions": [],
        "lost_answers": [],
        "flagged": False,
        "llm_failure": None,
        "method": "unchanged",
        "model": None,
        "prompt_version": None,
    }
    assert rows[1]["chunk"] == "The subject's metro opened in 1978 and has four lines."
    assert (rows[1]["method"], rows[1]["model"], rows[1]["prompt_version"], rows[1]["flagged"]) == (
        "mask",
        None,
        None,
        False,
    )
    assert rows[2]["chunk"] == "The subject metro is run by TCL."
    assert rows[2]["lost_answers"] == ["Lyon metro"] and rows[2]["flagged"]  # an answer naming the theme is lost
    assert output.stats == {
        "kept_first": 1,
        "rewritten": 0,
        "rewrite_unchanged": 0,
        "masked": 2,
        "mask_unchanged": 0,
        "failed": 0,
        "flagged": 1,
        "leaks": 0,
        "lost_answers": 1,
    }


def _result(chunk_id: str, rewritten: str | None = None, error: str | None = None) -> LLMResult:
    value = None if rewritten is None else {"rewritten": rewritten}
    return LLMResult(f"reformulate:{chunk_id}", value=value, error=error, model="scripted-model" if value else None)


def test_scripted_llm_path_with_leak() -> None:
    results = {
        "reformulate:lyon_1": _result("lyon_1", "The city's metro opened in 1978 and has four lines."),
        "reformulate:lyon_2": _result("lyon_2", "The Lyon metro is operated by TCL."),  # leaks the name
    }
    output = apply_reformulations(_chunks(), _themes(), ANSWERS, results, "gpt-4o", "reformulation@v1:abc")
    rows = output.table.to_pylist()
    assert [r["method"] for r in rows] == ["unchanged", "llm", "llm"]
    assert rows[1]["chunk"] == "The city's metro opened in 1978 and has four lines." and not rows[1]["flagged"]
    assert (rows[1]["model"], rows[1]["prompt_version"]) == ("scripted-model", "reformulation@v1:abc")
    assert rows[2]["leaked_mentions"] == ["Lyon"] and rows[2]["lost_answers"] == [] and rows[2]["flagged"]
    assert output.stats["rewritten"] == 2 and output.stats["leaks"] == 1 and output.stats["flagged"] == 1
    assert output.failures == []


def test_llm_failures_are_masked_labelled_and_reported() -> None:
    results = {
        "reformulate:lyon_1": _result("lyon_1", error="timeout after 3 attempts"),
        "reformulate:lyon_2": _result("lyon_2", "Too short."),  # fails the length check
    }
    output = apply_reformulations(_chunks(), _themes(), ANSWERS, results, "gpt-4o", None)
    rows = output.table.to_pylist()
    assert [r["method"] for r in rows] == ["unchanged", "mask", "mask"]
    assert rows[1]["chunk"] == "The subject's metro opened in 1978 and has four lines." and rows[1]["model"] is None
    assert [(f.object_id, f.stage, str(f.reason), f.row, f.source) for f in output.failures] == [
        ("lyon_1", "reformulation", "llm_failed", "reformulate:lyon_1", "llm:gpt-4o"),
        ("lyon_2", "reformulation", "llm_failed", "reformulate:lyon_2", "llm:scripted-model"),
    ]
    assert "timeout" in output.failures[0].detail and "less than half" in output.failures[1].detail
    assert output.stats["failed"] == 2 and output.stats["masked"] == 2 and output.stats["rewritten"] == 0


def test_missing_result_is_a_failure() -> None:
    output = apply_reformulations(_chunks(), _themes(), {}, {}, "m", None)
    assert (
        output.stats["failed"] == 2
        and [f.detail.split(";")[0] for f in output.failures] == ["no result for this request"] * 2
    )


SAMPLE_CITY, SAMPLE_CITY_NAME = "arlenmouth", "Arlenmouth"  # a city document of data/sample


def _sample_city(body_edit: BodyEdit | None = None) -> tuple[pa.Table, pa.Table, dict[str, list[str]]]:
    """The sample's Arlenmouth document chunked and paired (``body_edit`` may rewrite the text first)."""
    source = load_sample(SAMPLE)
    documents = source.documents_table().filter(pc.equal(source.documents_table()["doc_id"], SAMPLE_CITY))
    queries = source.queries_table().filter(pc.equal(source.queries_table()["doc_id"], SAMPLE_CITY))
    if body_edit is not None:
        text, queries = body_edit(documents["text"][0].as_py(), queries)
        documents = documents.set_column(documents.schema.get_field_index("text"), "text", pa.array([text]))
    chunks = chunk_documents(documents, ChunkingConfig()).chunks
    paired = pair_by_span(queries, documents, chunks).table()
    answers: dict[str, list[str]] = {}
    for row in paired.to_pylist():
        answers.setdefault(row["chunk_id"], []).append(row["answer"])
    return documents, chunks, answers


def _assert_masked_without_losing_answers(
    documents: pa.Table, chunks: pa.Table, answers: dict[str, list[str]]
) -> ReformulationOutput:
    themes, _ = themes_table(documents, None, None)
    output = apply_reformulations(chunks, themes, answers, None, None, None)
    variants = theme_variants(SAMPLE_CITY_NAME, [])
    for row in output.table.to_pylist():
        if row["chunk_index"] > 0:
            assert find_mentions(row["chunk"], variants) == [], row["chunk_id"]
            for answer in answers.get(row["chunk_id"], []):
                assert answer in row["chunk"] or answer in row["lost_answers"]
    return output


def test_sample_city_masking() -> None:
    documents, chunks, answers = _sample_city()
    assert chunks.num_rows > 3 and sum(len(a) for a in answers.values()) == 6
    output = _assert_masked_without_losing_answers(documents, chunks, answers)
    assert output.stats["lost_answers"] == 0
    # the sample names its city in its first paragraph: masking leaves later chunks without a mention as they were,
    # and counts them as such, not as masked
    later = [row for row in output.table.to_pylist() if row["chunk_index"] > 0]
    unchanged = sum(row["chunk"] == row["og_chunk"] for row in later)
    assert unchanged > 0 and output.stats["mask_unchanged"] == unchanged
    assert output.stats["masked"] == len(later) - unchanged and output.stats["kept_first"] == 1


def test_counts_say_whether_a_rewrite_or_a_mask_changed_the_chunk() -> None:
    texts = [*TEXTS, "Its old town is listed by UNESCO."]  # a later chunk that does not name Lyon
    chunks = chunks_from_texts("lyon", texts)
    masked = apply_reformulations(chunks, _themes(), ANSWERS, None, None, None)
    assert [chunk_outcome(r["method"], r["chunk"], r["og_chunk"]) for r in masked.table.to_pylist()] == [
        "kept_first", "masked", "masked", "mask_unchanged",
    ]  # fmt: skip
    assert (masked.stats["masked"], masked.stats["mask_unchanged"], masked.stats["kept_first"]) == (2, 1, 1)
    assert describe_stats(masked.stats) == (
        "first chunks left unchanged (each document's first chunk introduces its subject): 1, "
        "chunks masked (theme mentions replaced by 'the subject'): 2, "
        "chunks left unchanged by masking (no theme mention to mask): 1; "
        "flagged for review: 1 (still name the theme: 0, lost an answer: 1)"
    )
    assert outcome_counts(masked.table) == {
        "first chunks left unchanged (each document's first chunk introduces its subject)": 1,
        "chunks masked (theme mentions replaced by 'the subject')": 2,
        "chunks left unchanged by masking (no theme mention to mask)": 1,
    }
    results = {
        "reformulate:lyon_1": _result("lyon_1", "The city's metro opened in 1978 and has four lines."),
        "reformulate:lyon_2": _result("lyon_2", "The metro is run by TCL."),
        "reformulate:lyon_3": _result("lyon_3", texts[3]),  # nothing to change: returned as it was
    }
    rewritten = apply_reformulations(chunks, _themes(), ANSWERS, results, "m", None)
    assert (rewritten.stats["rewritten"], rewritten.stats["rewrite_unchanged"], rewritten.stats["failed"]) == (2, 1, 0)
    assert sum(rewritten.stats[key] for key in OUTCOMES) == chunks.num_rows
    assert "chunks the LLM returned unchanged: 1" in describe_stats(rewritten.stats)


def test_sample_city_naming_its_subject_everywhere() -> None:
    """The sample names Arlenmouth only in its first paragraph: name it in later ones too, and add an
    answer that contains the name — masking must remove every mention and flag that answer as lost."""

    def edit(text: str, queries: pa.Table) -> tuple[str, pa.Table]:
        name = SAMPLE_CITY_NAME
        text = text.replace("The city ", f"{name} ").replace("the city", name)
        text = text.replace("The tram network", f"The {name} tram network")
        rows = queries.to_pylist()
        for row in rows:  # answers moved with the edit: find them again (each occurs once)
            answer = row["answers"][0]["text"]
            assert text.count(answer) == 1
            row["answers"] = [{"text": answer, "char_start": text.index(answer)}]
        extra = dict(rows[0], query_id=f"{SAMPLE_CITY}-extra", query="What is the name of the tram network?")
        extra["answers"] = [{"text": f"{name} tram network", "char_start": text.index(f"{name} tram network")}]
        return text, pa.Table.from_pylist([*rows, extra], schema=queries.schema)

    documents, chunks, answers = _sample_city(edit)
    later = [t for t, i in zip(chunks["og_chunk"].to_pylist(), chunks["chunk_index"].to_pylist(), strict=True) if i]
    assert sum(len(find_mentions(t, theme_variants(SAMPLE_CITY_NAME, []))) for t in later) >= 5
    output = _assert_masked_without_losing_answers(documents, chunks, answers)
    lost = {a for row in output.table.to_pylist() for a in row["lost_answers"]}
    assert lost == {f"{SAMPLE_CITY_NAME} tram network"}
    assert output.stats["lost_answers"] == 1 and output.stats["leaks"] == 0
