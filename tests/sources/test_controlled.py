"""The ``controlled`` source: generated same-template documents whose later paragraphs never name their entity."""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow as pa
import pytest

from conteb.config import MAX_CONTROLLED_DOCUMENTS, ChunkingConfig, ConfigError, ControlledSource
from conteb.content import passage_prints
from conteb.ids import is_valid_doc_id
from curation.chunking import chunk_text, make_splitter
from curation.sources import SourceError, load_source, source_label
from curation.sources.controlled.catalog import BY_NAME, DOMAINS, TEMPLATES, select_templates
from curation.sources.controlled.generate import (
    _template_drafts,
    check_corpus,
    draw_names,
    entity_variants,
    generate_controlled,
    render,
)
from curation.sources.controlled.names import RESERVED_NAMES, name_words, vocabulary
from curation.sources.controlled.template import FIRST_NAMES, Choice, Name, Number, Year
from curation.sources.model import SourceResult
from curation.sources.sample import load_sample
from curation.themes.mentions import find_mentions, fold, theme_variants
from curation.themes.naming import theme_from_title
from project.config import load_config
from tests.conftest import SAMPLE_DIR
from tests.sources.test_sample import _entity_words

DOCS = 12  # per template: enough for the uniqueness rules to bite, small enough for a fast test


@pytest.fixture(scope="module")
def corpus() -> SourceResult:
    return generate_controlled(TEMPLATES, DOCS, seed=0)


def _tables(result: SourceResult) -> tuple[bytes, bytes]:
    """The documents and queries tables serialised (Arrow IPC): equal bytes mean byte-identical tables."""

    def ipc(table: pa.Table) -> bytes:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return sink.getvalue().to_pybytes()

    return ipc(result.documents_table()), ipc(result.queries_table())


def test_the_catalogue_spans_domains_and_every_template_is_valid() -> None:
    assert len(TEMPLATES) >= 8 and len(DOMAINS) >= 4
    assert len({template.name for template in TEMPLATES}) == len(TEMPLATES)
    for template in TEMPLATES:
        template.check()  # 8 to 12 paragraphs, 6 to 10 questions, one in the head, ... (raises otherwise)
        assert 8 <= len(template.paragraphs) <= 12 and 6 <= len(template.questions) <= 10
        assert template.name in DOMAINS[template.domain]


def test_a_broken_template_is_refused_with_its_name() -> None:
    city = BY_NAME["city"]
    leaking = dataclasses.replace(city, paragraphs=(*city.paragraphs[:-1], city.paragraphs[-1] + " {entity} again."))
    with pytest.raises(ValueError, match=r"template 'city': paragraph 11 names \{entity\}"):
        leaking.check()
    digit = dataclasses.replace(city, paragraphs=(*city.paragraphs[:-1], "Founded in 1200."))
    with pytest.raises(ValueError, match=r"digit in its fixed text"):
        digit.check()
    asked_twice = dataclasses.replace(city, paragraphs=(*city.paragraphs, "The mayor is {mayor}."))
    with pytest.raises(ValueError, match=r"question 'mayor': its slot is placed 2 times"):
        asked_twice.check()


def test_documents_are_long_multi_chunk_and_shaped_by_their_template(corpus: SourceResult) -> None:
    splitter = make_splitter(ChunkingConfig(chunk_size=1000, chunk_overlap=0))
    assert len(corpus.documents) == DOCS * len(TEMPLATES)
    for doc in corpus.documents:
        template = BY_NAME[doc.metadata["template"]]
        assert is_valid_doc_id(doc.doc_id) and "_" not in doc.doc_id
        assert len(doc.text) > 4000, doc.doc_id
        assert len(doc.text.split("\n\n")) == len(template.paragraphs)
        assert len(chunk_text(doc.text, splitter, 0)) >= 4, doc.doc_id
    counts = Counter(query.doc_id for query in corpus.queries)
    assert {doc.doc_id: counts[doc.doc_id] for doc in corpus.documents} == {
        doc.doc_id: len(BY_NAME[doc.metadata["template"]].questions) for doc in corpus.documents
    }


def test_answers_are_exact_unique_in_their_document_and_across_their_template(corpus: SourceResult) -> None:
    texts = {doc.doc_id: doc.text for doc in corpus.documents}
    templates = {doc.doc_id: doc.metadata["template"] for doc in corpus.documents}
    by_kind: dict[tuple[str, str], list[str]] = defaultdict(list)
    late, heads = 0, Counter()
    for query in corpus.queries:
        [(answer, start)] = query.answers
        text = texts[query.doc_id]
        assert text[start : start + len(answer)] == answer, query.query_id
        starts = [i for i in range(len(text)) if text.startswith(answer, i)]
        assert starts == [start], (query.query_id, answer, starts)  # exactly once, overlapping matches included
        slot = query.source_row.rsplit(" ", 1)[-1]
        by_kind[templates[query.doc_id], slot].append(answer)
        late += start >= 1000
        heads[query.doc_id] += start < text.index("\n\n")
    for (template, slot), answers in by_kind.items():
        assert len(set(answers)) == len(answers) == DOCS, (template, slot, Counter(answers).most_common(2))
    assert late / len(corpus.queries) >= 0.7  # most answers lie beyond the first chunk
    assert set(heads.values()) >= {1} and all(heads[doc.doc_id] >= 1 for doc in corpus.documents)  # the controls


def test_the_entity_is_named_in_the_head_only_by_the_theme_matcher(corpus: SourceResult) -> None:
    """The sample's leak rule (tests/sources/test_sample.py), with the same word rule: no later paragraph names its
    entity, no document names another one's, every question names its own entity."""
    owner: dict[str, str] = {}
    variants: list[str] = []
    for doc in corpus.documents:
        for variant in theme_variants(doc.title, _entity_words(doc.title)):
            owner[fold(variant).removesuffix("'s").removesuffix("’s").rstrip("'’")] = doc.doc_id
            variants.append(variant)
    variants.sort(key=lambda variant: (-len(variant), variant))
    for doc in corpus.documents:
        paragraphs = doc.text.split("\n\n")
        own = theme_variants(*theme_from_title(doc.title))
        assert find_mentions(paragraphs[0], own), doc.doc_id
        for index, paragraph in enumerate(paragraphs):
            for _, _, found in find_mentions(paragraph, variants):
                whose = owner[fold(" ".join(found.split())).removesuffix("'s").removesuffix("’s").rstrip("'’")]
                assert index == 0 and whose == doc.doc_id, (doc.doc_id, index, found, whose)
    titles = {doc.doc_id: doc.title for doc in corpus.documents}
    for query in corpus.queries:
        assert find_mentions(query.query, theme_variants(*theme_from_title(titles[query.doc_id]))), query.query_id
        others = {owner[fold(found)] for _, _, found in find_mentions(query.query, variants)}
        assert others == {query.doc_id}, query.query_id


def test_questions_are_worded_alike_across_a_template_and_hold_no_fact(corpus: SourceResult) -> None:
    documents = {doc.doc_id: doc for doc in corpus.documents}
    shapes: dict[tuple[str, str], set[str]] = defaultdict(set)
    for query in corpus.queries:
        doc = documents[query.doc_id]
        slot = query.source_row.rsplit(" ", 1)[-1]
        shapes[doc.metadata["template"], slot].add(query.query.replace(doc.metadata["entity"], "<entity>"))
        assert not any(char.isdigit() for char in query.query), query.query
    assert all(len(shape) == 1 for shape in shapes.values()), [s for s in shapes.values() if len(s) > 1]


def test_the_generator_refuses_a_document_that_breaks_the_leak_rule() -> None:
    city = BY_NAME["city"]
    drafts = list(_template_drafts(city, draw_names(0, 2)["city"], 0, 2, "informative"))
    check_corpus(drafts, "informative")  # the real ones pass
    first, second = drafts
    body = first.body.replace("The tallest building", f"The tallest building of {first.entity}'s centre")
    with pytest.raises(SourceError, match=rf"{first.doc_id}: paragraph 11 names its own entity \(.{first.entity}'s.\)"):
        check_corpus([dataclasses.replace(first, body=body), second], "informative")
    other = second.entity
    body = first.body.replace("a wide plain", f"a wide plain facing {other}")
    with pytest.raises(SourceError, match=rf"{first.doc_id}: paragraph 1 names the entity of {second.doc_id}"):
        check_corpus([dataclasses.replace(first, body=body), second], "informative")
    moved = dataclasses.replace(first, starts={**first.starts, "mayor": [first.starts["mayor"][0] + 1]})
    with pytest.raises(SourceError, match=r"the answer .* of 'mayor' occurs at"):
        check_corpus([moved, second], "informative")
    with pytest.raises(SourceError, match=r"gives the entity or a fact away"):
        check_corpus([dataclasses.replace(first, title=f"City of {other}"), second], "uninformative")


def test_invented_names_are_unique_and_never_a_name_of_the_sample() -> None:
    titles = [doc.title for doc in load_sample(SAMPLE_DIR).documents]
    sample_words = {
        fold(word) for title in titles for word in name_words(title) if len(word) > 2 and not word.isupper()
    }
    reserved = {fold(name) for name in RESERVED_NAMES}
    assert sample_words <= reserved, f"add {sorted(sample_words - reserved)} to RESERVED_NAMES"
    slots = [slot for t in TEMPLATES for slot in [t.entity, *t.slots.values()] if isinstance(slot, Name)]
    fixed = vocabulary(
        [*FIRST_NAMES, *(form.replace("{W}", "").replace("{first}", "") for s in slots for form in s.forms)]
    )
    for seed in (0, 1):
        names = [values for by_document in draw_names(seed, 60).values() for values in by_document]
        entities = [values["entity"] for values in names]
        assert len(set(entities)) == len(entities)
        words = [fold(word) for values in names for value in values.values() for word in name_words(value)]
        counts = Counter(word for word in words if word not in fixed)
        assert max(counts.values()) == 1, counts.most_common(3)  # every invented word is handed out once
        assert not set(counts) & reserved
        parts = {word[i:j]: word for word in counts for i in range(len(word)) for j in range(i + 1, len(word) + 1)}
        inside = [(word, parts[word]) for word in counts if parts[word] != word]
        assert not inside, inside[:3]  # nor a part of another one


def test_same_settings_give_identical_tables_and_another_seed_other_documents() -> None:
    city_ship = [BY_NAME["city"], BY_NAME["ship"]]
    first = generate_controlled(city_ship, 4, seed=7)
    assert _tables(first) == _tables(generate_controlled(city_ship, 4, seed=7))
    other = generate_controlled(city_ship, 4, seed=8)
    assert {d.metadata["entity"] for d in first.documents}.isdisjoint(d.metadata["entity"] for d in other.documents)
    assert not {d.text for d in first.documents} & {d.text for d in other.documents}
    answers = {q.answers[0][0] for q in first.queries}
    assert len(answers - {q.answers[0][0] for q in other.queries}) > len(answers) / 2
    # a template's documents depend neither on the other templates selected nor on how many come after them
    alone = generate_controlled([BY_NAME["ship"]], 2, seed=7)
    assert [d.text for d in alone.documents] == [d.text for d in first.documents if d.doc_id.startswith("ship")][:2]


def test_title_modes(corpus: SourceResult) -> None:
    plain = generate_controlled([BY_NAME["football_club"], BY_NAME["composer"]], 3, seed=0, titles="uninformative")
    named = {doc.doc_id: doc for doc in corpus.documents}
    titles = [doc.title for doc in plain.documents]
    assert titles[:4] == [
        "Football club profile 1",
        "Football club profile 2",
        "Football club profile 3",
        "Composer profile 1",
    ]
    every = [v for doc in corpus.documents for v in entity_variants(doc.metadata["entity"])]
    for doc in plain.documents:
        assert named[doc.doc_id].text == doc.text and named[doc.doc_id].title == doc.metadata["entity"]
        assert theme_from_title(named[doc.doc_id].title)[0] == doc.metadata["entity"]  # informative: the entity
        assert find_mentions(doc.title, every) == [], doc.title  # uninformative: no entity of the corpus
    assert [q.query for q in plain.queries] == [
        q.query for q in corpus.queries if q.doc_id in {d.doc_id for d in plain.documents}
    ]


def test_every_template_holds_the_most_documents_the_registry_allows() -> None:
    result = generate_controlled(TEMPLATES, MAX_CONTROLLED_DOCUMENTS, seed=1, titles="uninformative")
    assert len(result.documents) == MAX_CONTROLLED_DOCUMENTS * len(TEMPLATES)


def test_same_template_documents_share_no_passage_print(corpus: SourceResult) -> None:
    """Fixed prose never runs 50 words without a unique value, so two documents of a template share no passage
    print (conteb.content): a model trained on some documents of a template may be evaluated on the others."""
    prints: dict[str, list[set[str]]] = defaultdict(list)
    for doc in corpus.documents:
        prints[doc.metadata["template"]].append(set(passage_prints(doc.text)))
    for template, sets in prints.items():
        assert all(not (a & b) for i, a in enumerate(sets) for b in sets[:i]), template


def test_selection_by_template_or_domain() -> None:
    assert [t.name for t in select_templates(domains=["sport", "geography"])] == [
        "city",
        "island",
        "football_club",
        "cycling_team",
    ]
    assert [t.name for t in select_templates(["ship", "city"])] == ["city", "ship"]
    assert select_templates() == list(TEMPLATES)
    with pytest.raises(ValueError, match=r"unknown template 'citty' \(did you mean 'city'\?\)"):
        select_templates(["citty"])
    with pytest.raises(ValueError, match=r"unknown domain 'sprot' \(did you mean 'sport'\?\)"):
        select_templates(domains=["sprot"])
    with pytest.raises(SourceError, match=r"controlled source: unknown template 'citty'"):
        load_source(ControlledSource(kind="controlled", templates=("citty",)))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "{kind: controlled, templates: [citty]}",
            r"source.templates: unknown template 'citty' \(did you mean 'city'\?\)",
        ),
        ("{kind: controlled, domains: [sprot]}", r"source.domains: unknown domain 'sprot' \(did you mean 'sport'\?\)"),
        ("{kind: controlled, templates: [city], domains: [sport]}", r"set either templates or domains, not both"),
        ("{kind: controlled, templates: [city, city]}", r"templates: named twice: city"),
        ("{kind: controlled, templates: []}", r"source.controlled.templates|source.templates"),
        ("{kind: controlled, documents_per_template: 0}", r"documents_per_template: Input should be greater"),
        ("{kind: controlled, documents_per_template: 101}", r"documents_per_template: Input should be less"),
        ("{kind: controlled, titles: vague}", r"titles: Input should be 'informative' or 'uninformative'"),
        ("{kind: controlled, template: [city]}", r"unknown key 'template' \(did you mean 'templates'\?\)"),
        ("{kind: controlled, seed: -1}", r"seed: Input should be greater than or equal to 0"),
    ],
)
def test_registry_refuses_bad_controlled_sources(tmp_path: Path, source: str, expected: str) -> None:
    path = tmp_path / "conteb.yaml"
    path.write_text(f"tasks:\n  - name: made\n    source: {source}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"task 'made' \(tasks\[0\]\): .*" + expected):
        load_config(path)


def test_registry_loads_a_controlled_task(tmp_path: Path) -> None:
    path = tmp_path / "conteb.yaml"
    path.write_text(
        "tasks:\n  - name: made\n    source: {kind: controlled, domains: [people], documents_per_template: 2, "
        "titles: uninformative}\n",
        encoding="utf-8",
    )
    source = load_config(path).tasks[0].source
    assert isinstance(source, ControlledSource) and source.seed == 0
    assert source_label(source, tmp_path) == (
        "controlled (domains people; 2 documents per template; seed 0; uninformative titles)"
    )
    result = load_source(source, tmp_path)
    assert [doc.title for doc in result.documents] == [
        "Composer profile 1",
        "Composer profile 2",
        "Scientist profile 1",
        "Scientist profile 2",
    ]


def test_slot_kinds_render_at_their_offsets() -> None:
    city = BY_NAME["city"]
    values = {name: f"<{name}>" for name in [*city.slots, "entity"]}
    body, starts, paragraph_starts = render(city, values)
    for name, offsets in starts.items():
        assert all(body[offset : offset + len(values[name])] == values[name] for offset in offsets)
    assert paragraph_starts[0] == 0 and all(body[start - 2 : start] == "\n\n" for start in paragraph_starts[1:])
    kinds = {type(slot) for template in TEMPLATES for slot in template.slots.values()}
    assert {Year, Number, Name, Choice} <= kinds
