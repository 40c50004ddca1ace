"""Rows no dataset file can hold (a lone surrogate, an offset beyond 64 bits) are quarantined at the source stage,
in every source kind, and reported by ``conteb validate``; they never fail a task with an encoding error."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from cli.main import main
from conteb.config import SampleSource, SquadJsonSource, TextFolderSource
from curation.quarantine import QuarantineReason
from curation.sources import load_source
from curation.sources.model import SourceResult
from tests.conftest import load_conteb, materialize_task, squad_article

CONTEXT = "Ana is a city by the sea. The tram opened in 1901."
TRAM = "\\ud800 tram"  # as written in the JSON file: the escape of a lone surrogate, which json.loads accepts


def squad_text(*questions: str, context: str = CONTEXT, title: str = "Ana") -> str:
    """A SQuAD file's text: a good question ``ok``, then each of ``questions`` (raw JSON objects)."""
    article = squad_article(title, [(context, [("ok", "What is Ana?", "a city", 7)])])
    text = json.dumps({"version": "1.1", "data": [article]})
    good = json.dumps(article["paragraphs"][0]["qas"][0])
    return text.replace(good, ", ".join([good, *questions]))


def assert_storable(result: SourceResult) -> None:
    """Every table of ``result`` writes to Parquet (what the source asset does with them)."""
    for table in (result.documents_table(), result.queries_table(), result.quarantine_table()):
        pq.write_table(table, io.BytesIO())


def test_the_text_rules_of_lone_surrogates() -> None:
    from conteb.text import escape_surrogates, lone_surrogate

    assert lone_surrogate("tram") is None and lone_surrogate("café ☕") is None
    assert lone_surrogate("\ud800 tram") == 0 and lone_surrogate("ab\udce9") == 2
    assert escape_surrogates("caf\udce9.txt") == "caf\\udce9.txt" and escape_surrogates("é") == "é"


def test_lone_surrogate_in_a_squad_question_is_quarantined(tmp_path: Path) -> None:
    path = tmp_path / "dev.json"
    path.write_text(
        squad_text(f'{{"id": "sur", "question": "{TRAM}", "answers": [{{"text": "tram", "answer_start": 30}}]}}')
    )
    assert "\\ud800" in path.read_text()
    result = load_source(SquadJsonSource(kind="squad_json", path=path), tmp_path)
    assert [q.query_id for q in result.queries] == ["ok"]
    [record] = result.quarantine
    assert (record.reason, record.object_id, record.source, record.row) == (
        QuarantineReason.INVALID_FIELD,
        "sur",
        "dev.json",
        "data[0].paragraphs[0].qas[1]",
    )
    assert record.detail.startswith("'question': lone surrogate U+D800 at character 0")
    assert_storable(result)


def test_absurd_answer_offset_is_quarantined(tmp_path: Path) -> None:
    path = tmp_path / "dev.json"
    big = 10**30
    path.write_text(
        squad_text(f'{{"id": "big", "question": "When?", "answers": [{{"text": "1901", "answer_start": {big}}}]}}')
    )
    result = load_source(SquadJsonSource(kind="squad_json", path=path), tmp_path)
    assert [q.query_id for q in result.queries] == ["ok"]
    [record] = result.quarantine
    assert (record.reason, record.object_id, record.row) == (
        QuarantineReason.INVALID_FIELD,
        "big",
        "data[0].paragraphs[0].qas[1]",
    )
    assert record.detail == f"'answers[0].answer_start': {big} does not fit a 64-bit offset"
    assert_storable(result)


@pytest.mark.parametrize(
    ("where", "field"),
    [("context", "text"), ("title", "title"), ("answer", "answers[0].text")],
)
def test_lone_surrogates_in_documents_and_answers_are_quarantined(tmp_path: Path, where: str, field: str) -> None:
    path = tmp_path / "dev.json"
    if where == "answer":
        text = squad_text('{"id": "ans", "question": "What?", "answers": [{"text": "\\udfff", "answer_start": 0}]}')
    else:
        text = squad_text(**{where: "Ana\\udc80 " + (CONTEXT if where == "context" else "")})
    path.write_text(text.replace('"Ana\\\\udc80', '"Ana\\udc80'))
    result = load_source(SquadJsonSource(kind="squad_json", path=path), tmp_path)
    reasons = [(r.reason, r.object_kind, r.detail.split(":")[0]) for r in result.quarantine]
    if where == "answer":
        assert [q.query_id for q in result.queries] == ["ok"]
        assert reasons == [(QuarantineReason.INVALID_FIELD, "query", f"'{field}'")]
    else:  # the document goes, and its queries with it
        assert result.documents == [] and result.queries == []
        assert reasons == [
            (QuarantineReason.INVALID_FIELD, "document", f"'{field}'"),
            (QuarantineReason.DOCUMENT_QUARANTINED, "query", "its document"),
        ]
        assert result.quarantine[0].row == "data[0]"
    assert_storable(result)


def test_sample_queries_with_a_lone_surrogate_are_quarantined(tmp_path: Path) -> None:
    (tmp_path / "documents").mkdir()
    (tmp_path / "documents" / "d.txt").write_text("Title\n\nBody text here.\n")
    good = '{"query_id": "q1", "doc_id": "d", "question": "What?", "answer": "Body", "answer_start": 0}'
    bad = '{"query_id": "q2", "doc_id": "d", "question": "\\ud800?", "answer": "Body", "answer_start": 0}'
    (tmp_path / "queries.jsonl").write_text(f"{good}\n{bad}\n")
    result = load_source(SampleSource(kind="sample", path=tmp_path), tmp_path)
    assert [q.query_id for q in result.queries] == ["q1"]
    assert [(r.reason, r.row, r.source) for r in result.quarantine] == [
        (QuarantineReason.INVALID_FIELD, "line 2", "queries.jsonl")
    ]
    assert_storable(result)


def test_a_text_file_whose_name_is_not_utf8_is_quarantined(tmp_path: Path) -> None:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "good.txt").write_text("A speech.")
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.txt"), "wb") as handle:  # a Latin-1 file name
        handle.write(b"Another speech.")
    result = load_source(TextFolderSource(kind="text_folder", path=folder), tmp_path)
    assert [d.doc_id for d in result.documents] == ["good"]
    [record] = result.quarantine
    assert (record.reason, record.source) == (QuarantineReason.INVALID_FIELD, "corpus/caf\\udce9.txt")
    assert record.detail.startswith("'title': lone surrogate U+DCE9")
    assert_storable(result)


def write_task(tmp_path: Path) -> Path:
    """A registry whose one task reads a SQuAD file with a lone surrogate question and an absurd offset."""
    questions = [
        f'{{"id": "sur", "question": "{TRAM}", "answers": [{{"text": "tram", "answer_start": 30}}]}}',
        f'{{"id": "big", "question": "When?", "answers": [{{"text": "1901", "answer_start": {10**30}}}]}}',
        '{"id": "when", "question": "When did the tram open?", "answers": [{"text": "1901", "answer_start": 45}]}',
    ]
    (tmp_path / "dev.json").write_text(squad_text(*questions))
    config = tmp_path / "conteb.yaml"
    config.write_text("tasks:\n  - name: trams\n    source: {kind: squad_json, path: dev.json}\n")
    return config


def test_validate_reports_the_rows_a_source_would_quarantine(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["--config", str(write_task(tmp_path)), "validate"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "  trams: source: documents 1, queries 2, quarantined 2 (invalid_field 2):" in lines
    assert any(
        line.startswith("    dev.json: data[0].paragraphs[0].qas[1]: invalid_field: 'question': lone") for line in lines
    )
    assert any(
        line.startswith("    dev.json: data[0].paragraphs[0].qas[2]: invalid_field: 'answers[0]") for line in lines
    )


def test_the_task_builds_and_publishes_without_the_bad_rows(tmp_path: Path, isolated_env: Path) -> None:
    run, _ = materialize_task(write_task(tmp_path))
    assert run.success
    folder = isolated_env / "conteb" / "trams"
    assert sorted(load_conteb(folder, "queries")["query_id"]) == ["ok", "when"]
    assert "| source | 2 rows quarantined | `invalid_field`: 2 |" in (folder / "README.md").read_text()
