"""Tests of the corpus replication of the scale benchmark (``bench/scale_corpus.py``), through the real loader.

Part of the default suite; the module under test lives in ``bench/`` (a namespace package beside ``tests/``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pytest

from bench.scale_corpus import count_questions, read_squad, replicate_squad, write_squad
from curation.sources.squad import load_squad_json
from curation.themes.naming import theme_from_title


def _article(title: str, paragraphs: list[tuple[str, str, str, str]]) -> dict:
    """A SQuAD article: ``(context, question id, question, answer)`` per paragraph (answer found in the context)."""
    return {
        "title": title,
        "paragraphs": [
            {"context": c, "qas": [{"id": i, "question": q, "answers": [{"text": a, "answer_start": c.index(a)}]}]}
            for c, i, q, a in paragraphs
        ],
    }


PAYLOAD = {
    "version": "1.1",
    "data": [
        _article(
            "Fresno,_California",
            [
                ("Fresno is a city in California. It lies in the San Joaquin Valley.", "q1", "Where?", "California"),
                ("The valley is farmland.", "q2", "What is the valley?", "farmland"),
            ],
        ),
        _article("Super_Bowl_50", [("Super Bowl 50 was played in 2016.", "q3", "When was it played?", "2016")]),
    ],
}


def test_copies_get_new_ids_and_keep_answers_and_themes(tmp_path: Path) -> None:
    replica = replicate_squad(PAYLOAD, 3)
    assert len(replica["data"]) == 6 and count_questions(replica) == 9 and replica["version"] == "1.1"
    assert [a["title"] for a in replica["data"][2:4]] == ["Fresno,_California (copy 1)", "Super_Bowl_50 (copy 1)"]
    path = write_squad(replica, tmp_path / "x3.json.gz")
    assert read_squad(path) == replica

    loaded = load_squad_json(path)
    documents, queries = loaded.documents_table(), loaded.queries_table()
    assert documents.num_rows == 6 and len(set(documents.column("doc_id").to_pylist())) == 6
    assert queries.num_rows == 9 and len(set(queries.column("query_id").to_pylist())) == 9
    assert loaded.quarantine_table().num_rows == 0  # every answer still matches its (unchanged) context
    texts = documents.column("text").to_pylist()
    assert texts[0:2] == texts[2:4] == texts[4:6]
    answers = {q["query_id"]: q["answers"] for q in queries.to_pylist()}
    assert answers["q3"] == answers["q3-copy-2"]
    for title in ("Fresno,_California", "Super_Bowl_50"):
        assert theme_from_title(f"{title} (copy 2)") == theme_from_title(title)


def test_one_copy_is_the_corpus_and_the_input_is_untouched() -> None:
    before = repr(PAYLOAD)
    assert replicate_squad(PAYLOAD, 1) == PAYLOAD
    replicate_squad(PAYLOAD, 4)
    assert repr(PAYLOAD) == before


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        replicate_squad(PAYLOAD, 0)
    with pytest.raises(ValueError, match="not SQuAD format"):
        replicate_squad({"articles": []}, 2)


def test_untitled_articles_get_new_document_ids() -> None:
    covid = {"data": [{"paragraphs": [{"document_id": 7, "context": "x", "qas": [{"id": "a"}]}]}]}
    copy = replicate_squad(covid, 2)["data"][1]["paragraphs"][0]
    assert copy["document_id"] == "7-copy-1" and copy["qas"][0]["id"] == "a-copy-1"
