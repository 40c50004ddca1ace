"""The bundled sample (data/sample): well formed, and a controlled context-dependent task (see its README)."""

from collections import Counter

from conteb.config import ChunkingConfig
from curation.chunking import chunk_documents
from curation.dataset import conteb_documents
from curation.necessity import document_variants
from curation.sources.sample import load_sample
from curation.themes.mentions import find_mentions, theme_variants
from curation.themes.naming import offline_theme, theme_from_title
from tests.conftest import SAMPLE_DIR

CITIES = {
    *("arlenmouth", "caldrany", "corvessa", "drevnik", "holmsvar", "istrena", "ostherm", "pellbridge"),
    *("pordane", "quenlow", "ruvenga", "salvenne", "tarnwick", "torrisk", "velmora"),
}
CLUBS = {
    *("as-vaurenne", "brackwater-rovers", "deportivo-sarrena", "dynamo-korvel", "ethnikos-kalydra", "fc-eisenau"),
    *("gorsefield-harriers", "inverallan-thistle", "metalist-drasnov", "olimpia-vescara", "radnik-velebor"),
    *("redcliffe-albion", "sporting-almadra", "sv-drechtwijk", "vestvik-if"),
}
PARAGRAPHS = 7  # the template of both families: overview naming the entity, then six indirect paragraphs
# The review demo (data/sample/README.md, "The leak rule"): the only later paragraphs that name their own entity,
# as (doc_id, paragraph index); offline, the masking reformulation changes their chunks, so those review items
# are left to a person.
NAMED_LATER = {("tarnwick", 4), ("ostherm", 4), ("brackwater-rovers", 6), ("vestvik-if", 4)}


def _entity_words(title: str) -> list[str]:
    """The theme, its aliases and every word of them that could name the entity on its own ("Rovers")."""
    theme, aliases = theme_from_title(title)
    names = [theme, *aliases]
    words = [word for name in names for word in name.split() if len(word) > 2 and word.upper() != word]
    return [*names, *words]


def test_bundled_sample_is_well_formed() -> None:
    result = load_sample(SAMPLE_DIR)
    assert {doc.doc_id for doc in result.documents} == CITIES | CLUBS
    assert all(3000 <= len(doc.text) <= 6000 for doc in result.documents)
    assert result.quarantine == []
    texts = {doc.doc_id: doc.text for doc in result.documents}
    assert len(result.queries) >= 60
    assert set(Counter(q.doc_id for q in result.queries).values()) <= {5, 6, 7}
    for query in result.queries:
        [(answer, start)] = query.answers
        assert texts[query.doc_id][start : start + len(answer)] == answer, query.query_id
        assert texts[query.doc_id].count(answer) == 1, query.query_id  # the offset names the only occurrence


def test_bundled_sample_is_context_dependent() -> None:
    """Same template per family; the entity is named in the first paragraph, and later only in the paragraphs of
    ``NAMED_LATER``, by its theme's variants (what the masking reformulation finds); every question names it."""
    result = load_sample(SAMPLE_DIR)
    paragraphs = {doc.doc_id: doc.text.split("\n\n") for doc in result.documents}
    assert all(len(parts) == PARAGRAPHS for parts in paragraphs.values())
    for doc in result.documents:
        variants = theme_variants(*theme_from_title(doc.title))
        assert find_mentions(paragraphs[doc.doc_id][0], variants), doc.doc_id
        for index, paragraph in enumerate(paragraphs[doc.doc_id]):
            if (doc.doc_id, index) in NAMED_LATER:
                assert find_mentions(paragraph, variants), (doc.doc_id, index)
        for other in result.documents:  # no other later paragraph names its own entity, none any other one
            words = theme_variants(other.title, _entity_words(other.title))
            for index, paragraph in enumerate(paragraphs[doc.doc_id]):
                names_itself = other.doc_id == doc.doc_id and (doc.doc_id, index) in NAMED_LATER
                if (index > 0 or other.doc_id != doc.doc_id) and not names_itself:
                    assert find_mentions(paragraph, words) == [], (doc.doc_id, index, other.doc_id)
    titles = {doc.doc_id: doc.title for doc in result.documents}
    for query in result.queries:
        variants = theme_variants(*theme_from_title(titles[query.doc_id]))
        assert find_mentions(query.query, variants), query.query_id
    first_end = {doc_id: len(parts[0]) for doc_id, parts in paragraphs.items()}
    starts = [(q.answers[0][1], first_end[q.doc_id]) for q in result.queries]
    assert sum(start >= 1000 for start, _ in starts) / len(starts) >= 0.6  # most answers after the first chunk
    assert sum(start < end for start, end in starts) >= len(CITIES | CLUBS)  # controls in the naming paragraph


def test_sample_themes_come_from_its_titles_and_its_heads_name_the_same_entities() -> None:
    """The sample's titles are informative: the offline theme is the title rule, as before the head rule; and
    each document's first chunk names the same entity (its subject), so a copy without titles keeps its themes."""
    documents = load_sample(SAMPLE_DIR).documents_table()
    chunks = chunk_documents(documents, ChunkingConfig(chunk_size=1000, chunk_overlap=0)).chunks
    variants = document_variants(conteb_documents(chunks))
    rows = zip(
        *(chunks.column(name).to_pylist() for name in ("doc_id", "chunk_index", "og_chunk", "title")), strict=True
    )
    heads = {doc_id: (text, title) for doc_id, index, text, title in rows if index == 0}
    assert set(heads) == set(documents.column("doc_id").to_pylist())
    for doc_id, (head, title) in heads.items():
        assert offline_theme(title, head, doc_id) == (*theme_from_title(title), "title"), doc_id
        assert variants[doc_id] == theme_variants(*theme_from_title(title)), doc_id
        assert offline_theme(None, head, doc_id) == (*theme_from_title(title), "head"), doc_id
