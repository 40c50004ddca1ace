"""Bad questions in a source: quarantined at the source stage with a reason, never published or miscounted."""

import json
from pathlib import Path

import pyarrow as pa
import pytest

from conteb.config import ChunkingConfig, HFColumns
from conteb.schemas import PAIRED_QUERIES
from conteb.text import is_blank
from curation import validation
from curation.chunking import chunk_documents
from curation.pairing import check_answer
from curation.quarantine import QuarantineReason
from curation.sources.articles import assemble
from curation.sources.hf_dataset import rows_to_articles
from curation.sources.sample import load_sample
from curation.sources.squad import load_squad_json
from review.model import has_text
from tests.conftest import squad_article, write_squad

CONTEXT = "Napoleon was a French emperor."


def squad_with(tmp_path: Path, *questions: dict) -> Path:
    """A one-article SQuAD file whose paragraph holds a good question ``ok`` and ``questions``."""
    article = squad_article("T", [(CONTEXT, [("ok", "Who?", "French emperor", 15)])])
    article["paragraphs"][0]["qas"].extend(questions)
    return write_squad(tmp_path / "s.json", [article])


def hf_row(query_id: str, question: str, answer_start: object) -> dict:
    """A row of a SQuAD-like Hugging Face dataset whose answer is ``French`` at ``answer_start``."""
    answers = {"text": ["French"], "answer_start": [answer_start]}
    return {"id": query_id, "title": "T", "context": CONTEXT, "question": question, "answers": answers}


INVISIBLE = ["\u200b\u00a0\u3000", "\ufeff\u2060\u180e", "\u2028\u2029\u200d", "\u3164\u2800"]
"""Questions a reader sees nothing in, which ``str.strip()`` does not empty."""

DEFAULT_IGNORABLE = ["\ufe0f\ufe0f", "\u180b\u180c", "\u17b4\u17b5", "\U000e0001\U000e0020", "\u00ad\u061c"]
"""Questions of Unicode Default_Ignorable_Code_Point characters only (variation selectors, Khmer inherent vowels,
tag characters, soft hyphen, Arabic letter mark): nothing to see, whatever their general category."""


@pytest.mark.parametrize("question", ["", "   \n\t", *INVISIBLE])
def test_empty_squad_question_is_quarantined(tmp_path: Path, question: str) -> None:
    answers = [{"text": "French", "answer_start": 15}]
    result = load_squad_json(squad_with(tmp_path, {"id": "e", "question": question, "answers": answers}))
    assert [q.query_id for q in result.queries] == ["ok"]
    [record] = result.quarantine
    assert (record.reason, record.object_id, record.row) == (
        QuarantineReason.EMPTY_QUERY,
        "e",
        "data[0].paragraphs[0].qas[1]",
    )
    assert record.detail == "empty question"


@pytest.mark.parametrize("question", DEFAULT_IGNORABLE)
def test_default_ignorable_questions_are_blank_and_quarantined(tmp_path: Path, question: str) -> None:
    assert is_blank(question) and is_blank(f" {question}\u200b ")
    answers = [{"text": "French", "answer_start": 15}]
    result = load_squad_json(squad_with(tmp_path, {"id": "di", "question": question, "answers": answers}))
    assert [q.query_id for q in result.queries] == ["ok"]
    assert [(r.reason, r.object_id) for r in result.quarantine] == [(QuarantineReason.EMPTY_QUERY, "di")]


@pytest.mark.parametrize("question", ["Who?", "\u2764\ufe0f?", "\u1828\u180b", "\u0600"])
def test_questions_with_something_visible_are_kept(tmp_path: Path, question: str) -> None:
    """A visible character keeps a question, even beside a variation selector; U+0600 ARABIC NUMBER SIGN is a format
    character (Cf) that is drawn, not default-ignorable: the general category alone does not make text blank."""
    assert not is_blank(question)
    answers = [{"text": "French", "answer_start": 15}]
    result = load_squad_json(squad_with(tmp_path, {"id": "v", "question": question, "answers": answers}))
    assert [q.query_id for q in result.queries] == ["ok", "v"] and result.quarantine == []


@pytest.mark.parametrize("question", ["\u0301\u0301", "\u0301", " \u20dd\u200b", "\u0e31\u0e47"])
def test_a_question_without_a_base_character_is_quarantined_as_blank(tmp_path: Path, question: str) -> None:
    """issue 33: a question made only of combining marks (categories M, C, Z: nothing for a mark to sit on) was
    published; it is blank by the one rule (conteb.text), with its own words."""
    answers = [{"text": "French", "answer_start": 15}]
    result = load_squad_json(squad_with(tmp_path, {"id": "m", "question": question, "answers": answers}))
    assert [q.query_id for q in result.queries] == ["ok"]
    [record] = result.quarantine
    assert (record.reason, record.object_id, record.detail) == (
        QuarantineReason.EMPTY_QUERY,
        "m",
        "blank: no visible base character",
    )


def test_empty_hf_question_is_quarantined() -> None:
    rows = [hf_row("a", "Who?", 15), hf_row("b", " ", 15), hf_row("c", INVISIBLE[0], 15)]
    result = assemble(rows_to_articles(rows, HFColumns(), "ds"), "ds")
    assert [q.query_id for q in result.queries] == ["a"]
    assert [(r.reason, r.object_id, r.row) for r in result.quarantine] == [
        (QuarantineReason.EMPTY_QUERY, "b", "row 1"),
        (QuarantineReason.EMPTY_QUERY, "c", "row 2"),
    ]


def test_empty_sample_question_is_quarantined(tmp_path: Path) -> None:
    (tmp_path / "documents").mkdir()
    (tmp_path / "documents" / "d.txt").write_text("Title\n\nBody text here.\n")
    lines = [
        {"query_id": "q1", "doc_id": "d", "question": "What?", "answer": "Body", "answer_start": 0},
        {"query_id": "q2", "doc_id": "d", "question": "\u2003", "answer": "Body", "answer_start": 0},
        {"query_id": "q3", "doc_id": "d", "question": INVISIBLE[1], "answer": "Body", "answer_start": 0},
    ]
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = load_sample(tmp_path)
    assert [q.query_id for q in result.queries] == ["q1"]
    assert [(r.reason, r.row) for r in result.quarantine] == [
        (QuarantineReason.EMPTY_QUERY, "line 2"),
        (QuarantineReason.EMPTY_QUERY, "line 3"),
    ]


def test_dataset_check_fails_on_an_empty_query() -> None:
    rows = [
        {"query_id": "q1", "query": "Who?", "chunk_id": "d_0", "chunk_ids": ["d_0"]},
        {"query_id": "q2", "query": "  ", "chunk_id": "d_0", "chunk_ids": ["d_0"]},
    ]
    table = pa.Table.from_pylist(rows, schema=pa.schema([PAIRED_QUERIES.field(n) for n in rows[0]]))
    outcome = validation.no_empty_queries(table)
    assert (outcome.passed, outcome.failures, outcome.checked) == (False, 1, 2)
    assert outcome.examples == ["query 'q2': empty text"]
    assert validation.no_empty_queries(table.slice(0, 1)).passed


def test_dataset_checks_fail_on_invisible_queries_and_chunks() -> None:
    rows = [
        {"query_id": f"q{i}", "query": text, "chunk_id": "d_0", "chunk_ids": ["d_0"]}
        for i, text in enumerate(INVISIBLE)
    ]
    queries = pa.Table.from_pylist(rows, schema=pa.schema([PAIRED_QUERIES.field(n) for n in rows[0]]))
    assert validation.no_empty_queries(queries).failures == len(INVISIBLE)
    chunks = pa.table({"chunk_id": ["d_0", "d_1"], "chunk": ["Text.", "Text."], "og_chunk": ["Text.", INVISIBLE[1]]})
    outcome = validation.no_empty_chunks(chunks)
    assert (outcome.failures, outcome.examples) == (1, ["'d_1': empty text"])


@pytest.mark.parametrize("text", [None, "", " \t\n", "\x00\x1f", *INVISIBLE, "\u034f\u115f\u1160\uffa0"])
def test_blank_texts(text: str | None) -> None:
    assert is_blank(text)


@pytest.mark.parametrize("text", ["a", "\u200ba\u200b", "\u00a0.", "e\u0301", "\u0600\u0301", "\u4e00", "\u2003?"])
def test_texts_with_something_to_see_are_not_blank(text: str) -> None:
    assert not is_blank(text)


def test_every_emptiness_check_uses_the_one_rule() -> None:
    invisible = INVISIBLE[0]
    chunked = chunk_documents(pa.table({"doc_id": ["d0", "d1"], "title": ["T", "T"], "text": ["Text.", invisible],
                                        "source": ["s", "s"]}), ChunkingConfig())  # fmt: skip
    assert [(r.object_id, r.reason) for r in chunked.quarantine] == [("d1", QuarantineReason.EMPTY_DOCUMENT)]
    assert check_answer("Text.", invisible, 0) == (
        QuarantineReason.EMPTY_ANSWER,
        "answer text is blank (empty, whitespace or invisible characters only)",
    )
    assert not has_text(invisible) and has_text("fixed")


@pytest.mark.parametrize(
    ("question", "field", "shown"),
    [
        ({"is_impossible": "false"}, "is_impossible", "'false'"),
        ({"is_impossible": 0}, "is_impossible", "0"),
        ({"answers": [{"text": "French", "answer_start": True}]}, "answers[0].answer_start", "True"),
        ({"answers": [{"text": "French", "answer_start": 15.0}]}, "answers[0].answer_start", "15.0"),
        ({"answers": [{"text": "French", "answer_start": "15"}]}, "answers[0].answer_start", "'15'"),
        ({"answers": [{"text": 7, "answer_start": 15}]}, "answers[0].text", "7"),
        ({"answers": {"text": "French"}}, "answers", "{'text': 'French'}"),
        ({"question": None}, "question", "None"),
        ({"id": True}, "id", "True"),
    ],
)
def test_squad_fields_are_parsed_strictly_and_bad_rows_quarantined(
    tmp_path: Path, question: dict, field: str, shown: str
) -> None:
    raw = {"id": "x", "question": "Who?", "answers": [{"text": "French", "answer_start": 15}], **question}
    path = squad_with(tmp_path, raw)
    result = load_squad_json(path)
    assert [q.query_id for q in result.queries] == ["ok"]  # not kept, not counted as unanswerable
    assert "unanswerable_skipped" not in result.stats
    [record] = result.quarantine
    assert (record.reason, record.source, record.row) == (
        QuarantineReason.INVALID_FIELD,
        str(path),
        "data[0].paragraphs[0].qas[1]",
    )
    assert record.detail.startswith(f"'{field}': ") and shown in record.detail


def test_squad_booleans_still_work(tmp_path: Path) -> None:
    answers = [{"text": "French", "answer_start": 15}]
    result = load_squad_json(
        squad_with(
            tmp_path,
            {"id": "u", "question": "Why?", "answers": [], "is_impossible": True},
            {"id": "a", "question": "Who?", "answers": answers, "is_impossible": False},
        )
    )
    assert [q.query_id for q in result.queries] == ["ok", "a"]
    assert result.stats["unanswerable_skipped"] == 1 and result.quarantine == []


def test_hf_offsets_must_be_integers_not_booleans() -> None:
    rows = [hf_row("a", "Who?", True)]
    result = assemble(rows_to_articles(rows, HFColumns(), "ds"), "ds")
    assert result.queries == []
    [record] = result.quarantine
    assert record.reason == QuarantineReason.INVALID_FIELD and "answer_start" in record.detail
