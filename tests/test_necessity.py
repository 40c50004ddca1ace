"""Context-necessity labels on hand-built queries (curation/necessity.py)."""

import pyarrow as pa
import pytest

from conteb.schemas import ANSWERABILITY, CONTEB_QUERIES, PAIRED_QUERIES, THEMES, table_from_rows
from curation.dataset import conteb_documents
from curation.necessity import RULE, document_variants, is_labelled, label_queries, necessity_counts
from tests.builders import chunks_from_texts

# Chunk 0 names the city, chunks 1 and 2 (as embedded, after a rewrite) do not.
EMBEDDED = ["Lyon is a city in France on the Rhône.", "The metro opened in 1978.", "The city's metro is run by TCL."]


def docs(title: str | None = "Lyon") -> pa.Table:
    return conteb_documents(chunks_from_texts("lyon", EMBEDDED, title=title))


def query(qid: str, text: str, chunk: int, chunk_ids: list[int] | None = None) -> dict:
    return {"query_id": qid, "query": text, "chunk_id": f"lyon_{chunk}",
            "chunk_ids": [f"lyon_{i}" for i in (chunk_ids or [chunk])], "doc_id": "lyon", "pairing": "span",
            "source": "f"}  # fmt: skip


def queries(*rows: dict) -> pa.Table:
    return table_from_rows(list(rows), PAIRED_QUERIES)


def labels(table: pa.Table, column: str) -> dict[str, object]:
    return dict(zip(table.column("query_id").to_pylist(), table.column(column).to_pylist(), strict=True))


def test_theme_missing_when_the_query_names_the_theme_and_the_embedded_chunk_does_not() -> None:
    labelled = label_queries(
        queries(
            query("a", "When did the Lyon metro open?", 1),  # chunk 1 no longer says Lyon
            query("b", "Which river flows through Lyon?", 0),  # chunk 0 names it
            query("c", "When did the metro open?", 1),  # the query does not name it
            query("d", "Who runs LYON's metro?", 2),  # case-insensitive, possessive
            query("e", "Who runs the Lyonnais metro?", 2),  # whole words only: no mention
        ),
        docs(),
    )
    assert labelled.schema == CONTEB_QUERIES
    assert labels(labelled, "theme_missing") == {"a": True, "b": False, "c": False, "d": True, "e": False}
    assert labels(labelled, "answerable_alone") == dict.fromkeys("abcde")  # no LLM judged
    assert labels(labelled, "needs_context") == labels(labelled, "theme_missing")
    assert necessity_counts(labelled) == {
        "needs_context": 2, "theme_missing": 2, "answerable_alone_false": 0, "unlabelled": 5
    }  # fmt: skip


def test_the_chunk_as_embedded_is_judged_not_the_original() -> None:
    chunks = chunks_from_texts("lyon", ["Lyon is a city.", "Lyon's metro opened in 1978."], title="Lyon")
    reformulated = table_from_rows(
        [{"chunk_id": "lyon_1", "chunk": "The city's metro opened in 1978."},
         {"chunk_id": "lyon_0", "chunk": "Lyon is a city."}],
        pa.schema([("chunk_id", pa.string()), ("chunk", pa.string())]),
    )  # fmt: skip
    question = queries(query("a", "When did the Lyon metro open?", 1))
    assert labels(label_queries(question, conteb_documents(chunks)), "theme_missing") == {"a": False}
    assert labels(label_queries(question, conteb_documents(chunks, reformulated)), "theme_missing") == {"a": True}


def test_themes_table_supplies_aliases_and_title_rule_is_the_fallback() -> None:
    themes = table_from_rows(
        [{"doc_id": "lyon", "theme": "Lyon", "aliases": ["Lugdunum"], "method": "llm", "model": "m"}], THEMES
    )
    question = queries(query("a", "When was Lugdunum's metro built?", 1))
    assert labels(label_queries(question, docs(), themes), "theme_missing") == {"a": True}
    assert labels(label_queries(question, docs()), "theme_missing") == {"a": False}  # the title has no alias
    # Title rule: "Lyon (city)" -> theme "Lyon"; untitled -> the first chunk's subject, else the doc id.
    assert "Lyon" in document_variants(docs("Lyon (city)"))["lyon"]
    assert "Lyon" in document_variants(docs(None))["lyon"]  # "Lyon is a city in France ..."
    assert "lyon" in document_variants(conteb_documents(chunks_from_texts("lyon", ["It rained."])))["lyon"]
    other = table_from_rows([{"doc_id": "paris", "theme": "Paris", "aliases": [], "method": "title"}], THEMES)
    with pytest.raises(ValueError, match=r"no row for documents \['lyon'\]"):
        label_queries(question, docs(), other)


def test_answerable_alone_false_makes_a_query_need_context() -> None:
    judged = table_from_rows(
        [
            {"query_id": "a", "chunk_id": "lyon_1", "answerable_alone": False, "reason": "r", "method": "llm"},
            {"query_id": "b", "chunk_id": "lyon_1", "answerable_alone": True, "reason": "r", "method": "llm"},
            {"query_id": "c", "chunk_id": "lyon_0", "answerable_alone": False, "reason": "stale", "method": "llm"},
        ],
        ANSWERABILITY,
    )
    labelled = label_queries(
        queries(
            query("a", "When did it open?", 1),
            query("b", "When did the Lyon metro open?", 1),  # theme missing, though answerable
            query("c", "When did the metro open?", 1),  # judged on another chunk: ignored
            query("d", "When did the metro open?", 1),  # not judged
        ),
        docs(),
        answerability=judged,
    )
    assert labels(labelled, "answerable_alone") == {"a": False, "b": True, "c": None, "d": None}
    assert labels(labelled, "needs_context") == {"a": True, "b": True, "c": False, "d": False}
    assert necessity_counts(labelled) == {
        "needs_context": 2, "theme_missing": 1, "answerable_alone_false": 1, "unlabelled": 2
    }  # fmt: skip


def test_several_gold_chunks_judged_on_the_chunk_id_chunk() -> None:
    # The answer spans chunks 0 and 1; chunk_id is 1, which does not name Lyon (chunk 0 does).
    labelled = label_queries(queries(query("a", "What about Lyon and its metro?", 1, [0, 1])), docs())
    assert labels(labelled, "theme_missing") == {"a": True}


def test_relabelling_replaces_old_labels_and_bad_gold_is_named() -> None:
    once = label_queries(queries(query("a", "When did the Lyon metro open?", 1)), docs())
    assert is_labelled(once) and not is_labelled(queries(query("a", "x", 1)))
    assert label_queries(once, docs()).equals(once)
    with pytest.raises(ValueError, match=r"row 1: query 'b': gold chunk_id 'lyon_9'"):
        label_queries(queries(query("a", "x", 1), query("b", "y", 9)), docs())
    with pytest.raises(ValueError, match="no context-necessity labels"):
        necessity_counts(queries(query("a", "x", 1)))
    assert "theme_missing" in RULE and "answerable_alone" in RULE


def test_an_inflected_mention_in_the_gold_chunk_counts_as_naming_the_theme() -> None:
    # XQuAD's "Huguenot" article: queries say "Huguenot", its chunks mostly "Huguenots".
    texts = ["The Huguenots were French Protestants.", "Huguenots' churches were built in Cape Colony.",
             "Settlers were promised land in Virginia."]  # fmt: skip
    chunks = conteb_documents(chunks_from_texts("huguenot", texts, title="Huguenot"))
    asked = {"a": ("Where were Huguenot churches built?", 1), "b": ("Where were Huguenot settlers promised land?", 2),
             "c": ("Who were the Huguenots?", 0)}  # fmt: skip
    rows = [
        {**query(qid, text, chunk), "doc_id": "huguenot", "chunk_id": f"huguenot_{chunk}",
         "chunk_ids": [f"huguenot_{chunk}"]}
        for qid, (text, chunk) in asked.items()
    ]  # fmt: skip
    labelled = label_queries(queries(*rows), chunks)
    assert labels(labelled, "theme_missing") == {"a": False, "b": True, "c": False}


def test_a_document_without_an_informative_title_takes_its_theme_from_its_first_chunk() -> None:
    texts = ["Velmora is a river port on the Sarn.", "The metro opened in 1978.", "Velmora's metro has two lines."]
    question = queries(query("a", "When did the Velmora metro open?", 1), query("b", "How many lines?", 2))
    for title in ("Document 7", None):
        documents = conteb_documents(chunks_from_texts("lyon", texts, title=title))
        assert "Velmora" in document_variants(documents)["lyon"]
        assert labels(label_queries(question, documents), "theme_missing") == {"a": True, "b": False}
    # An informative title is kept, whatever the head names.
    assert "Velmora" not in document_variants(conteb_documents(chunks_from_texts("lyon", texts, title="Lyon")))["lyon"]
