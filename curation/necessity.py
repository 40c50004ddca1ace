"""Context-necessity labels of the published queries: does a query need more than its gold chunk?

Each query of ``CONTEB_QUERIES`` carries three labels, decided here and nowhere else:

* ``theme_missing`` (bool): the query names its document's theme while the gold chunk *as embedded*
  (the ``chunk`` column of ``CONTEB_DOCUMENTS``, i.e. after reformulation) does not. "Names" is the
  leak detector's matcher, :func:`curation.themes.mentions.find_mentions` over
  :func:`curation.themes.mentions.theme_variants` (theme, aliases and their simple variants: article-less,
  accent-folded, regular English plural or singular of the last word, possessives; case- and
  accent-insensitive, whole words: "Huguenots'" names the theme "Huguenot"). The theme is the
  ``THEMES`` stage table's row of the document when the task reformulates (LLM-extracted or the
  offline rule, whatever reformulation used), else the offline rule,
  :func:`curation.themes.naming.offline_theme`: the title when it is informative, else the most salient
  name of the document's first chunk (``og_chunk``), else the title as it is or the doc id.
  A query with several gold chunks (``chunk_ids``) is judged on its ``chunk_id`` chunk, the one the
  evaluation scores as relevant.
* ``answerable_alone`` (bool, null when unjudged): the LLM's judgement whether the gold chunk alone
  answers the query (``ANSWERABILITY`` stage table, ``curation/answerability.py``), matched on
  ``(query_id, chunk_id)``; null when no LLM is configured or the judgement failed.
* ``needs_context`` (bool) = ``theme_missing OR answerable_alone is False``; a null
  ``answerable_alone`` counts as "no evidence" (only the theme signal decides then).

No Dagster; the ``conteb_dataset`` asset calls :func:`label_queries` before publishing.
"""

from __future__ import annotations

import pyarrow as pa

from conteb.schemas import CONTEB_QUERIES, NECESSITY_COLUMNS
from curation.themes.mentions import find_mentions, theme_variants
from curation.themes.naming import offline_theme

RULE = (
    "`needs_context` = `theme_missing` OR `answerable_alone` is false. `theme_missing`: the query names "
    "the document's theme (the LLM's, else an informative title, else the main name of its first chunk; "
    "with its aliases and variants, plurals and possessives included: the reformulation leak detector's "
    "matcher) while its gold chunk as embedded (`chunk`, after reformulation) does not. "
    "`answerable_alone`: an LLM's judgement that the gold chunk alone answers the query (null when no LLM "
    "judged it). A query with several gold chunks is judged on its `chunk_id` chunk."
)
"""The rule in one paragraph (Markdown), as the dataset card states it."""


def is_labelled(table: pa.Table) -> bool:
    """True when ``table`` has every context-necessity column (external ConTEB datasets have none)."""
    return all(name in table.column_names for name in NECESSITY_COLUMNS)


def document_variants(documents: pa.Table, themes: pa.Table | None = None) -> dict[str, list[str]]:
    """``doc_id -> theme variants`` for every document of ``documents`` (``CONTEB_DOCUMENTS``).

    With ``themes`` (``THEMES``): each document's ``theme`` and ``aliases``; a document without a row
    raises ``ValueError`` (the themes table is stale). Without: :func:`curation.themes.naming.offline_theme` of
    the document's title (the first non-null title of its chunks) and head (the ``og_chunk`` of its
    first chunk).
    """
    titles: dict[str, str | None] = {}
    heads: dict[str, tuple[int, str]] = {}
    for doc_id, title, index, text in zip(
        *(documents.column(name).to_pylist() for name in ("doc_id", "title", "chunk_index", "og_chunk")),
        strict=True,
    ):
        if titles.get(doc_id) is None:
            titles[doc_id] = title
        if doc_id not in heads or index < heads[doc_id][0]:
            heads[doc_id] = (index, text)
    if themes is None:
        return {
            doc_id: theme_variants(*offline_theme(title, heads[doc_id][1], doc_id)[:2])
            for doc_id, title in titles.items()
        }
    rows = {
        doc_id: (theme, aliases or [])
        for doc_id, theme, aliases in zip(
            *(themes.column(name).to_pylist() for name in ("doc_id", "theme", "aliases")), strict=True
        )
    }
    missing = [doc_id for doc_id in titles if doc_id not in rows]
    if missing:
        raise ValueError(
            f"themes table has no row for documents {missing[:5]} ({len(missing)} in all): rebuild the themes"
        )
    return {doc_id: theme_variants(*rows[doc_id]) for doc_id in titles}


def _answerability(table: pa.Table | None) -> dict[tuple[str, str], bool]:
    if table is None:
        return {}
    return {
        (qid, cid): bool(value)
        for qid, cid, value in zip(
            *(table.column(name).to_pylist() for name in ("query_id", "chunk_id", "answerable_alone")), strict=True
        )
        if value is not None
    }


def label_queries(
    queries: pa.Table,
    documents: pa.Table,
    themes: pa.Table | None = None,
    answerability: pa.Table | None = None,
) -> pa.Table:
    """``queries`` (``PAIRED_QUERIES`` columns) with the three labels, as ``CONTEB_QUERIES`` (rule above).

    ``documents``: the published ``CONTEB_DOCUMENTS`` (``chunk`` as embedded); ``themes``: the
    ``THEMES`` table when the task reformulates, else ``None`` (title rule); ``answerability``: the
    ``ANSWERABILITY`` table, or ``None`` when no LLM judged (``answerable_alone`` all null). Raises
    ``ValueError`` naming the row when a query's gold ``chunk_id`` is not among the documents.
    """
    text_of = dict(zip(documents.column("chunk_id").to_pylist(), documents.column("chunk").to_pylist(), strict=True))
    doc_of = dict(zip(documents.column("chunk_id").to_pylist(), documents.column("doc_id").to_pylist(), strict=True))
    variants = document_variants(documents, themes)
    judged = _answerability(answerability)
    missing_flags, answerable_flags, needs = [], [], []
    for row, (qid, text, chunk_id) in enumerate(
        zip(*(queries.column(name).to_pylist() for name in ("query_id", "query", "chunk_id")), strict=True)
    ):
        if chunk_id not in text_of:
            raise ValueError(f"queries: row {row}: query {qid!r}: gold chunk_id {chunk_id!r} is not in the documents")
        names = variants[doc_of[chunk_id]]
        theme_missing = bool(find_mentions(text, names)) and not find_mentions(text_of[chunk_id], names)
        answerable = judged.get((qid, chunk_id))
        missing_flags.append(theme_missing)
        answerable_flags.append(answerable)
        needs.append(theme_missing or answerable is False)
    base = queries.select([name for name in queries.column_names if name not in NECESSITY_COLUMNS])
    labelled = base.append_column("theme_missing", pa.array(missing_flags, pa.bool_()))
    labelled = labelled.append_column("answerable_alone", pa.array(answerable_flags, pa.bool_()))
    labelled = labelled.append_column("needs_context", pa.array(needs, pa.bool_()))
    return labelled.select(CONTEB_QUERIES.names).cast(CONTEB_QUERIES)


def necessity_counts(queries: pa.Table) -> dict[str, int]:
    """Counts of a labelled queries table: ``needs_context``, ``theme_missing``,
    ``answerable_alone_false`` and ``unlabelled`` (queries no LLM judged: ``answerable_alone`` null)."""
    if not is_labelled(queries):
        raise ValueError(f"queries have no context-necessity labels (columns {queries.column_names})")
    answerable = queries.column("answerable_alone").to_pylist()
    return {
        "needs_context": sum(bool(v) for v in queries.column("needs_context").to_pylist()),
        "theme_missing": sum(bool(v) for v in queries.column("theme_missing").to_pylist()),
        "answerable_alone_false": sum(v is False for v in answerable),
        "unlabelled": sum(v is None for v in answerable),
    }
