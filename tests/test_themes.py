"""Themes: from titles, variants, mention matching, masking, and the LLM extraction requests/results."""

from __future__ import annotations

import pyarrow as pa
import pytest

from conteb.schemas import SOURCE_DOCUMENTS, THEMES
from curation.themes.mentions import find_mentions, fold, inflections, mask_mentions, theme_variants
from curation.themes.naming import is_informative_title, offline_theme, theme_from_head, theme_from_title
from curation.themes.stage import THEME_SCHEMA, build_theme_requests, themes_table, validate_theme
from llm.prompts import load_prompt
from llm.types import LLMResult


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("Super Bowl 50", ("Super Bowl 50", [])),
        ("Super_Bowl_50", ("Super Bowl 50", [])),  # SQuAD-style underscores
        ("Liverpool F.C.", ("Liverpool F.C.", ["Liverpool"])),
        ("AFC Ajax", ("AFC Ajax", ["Ajax"])),
        ("S.L. Benfica", ("S.L. Benfica", ["Benfica"])),
        ("Mercury (planet)", ("Mercury", [])),
        ("Sky_(United_Kingdom)", ("Sky", [])),
        ("Fresno,_California", ("Fresno, California", ["Fresno"])),
        ("Napoleon Bonaparte", ("Napoleon Bonaparte", [])),  # no name parts: conservative rule
        ("  São   Paulo ", ("São Paulo", [])),
        ("The Who", ("The Who", [])),  # "Who" alone is a stop word, not an alias
        ("FC", ("FC", [])),  # only an affix: nothing left for an alias
    ],
)
def test_theme_from_title(title: str, expected: tuple[str, list[str]]) -> None:
    assert theme_from_title(title) == expected


def test_variants_possessives_folding_and_order() -> None:
    assert theme_variants("Lyon", []) == ["Lyons's", "Lyons’s", "Lyon's", "Lyons'", "Lyons’", "Lyon’s", "Lyons", "Lyon"]
    variants = theme_variants("São Paulo", [])
    names = {"São Paulo", "Sao Paulo", "São Paulos", "Sao Paulos"}
    assert set(variants) == names | {f"{n}{mark}s" for n in names for mark in "'’"} | {
        f"{n}{mark}" for n in names if n.endswith("s") for mark in "'’"
    }
    assert [len(v) for v in variants] == sorted((len(v) for v in variants), reverse=True)


def test_variants_drop_short_names_stop_words_and_generic_references() -> None:
    variants = theme_variants("Alps", ["the", "it", "EU", "the city", "The Mountains", "the Alps"])
    assert "the" not in variants and "EU" not in variants and "the city" not in variants
    assert "The Mountains" not in variants
    assert {"Alps", "the Alps", "Alps'", "Alps’", "Alps's"} <= set(variants)  # names ending in s: bare apostrophe


def test_find_mentions_case_accents_boundaries_possessives() -> None:
    variants = theme_variants("Lyon", [])
    text = "Lyon's metro; LYON, lyon and Lyonnais. Lyon’s old town."
    assert find_mentions(text, variants) == [(0, 6, "Lyon's"), (14, 18, "LYON"), (20, 24, "lyon"), (39, 45, "Lyon’s")]
    # accent-insensitive in both directions, whitespace runs inside a name
    assert find_mentions("the Rhone and the Rhône", theme_variants("Rhône", [])) == [
        (4, 9, "Rhone"),
        (18, 23, "Rhône"),
    ]
    assert find_mentions("Sao\nPaulo", theme_variants("São Paulo", [])) == [(0, 9, "Sao\nPaulo")]
    decomposed = "Sa\u0303o Paulo!"  # combining tilde: offsets are in the original text
    assert find_mentions(decomposed, theme_variants("São Paulo", [])) == [(0, 10, decomposed[:10])]


def test_find_mentions_longest_variant_first_and_no_overlap() -> None:
    variants = theme_variants("Liverpool F.C.", ["Liverpool"])
    text = "Liverpool F.C. play in Liverpool."
    assert find_mentions(text, variants) == [(0, 14, "Liverpool F.C."), (23, 32, "Liverpool")]


def test_find_mentions_nothing_to_find() -> None:
    assert find_mentions("Lyon", []) == []
    assert find_mentions("", ["Lyon"]) == []
    assert theme_variants("the", ["it"]) == []  # nothing specific left to look for
    assert find_mentions("the city", theme_variants("the", ["it"])) == []
    assert fold("Ôde À") == "ode a"


def test_mask_mentions() -> None:
    variants = theme_variants("Lyon", [])
    text = "Lyon's metro opened in 1978. People in Lyon love Lyonnais food.\nLyon is old."
    assert mask_mentions(text, variants) == (
        "The subject's metro opened in 1978. People in the subject love Lyonnais food.\nThe subject is old."
    )


def test_mask_absorbs_article_and_keeps_possessive_of_names_ending_in_s() -> None:
    variants = theme_variants("Alps", [])
    text = "The Alps rise. Snow covers the Alps’ peaks and 'Alps' is a word."
    assert (
        mask_mentions(text, variants)
        == "The subject rise. Snow covers the subject’s peaks and 'the subject' is a word."
    )
    assert mask_mentions("Visit the Rhône", theme_variants("Rhône", []), "the river") == "Visit the river"
    assert mask_mentions("Visit Lyon", theme_variants("Lyon", []), "it") == "Visit it"


def test_validate_theme() -> None:
    assert validate_theme({"theme": "Lyon", "aliases": []}) is None
    assert "empty" in validate_theme({"theme": "  ", "aliases": []})
    assert "short name" in validate_theme({"theme": "x" * 200, "aliases": []})
    assert "list of strings" in validate_theme({"theme": "Lyon", "aliases": [3]})


def _documents() -> pa.Table:
    rows = [
        {"doc_id": "lyon", "title": "Lyon", "text": "Lyon is a city.", "source": "f"},
        {"doc_id": "lfc", "title": "Liverpool F.C.", "text": "Liverpool F.C. is a club.", "source": "f"},
        {"doc_id": "empty", "title": None, "text": " ", "source": "f"},
    ]
    return pa.Table.from_pylist(rows, schema=SOURCE_DOCUMENTS)


def test_build_theme_requests() -> None:
    requests = build_theme_requests(_documents(), {"lyon": "Lyon is a city.", "lfc": "Liverpool F.C. is a club."})
    assert [r.custom_id for r in requests] == ["theme:lyon", "theme:lfc"]  # "empty" has no first chunk
    request = requests[0]
    assert request.schema == THEME_SCHEMA and request.schema_name == "theme"
    assert request.prompt_tag == load_prompt("theme").tag
    assert "Title: Lyon" in request.messages[1]["content"] and "Lyon is a city." in request.messages[1]["content"]
    assert request.validator is not None and request.validator({"theme": "", "aliases": []}) is not None
    assert THEME_SCHEMA["required"] == ["theme", "aliases"] and THEME_SCHEMA["additionalProperties"] is False


def test_themes_table_without_llm_uses_titles() -> None:
    table, failures = themes_table(_documents(), None, None)
    assert table.schema == THEMES and failures == []
    assert table.to_pylist() == [
        {"doc_id": "lyon", "theme": "Lyon", "aliases": [], "method": "title", "model": None, "prompt_version": None},
        {
            "doc_id": "lfc",
            "theme": "Liverpool F.C.",
            "aliases": ["Liverpool"],
            "method": "title",
            "model": None,
            "prompt_version": None,
        },
        {"doc_id": "empty", "theme": "empty", "aliases": [], "method": "doc_id", "model": None, "prompt_version": None},
    ]


def test_themes_table_with_llm_results_and_failures() -> None:
    results = {
        "theme:lyon": LLMResult(
            "theme:lyon", value={"theme": " Lyon ", "aliases": ["Lugdunum", "lyon", "", "Lugdunum"]}
        ),
        "theme:lfc": LLMResult("theme:lfc", error="rate limited after 5 attempts", model="gpt-x"),
        # "theme:empty" missing: recorded too
    }
    table, failures = themes_table(_documents(), results, "gpt-4o")
    rows = {row["doc_id"]: row for row in table.to_pylist()}
    assert rows["lyon"] == {
        "doc_id": "lyon",
        "theme": "Lyon",
        "aliases": ["Lugdunum"],
        "method": "llm",
        "model": "gpt-4o",
        "prompt_version": load_prompt("theme").tag,
    }
    assert rows["lfc"]["method"] == "title" and rows["lfc"]["aliases"] == ["Liverpool"] and rows["lfc"]["model"] is None
    assert [(f.object_id, f.stage, str(f.reason), f.row) for f in failures] == [
        ("lfc", "themes", "llm_failed", "theme:lfc"),
        ("empty", "themes", "llm_failed", "theme:empty"),
    ]
    assert "rate limited" in failures[0].detail and failures[0].as_row()["reason"] == "llm_failed"


def test_themes_table_refuses_an_invalid_llm_value() -> None:
    results = {"theme:lyon": LLMResult("theme:lyon", value={"theme": "", "aliases": []}, model="m")}
    table, failures = themes_table(_documents().slice(0, 1), results, None)
    assert table.column("method").to_pylist() == ["title"]
    assert "invalid answer" in failures[0].detail


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Huguenot", ["Huguenots"]),
        ("Huguenots", ["Huguenot"]),
        ("Church", ["Churches"]),
        ("Bus", ["Buses"]),  # -us is singular: it takes -es
        ("Churches", ["Church", "Churche"]),
        ("Yuan dynasty", ["Yuan dynasties"]),  # the last word only
        ("Dynasties", ["Dynasty", "Dynastie"]),
        ("Kennedy", ["Kennedies", "Kennedys"]),  # a capitalised name keeps its -y
        ("play", ["plays"]),  # vowel + y: -s
        ("NFL", ["NFLs"]),
        ("The Beatles", ["The Beatle"]),
        # singular names ending in s are not plurals; short singulars would be other words
        ("Paris", ["Parises"]),
        ("Glass", ["Glasses"]),
        ("Mars", []),
        ("Ares", []),
        ("Alps", []),
        ("ABS", []),  # an acronym has no singular
        ("Super Bowl 50", []),  # only a last word made of letters inflects
        ("Liverpool F.C.", []),
        ("McDonald's", []),
    ],
)
def test_inflections(name: str, expected: list[str]) -> None:
    assert inflections(name) == expected


def test_find_mentions_counts_plurals_and_their_possessives() -> None:
    text = "The Huguenots' churches; a Huguenot's son; Huguenots, HUGUENOT and Huguenotism."
    expected = [(4, 14, "Huguenots'"), (27, 37, "Huguenot's"), (43, 52, "Huguenots"), (54, 62, "HUGUENOT")]
    assert find_mentions(text, theme_variants("Huguenot", [])) == expected
    assert find_mentions(text, theme_variants("Huguenots", [])) == expected  # and the other way round
    assert find_mentions("Two Yuan dynasties", theme_variants("Yuan dynasty", [])) == [(4, 18, "Yuan dynasties")]
    # no stemming: a derived word or another word that shares a stem is not a mention
    assert find_mentions("Martian arms and the marsh", theme_variants("Mars", [])) == []
    assert find_mentions("The Ares are", theme_variants("Ares", [])) == [(4, 8, "Ares")]
    assert mask_mentions("The Huguenots' churches stood.", theme_variants("Huguenot", [])) == (
        "The subject's churches stood."
    )


@pytest.mark.parametrize(
    ("title", "informative"),
    [
        ("Document 7", False),
        ("doc_0042", False),
        ("Untitled", False),
        ("Part II", False),
        ("12345", False),
        ("  ", False),
        (None, False),
        ("Huguenot", True),
        ("Chapter 3: Velmora", True),
        ("1934-Roosevelt", True),  # a file stem with a name in it
        ("Super_Bowl_50", True),
    ],
)
def test_is_informative_title(title: str | None, informative: bool) -> None:
    assert is_informative_title(title) is informative


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        # the subject of the first sentence, defined ("is a"), named once or again
        ("Velmora is a river port on the Sarn.", "Velmora"),
        ("Velmora lies on the Sarn. Velmora's old town is on an island.", "Velmora"),
        (
            "The Amazon rainforest (Portuguese: Floresta Amazônica), also known as Amazonia, is a forest.",
            "Amazon rainforest",
        ),
        ("Super Bowl 50 was an American football game.", "Super Bowl 50"),
        ("Warsaw (Polish: Warszawa) is the capital of Poland.", "Warsaw"),
        ("AS Vaurenne is a professional football club based in Vaurenne.", "AS Vaurenne"),  # an acronym first
        ("Doctor Who is a British television programme.", "Doctor Who"),
        (
            "The Intergovernmental Panel on Climate Change (IPCC) is a scientific body.",
            "Intergovernmental Panel on Climate Change",
        ),
        ("Brackwater Rovers F.C. is a football club.", "Brackwater Rovers F.C."),
        ("Established by the legislature, Harvard is the oldest university.", "Harvard"),  # a fronted phrase
        ("Document 7\n\nVelmora is a river port.", "Velmora"),  # a heading line is skipped
        ("A teacher is a person who helps students. Teachers work in schools.", "teacher"),  # named twice
        # no evidence of a name: none
        ("Scientists are studying the drug. The trial began in May.", None),
        ("The report describes the work of the committee.", None),
        ("In 1850 the town was founded by fishermen.", None),
        ("A teacher is a person who helps students.", None),  # a common noun named once
        # else a multi-word name the head repeats
        ("In 1850 fishermen founded Velmora Bay. The harbour of Velmora Bay grew.", "Velmora Bay"),
        ("It was a cold day in Velmora. People in Velmora stayed home.", None),  # one word: no
        ("The trial of ATP and NADPH. Both ATP and NADPH rose.", None),  # "and" joins no repeated name
        ("", None),
    ],
)
def test_theme_from_head(head: str, expected: str | None) -> None:
    assert theme_from_head(head) == expected


def test_offline_theme_keeps_an_informative_title_and_reads_the_head_otherwise() -> None:
    head = "Velmora is a river port on the Sarn."
    assert offline_theme("Lyon", head, "lyon") == ("Lyon", [], "title")
    assert offline_theme("Document 7", head, "d7") == ("Velmora", [], "head")
    assert offline_theme(None, head, "d7") == ("Velmora", [], "head")
    assert offline_theme(None, "Brackwater Rovers F.C. is a club.", "b") == (
        "Brackwater Rovers F.C.",
        ["Brackwater Rovers"],
        "head",
    )  # the title rule's aliases of the name
    assert offline_theme("Document 7", "It rained.", "d7") == ("Document 7", [], "title")
    assert offline_theme(None, "It rained.", "d7") == ("d7", [], "doc_id")
    assert offline_theme(None, None, "d7") == ("d7", [], "doc_id")


def test_themes_table_without_llm_reads_the_head_of_an_uninformative_title() -> None:
    documents = pa.Table.from_pylist(
        [
            {"doc_id": "d7", "title": "Document 7", "text": "It rained all day. The port was closed.", "source": "f"},
            {"doc_id": "d8", "title": None, "text": "Corvessa is a hill city. Its market is old.", "source": "f"},
            {"doc_id": "lyon", "title": "Lyon", "text": "Velmora is a river port.", "source": "f"},
        ],
        schema=SOURCE_DOCUMENTS,
    )
    heads = {"d7": "Velmora is a river port on the Sarn."}  # the first chunk, when given; else the text's start
    table, _ = themes_table(documents, None, None, heads)
    assert [(r["theme"], r["method"]) for r in table.to_pylist()] == [
        ("Velmora", "head"),
        ("Corvessa", "head"),
        ("Lyon", "title"),
    ]
    without, _ = themes_table(documents, None, None)
    assert (without.column("theme")[0].as_py(), without.column("method")[0].as_py()) == ("Document 7", "title")
    failed, failures = themes_table(documents, {}, "m", heads)  # every LLM answer missing: the same fallback
    assert failed.column("theme").to_pylist() == table.column("theme").to_pylist() and len(failures) == 3


@pytest.mark.parametrize(
    ("title", "head", "expected"),
    [
        # a numbered description the head does not name: the head's name
        ("Company profile 3", "Liskuzu is an industrial manufacturer headquartered in Hedeth.", ("Liskuzu", "head")),
        ("Case study 12", "Velmora is a river port on the Arlen.", ("Velmora", "head")),
        # the head names the numbered title: the title stays
        ("Apollo 11", "Apollo 11 was the first crewed Moon landing. Armstrong stepped out.", ("Apollo 11", "title")),
        # a capitalised word after the first: a name, not a description, even when the head does not repeat it
        ("Harvard University", "Harvard is a private university in Cambridge.", ("Harvard University", "title")),
        # no number: a title, whatever the head says
        ("City profile", "Krohathe is a city on the coast.", ("City profile", "title")),
    ],
)
def test_a_numbered_description_gives_way_to_the_heads_name(title: str, head: str, expected: tuple[str, str]) -> None:
    theme, _, method = offline_theme(title, head, "doc-1")
    assert (theme, method) == expected
