from pathlib import Path

import pytest

from curation.quarantine import QuarantineReason
from curation.sources.squad import load_squad_json
from tests.conftest import squad_article, write_squad

P1 = "Napoleon was a French emperor."
P2 = "He became emperor in 1804. He died in 1821."


def test_article_is_paragraphs_joined_and_offsets_shifted(tmp_path: Path) -> None:
    path = write_squad(
        tmp_path / "s.json.gz",
        [
            squad_article(
                "Napoleon_Bonaparte",
                [(P1, [("q1", "Who?", "French emperor", 15)]), (P2, [("q2", "When emperor?", "1804", 21)])],
            )
        ],
    )
    result = load_squad_json(path)
    [doc] = result.documents
    assert doc.doc_id == "napoleon-bonaparte"
    assert doc.title == "Napoleon Bonaparte"
    assert doc.text == P1 + "\n\n" + P2
    q1, q2 = result.queries
    assert q1.answers == [("French emperor", 15)]
    assert q2.answers == [("1804", len(P1) + 2 + 21)]
    assert doc.text[q2.answers[0][1] : q2.answers[0][1] + 4] == "1804"
    assert q2.source_row == "data[0].paragraphs[1].qas[0]"


def test_unanswerable_questions_are_counted_not_kept(tmp_path: Path) -> None:
    article = squad_article("T", [(P1, [("q1", "Who?", "French emperor", 15)])])
    article["paragraphs"][0]["qas"].append({"id": "q2", "question": "Why?", "answers": [], "is_impossible": True})
    result = load_squad_json(write_squad(tmp_path / "v2.json", [article]))
    assert [q.query_id for q in result.queries] == ["q1"]
    assert result.stats["unanswerable_skipped"] == 1
    assert result.quarantine == []


def test_duplicate_query_id_is_quarantined_with_its_row(tmp_path: Path) -> None:
    path = write_squad(
        tmp_path / "dup.json", [squad_article("T", [(P1, [("q1", "A?", "French", 15), ("q1", "B?", "emperor", 22)])])]
    )
    result = load_squad_json(path)
    assert [q.query for q in result.queries] == ["A?"]
    [record] = result.quarantine
    assert record.reason == QuarantineReason.DUPLICATE_QUERY_ID
    assert record.row == "data[0].paragraphs[0].qas[1]"
    assert "data[0].paragraphs[0].qas[0]" in record.detail


def test_duplicate_article_title_is_an_error_naming_both_rows(tmp_path: Path) -> None:
    path = write_squad(tmp_path / "d.json", [squad_article("Same", [(P1, [])]), squad_article("Same", [(P2, [])])])
    with pytest.raises(ValueError, match=r"d.json: data\[1\]: duplicate document 'Same', already defined at data\[0\]"):
        load_squad_json(path)


def test_titles_that_slugify_alike_get_stable_distinct_ids(tmp_path: Path) -> None:
    path = write_squad(tmp_path / "c.json", [squad_article("A_b", [(P1, [])]), squad_article("A b", [(P2, [])])])
    ids = [doc.doc_id for doc in load_squad_json(path).documents]
    assert len(set(ids)) == 2 and all(i.startswith("a-b-") and "_" not in i for i in ids)
    assert ids == [doc.doc_id for doc in load_squad_json(path).documents]


def test_covidqa_style_article_without_title(tmp_path: Path) -> None:
    context = "A Study of Things\n\nhttps://example.org\nLicense: cc-by\n\nAbstract: text."
    article = squad_article(None, [(context, [("7", "What?", "text", context.index("text."))])])
    article["paragraphs"][0]["document_id"] = 630
    [doc] = load_squad_json(write_squad(tmp_path / "covid.json", [article])).documents
    assert doc.doc_id == "630"
    assert doc.title == "A Study of Things"
    assert doc.license == "cc-by"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", r"bad.json: line 1, column 2: invalid JSON"),
        ('{"version": "1.1"}', r"not SQuAD format"),
        (
            '{"data": [{"title": "T", "paragraphs": [{"qas": []}]}]}',
            r"data\[0\].paragraphs\[0\]: missing or invalid 'context'",
        ),
    ],
)
def test_malformed_files_name_file_and_row(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=expected):
        load_squad_json(path)


def test_real_squad_v2_counts_unanswerable(shared_data: Path) -> None:
    result = load_squad_json(shared_data / "squad-v2.0-dev.json.gz")
    assert len(result.documents) == 35
    assert len(result.queries) == 5928
    assert result.stats["unanswerable_skipped"] == 11873 - 5928


def test_real_covidqa_and_xquad_load(shared_data: Path) -> None:
    covid = load_squad_json(shared_data / "covidqa-2020-04-23.json.gz")
    assert (len(covid.documents), len(covid.queries)) == (98, 1380)
    assert all(doc.license for doc in covid.documents[:10])
    xquad = load_squad_json(shared_data / "xquad-en.json.gz")
    assert (len(xquad.documents), len(xquad.queries)) == (48, 1190)


def test_wrong_offset_in_a_squad_file_is_quarantined_by_pairing_with_file_and_row(tmp_path: Path) -> None:
    from conteb.config import ChunkingConfig
    from curation.chunking import chunk_documents
    from curation.pairing import pair_by_span

    path = write_squad(
        tmp_path / "wrong.json",
        [squad_article("T", [(P1, [("ok", "Who?", "French emperor", 15), ("bad", "Who?", "French emperor", 12)])])],
    )
    source = load_squad_json(path)
    documents = source.documents_table()
    result = pair_by_span(source.queries_table(), documents, chunk_documents(documents, ChunkingConfig()).chunks)
    assert [row["query_id"] for row in result.rows] == ["ok"]
    [record] = result.quarantine
    assert (record.reason, record.source, record.row) == (
        QuarantineReason.SPAN_TEXT_MISMATCH,
        str(path),
        "data[0].paragraphs[0].qas[1]",
    )
    assert "answer is 'French emperor'" in record.detail
