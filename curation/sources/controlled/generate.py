"""``controlled``: generated same-template documents about invented entities (the paper's Geography and Football
tasks, built from templates instead of being written by hand).

:func:`generate_controlled` renders ``documents_per_template`` documents of each selected template and one query
per asked slot. Determinism: every random draw comes from a ``random.Random`` seeded with a string made of the seed,
the template's name and the purpose (``controlled:<seed>:<template>:<purpose>``), so the same settings give the same
tables byte for byte, another seed other entities and facts. Invented names are handed out round-robin over the
*whole* catalogue (document 0 of every template, then document 1, ...), so the documents of a template do not depend
on which other templates a task selects, and two tasks with the same seed never share a name.

What the generator guarantees, and refuses (:class:`SourceError`) a corpus that would break:

* every answer is unique among the documents of its template (values drawn without replacement) and occurs exactly
  once in its document, at the recorded offset (a Python ``str`` index into the body);
* **the leak rule** (``data/sample/README.md``), checked with the project's own matcher
  (:mod:`curation.themes.mentions`): the entity is named in the first paragraph and nowhere else, and no document
  names another one's entity; an entity's name counts as its theme and aliases
  (:func:`curation.themes.naming.theme_from_title`) plus each of its words of three letters or more that is not an
  all-capitals affix ("Velmora" of "FC Velmora");
* every question names its entity and no other, and holds no value of its document but the entity;
* an uninformative title (``"City profile 7"``: the template's noun and the document's number within its template)
  names no entity and holds no value of its document.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal

from curation.sources.controlled.catalog import TEMPLATES
from curation.sources.controlled.names import NameBook, name_words, vocabulary
from curation.sources.controlled.template import (
    ENTITY,
    FIRST_NAMES,
    MAX_PARAGRAPH_CHARS,
    PLACEHOLDER,
    PRONOUNS,
    Choice,
    Later,
    Name,
    Number,
    Template,
    Year,
)
from curation.sources.model import SourceDocument, SourceError, SourceQuery, SourceResult
from curation.themes.mentions import STOP_WORDS, find_mentions, fold, theme_variants
from curation.themes.naming import theme_from_title

CONTROLLED_LICENSE = "cc0-1.0"
FILLER_ATTEMPTS = 200
Titles = Literal["informative", "uninformative"]
_PARAGRAPH_BREAK = "\n\n"
_WORDS = re.compile(r"\w+")


@dataclass
class Draft:
    """One document before it is checked: its values and where each slot landed in the body."""

    template: Template
    index: int
    doc_id: str
    entity: str
    title: str
    body: str
    values: dict[str, str]
    starts: dict[str, list[int]]
    paragraph_starts: list[int]


def doc_id_for(template: Template, seed: int, index: int) -> str:
    """``city-s0-007``: template (``-`` for ``_``), seed and number; never a ``_`` (DESIGN.md)."""
    return f"{template.name.replace('_', '-')}-s{seed}-{index:03d}"


def uninformative_title(template: Template, index: int) -> str:
    """``"City profile 8"``: the noun every document of the template shares and the document's 1-based number."""
    return f"{template.noun[:1].upper()}{template.noun[1:]} profile {index + 1}"


def generate_controlled(
    templates: Sequence[Template], documents_per_template: int, seed: int, titles: Titles = "informative"
) -> SourceResult:
    """The documents and queries of ``templates`` (module docstring); raises :class:`SourceError` when a rule breaks."""
    names = draw_names(seed, documents_per_template)
    drafts = [
        draft
        for template in templates
        for draft in _template_drafts(template, names[template.name], seed, documents_per_template, titles)
    ]
    check_corpus(drafts, titles)
    return _result(drafts, seed, titles)


def rng_for(seed: int, template: Template, purpose: str) -> random.Random:
    """The random stream of one purpose of one template (seeded from a string: stable across machines and runs)."""
    return random.Random(f"controlled:{seed}:{template.name}:{purpose}")


@cache
def _forbidden_words() -> frozenset[str]:
    """Every word of every template's fixed text, questions, choices, units and name forms, and the first names."""
    texts: list[str] = [*FIRST_NAMES]
    for template in TEMPLATES:
        texts += [PLACEHOLDER.sub(" ", text) for text in (*template.paragraphs, *template.questions.values())]
        texts += [PLACEHOLDER.sub(" ", form) for form in template.entity.forms]
        for slot in template.slots.values():
            if isinstance(slot, Choice):
                texts += slot.options
            elif isinstance(slot, Number):
                texts.append(slot.unit)
            elif isinstance(slot, Name):
                texts += [PLACEHOLDER.sub(" ", form) for form in slot.forms]
        texts.append(template.noun)
    return vocabulary(texts)


def draw_names(seed: int, count: int) -> dict[str, list[dict[str, str]]]:
    """``{template: [{entity or name slot: value}, ...]}`` for ``count`` documents of *every* template (round-robin
    over the catalogue, module docstring)."""
    book = NameBook(_forbidden_words())
    streams = {template.name: rng_for(seed, template, "names") for template in TEMPLATES}
    drawn: dict[str, list[dict[str, str]]] = {template.name: [] for template in TEMPLATES}
    for _ in range(count):
        for template in TEMPLATES:
            rng = streams[template.name]
            values = {ENTITY: _fill_name(template.entity, rng, book, entity=True)}
            for name, slot in template.slots.items():
                if isinstance(slot, Name):
                    values[name] = _fill_name(slot, rng, book)
            drawn[template.name].append(values)
    return drawn


def _fill_name(slot: Name, rng: random.Random, book: NameBook, entity: bool = False) -> str:
    form = rng.choice(slot.forms)
    text = PLACEHOLDER.sub(lambda match: book.word(rng, entity) if match[1] == "W" else match[0], form)
    return text.replace("{first}", rng.choice(FIRST_NAMES))


def _clashes(value: str, placed: Sequence[str]) -> bool:
    """True when ``value`` and a placed value (both folded) contain one another (an answer would occur twice).

    Choices are not placed values: they hold no digit and no invented word, so neither holds a value nor is held.
    """
    key = fold(value)
    return any(key in other or other in key for other in placed)


def _template_drafts(
    template: Template, names: list[dict[str, str]], seed: int, count: int, titles: Titles
) -> Iterator[Draft]:
    pools: dict[str, list[str]] = {}
    for name, slot in template.slots.items():
        if isinstance(slot, Year | Number) and slot.unique:
            pools[name] = slot.pool()
            rng_for(seed, template, f"slot:{name}").shuffle(pools[name])
    for index in range(count):
        values = dict(names[index])
        choices = rng_for(seed, template, f"choices:{index}")
        placed = [fold(value) for value in values.values()]
        for name in template.slot_order():
            slot = template.slots[name]
            if isinstance(slot, Choice):
                values[name] = choices.choice(slot.options)
            elif isinstance(slot, Later):
                values[name] = _draw_filler(template, name, slot.pool(values[slot.after]), choices, placed)
            elif name in pools:
                values[name] = _next_value(template, name, pools[name], placed, index)
            elif isinstance(slot, Year | Number):
                values[name] = _draw_filler(template, name, _pool(slot), choices, placed)
            if not isinstance(slot, Name | Choice):  # names are placed already; choices hold no value
                placed.append(fold(values[name]))
        if template.person:
            feminine = choices.random() < 0.5
            values.update({name: forms[feminine] for name, forms in PRONOUNS.items()})
        body, starts, paragraph_starts = render(template, values)
        title = values[ENTITY] if titles == "informative" else uninformative_title(template, index)
        doc_id = doc_id_for(template, seed, index)
        yield Draft(template, index, doc_id, values[ENTITY], title, body, values, starts, paragraph_starts)


@cache
def _pool(slot: Year | Number) -> list[str]:
    """The values of a filler slot drawn with replacement (computed once; never changed)."""
    return slot.pool()


def _next_value(template: Template, name: str, pool: list[str], placed: list[str], index: int) -> str:
    """The first value of ``pool`` (shuffled) that does not clash with the document's values, taken out of it;
    a value passed over stays for the next documents."""
    for position, value in enumerate(pool):
        if not _clashes(value, placed):
            return pool.pop(position)
    raise SourceError(
        f"controlled template '{template.name}': slot '{name}' ran out of distinct values at document {index + 1}: "
        "ask for fewer documents_per_template"
    )


def _draw_filler(template: Template, name: str, pool: list[str], rng: random.Random, placed: list[str]) -> str:
    """A value of ``pool`` drawn with replacement that does not clash with the document's values."""
    for _ in range(FILLER_ATTEMPTS):
        value = rng.choice(pool)
        if not _clashes(value, placed):
            return value
    raise SourceError(f"controlled template '{template.name}': no value of filler slot '{name}' fits the document")


def render(template: Template, values: dict[str, str]) -> tuple[str, dict[str, list[int]], list[int]]:
    """``(body, {slot: [offsets]}, paragraph offsets)``: the paragraphs with ``values`` filled in, joined by a blank
    line; offsets are Python ``str`` indices into the body."""
    pieces: list[str] = []
    starts: dict[str, list[int]] = {}
    paragraph_starts: list[int] = []
    cursor = 0
    for index, paragraph in enumerate(template.paragraphs):
        if index:
            pieces.append(_PARAGRAPH_BREAK)
            cursor += len(_PARAGRAPH_BREAK)
        paragraph_starts.append(cursor)
        last = 0
        for match in PLACEHOLDER.finditer(paragraph):
            fixed = paragraph[last : match.start()]
            pieces.append(fixed)
            cursor += len(fixed)
            value = values[match[1]]
            starts.setdefault(match[1], []).append(cursor)
            pieces.append(value)
            cursor += len(value)
            last = match.end()
        pieces.append(paragraph[last:])
        cursor += len(paragraph) - last
    return "".join(pieces), starts, paragraph_starts


def question_text(template: Template, slot: str, entity: str) -> str:
    return template.questions[slot].replace("{entity}", entity)


def entity_words(entity: str) -> list[str]:
    """The words of ``entity`` that name it on their own: three letters or more, not an all-capitals affix ("FC"),
    not a generic word of the theme matcher ("University", :data:`curation.themes.mentions.STOP_WORDS`)."""
    return [
        word for word in name_words(entity) if len(word) >= 3 and word.upper() != word and fold(word) not in STOP_WORDS
    ]


def entity_variants(entity: str) -> list[str]:
    """What counts as naming ``entity`` for the theme matcher: its theme, aliases and :func:`entity_words`, with
    their variants (:func:`curation.themes.mentions.theme_variants`)."""
    theme, aliases = theme_from_title(entity)
    return theme_variants(theme, [*aliases, *entity_words(entity)])


def check_corpus(drafts: Sequence[Draft], titles: Titles) -> None:
    """Raise :class:`SourceError` on the first document that breaks a rule of the module docstring.

    Every variant of an entity contains one of its :func:`entity_words` as a whole word, so a text names an entity
    exactly when one of its words is one of that entity's words: an index of those words finds every candidate in
    linear time, and the theme matcher (:func:`curation.themes.mentions.find_mentions`) confirms and locates each one.
    """
    owners: dict[str, set[str]] = {}
    variants: dict[str, list[str]] = {}
    for draft in drafts:
        variants[draft.doc_id] = entity_variants(draft.entity)
        for word in entity_words(draft.entity):
            owners.setdefault(fold(word), set()).add(draft.doc_id)

    def named(text: str) -> set[str]:
        """The documents whose entity ``text`` names."""
        return {doc_id for word in _WORDS.findall(fold(text)) for doc_id in owners.get(word, ())}

    for draft in drafts:
        where = f"controlled template '{draft.template.name}', document {draft.doc_id}"
        head_end = draft.paragraph_starts[1]
        if not find_mentions(draft.body[:head_end], variants[draft.doc_id]):
            raise SourceError(f"{where}: the first paragraph does not name the entity {draft.entity!r}")
        leaks = [(doc_id, 0) for doc_id in named(draft.body[:head_end]) - {draft.doc_id}]
        leaks += [(doc_id, head_end) for doc_id in named(draft.body[head_end:])]
        for doc_id, offset in sorted(leaks):
            mentions = find_mentions(draft.body[offset:], variants[doc_id])
            found = mentions[0][2] if mentions else "?"
            paragraph = sum(offset + (mentions[0][0] if mentions else 0) >= start for start in draft.paragraph_starts)
            whose = "its own entity" if doc_id == draft.doc_id else f"the entity of {doc_id}"
            raise SourceError(
                f"{where}: paragraph {paragraph} names {whose} ({found!r}); the leak rule allows the entity's name in "
                "the first paragraph of its own document only"
            )
        ends = [*draft.paragraph_starts[1:], len(draft.body)]
        for number, (start, end) in enumerate(zip(draft.paragraph_starts, ends, strict=True), 1):
            length = len(draft.body[start:end].rstrip("\n"))
            if length > MAX_PARAGRAPH_CHARS:
                raise SourceError(
                    f"{where}: paragraph {number} has {length} characters (at most {MAX_PARAGRAPH_CHARS})"
                )
        _check_answers(draft, where)
        _check_questions(draft, where, named(draft.entity), variants[draft.doc_id], named)
        if titles == "uninformative" and (named(draft.title) or _holds(draft.title, _facts(draft))):
            raise SourceError(f"{where}: the title {draft.title!r} gives the entity or a fact away")


def _facts(draft: Draft) -> list[str]:
    """The document's values that could single it out: its names and numbers (not the entity, not the pronouns, not
    the choices, which are generic words shared across documents)."""
    slots = draft.template.slots
    return [value for name, value in draft.values.items() if name in slots and not isinstance(slots[name], Choice)]


def _spaced_words(text: str) -> str:
    """The folded words of ``text`` joined and surrounded by single spaces (for whole-word containment)."""
    return " " + " ".join(_WORDS.findall(fold(text))) + " "


def _holds(text: str, values: Sequence[str]) -> bool:
    """True when one of ``values`` occurs in ``text`` as whole words (compared word by word, folded)."""
    words = _spaced_words(text)
    return any(_spaced_words(value) in words for value in values)


def _occurrences(text: str, answer: str) -> list[int]:
    """Every offset where ``answer`` starts in ``text``, overlapping ones included."""
    found, start = [], text.find(answer)
    while start >= 0:
        found.append(start)
        start = text.find(answer, start + 1)
    return found


def _check_answers(draft: Draft, where: str) -> None:
    for slot in draft.template.questions:
        answer = draft.values[slot]
        [start] = draft.starts[slot]
        occurrences = _occurrences(draft.body, answer)
        if occurrences != [start] or draft.body[start : start + len(answer)] != answer:
            raise SourceError(
                f"{where}: the answer {answer!r} of '{slot}' occurs at {occurrences}, not once at {start}"
            )


def _check_questions(
    draft: Draft, where: str, own: set[str], variants: list[str], named: Callable[[str], set[str]]
) -> None:
    facts = _facts(draft)
    for slot in draft.template.questions:
        question = question_text(draft.template, slot, draft.entity)
        if not find_mentions(question, variants) or named(question) != own:
            raise SourceError(f"{where}: question '{slot}' ({question!r}) does not name its entity alone")
        if _holds(question, facts):
            raise SourceError(f"{where}: question '{slot}' ({question!r}) holds a value of its document")


def _result(drafts: Sequence[Draft], seed: int, titles: Titles) -> SourceResult:
    result = SourceResult()
    for draft in drafts:
        template = draft.template
        label = f"controlled:{template.name}"
        metadata = {
            "template": template.name,
            "domain": template.domain,
            "entity": draft.entity,
            "index": draft.index,
            "seed": seed,
            "titles": titles,
        }
        result.documents.append(
            SourceDocument(draft.doc_id, draft.title, draft.body, label, CONTROLLED_LICENSE, metadata)
        )
        for number, slot in enumerate(template.questions, start=1):
            answer = draft.values[slot]
            result.queries.append(
                SourceQuery(
                    f"{draft.doc_id}-q{number}",
                    draft.doc_id,
                    question_text(template, slot, draft.entity),
                    [(answer, draft.starts[slot][0])],
                    label,
                    f"{draft.doc_id} slot {slot}",
                )
            )
        result.count("documents_generated")
        result.count("questions_generated", len(template.questions))
    return result
