"""Assemble SQuAD-style paragraph records into whole-article documents.

Shared by the ``squad_json`` and ``hf_dataset`` loaders. A document is a whole article: its
paragraphs, in source order, joined with a blank line (``"\\n\\n"``). Each answer's
``answer_start`` is shifted by its paragraph's offset into the article, so answers are in
document coordinates. Spans are *not* repaired here; the pairing stage verifies each one against
the document text and quarantines those that do not match.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from conteb.ids import disambiguate, doc_id_from
from conteb.text import blank_words
from curation.quarantine import QuarantineReason, QuarantineRecord
from curation.sources.model import STAGE, SourceDocument, SourceError, SourceQuery, SourceResult

PARAGRAPH_SEPARATOR = "\n\n"
EMPTY_QUESTION = "empty question"  # quarantine detail of a blank question (conteb.text.is_blank)


@dataclass
class RawQuestion:
    query_id: str
    question: str
    answers: list[tuple[str, int]]  # (text, answer_start) in paragraph coordinates
    row: str
    is_impossible: bool = False
    invalid: str | None = None  # why the row is unusable (a field of the wrong type): it is quarantined


def wrong_type(name: str, value: Any, kinds: tuple[type, ...], expected: str) -> str | None:
    """``None`` when ``type(value)`` is exactly one of ``kinds``, else a detail naming the field ``name``.

    Exact types: JSON ``true`` is no integer offset and the string ``"false"`` no boolean.
    """
    if type(value) in kinds:
        return None
    shown = repr(value)
    return f"'{name}': expected {expected}, got {shown if len(shown) <= 80 else shown[:77] + '...'}"


def answer_problem(index: int, text: Any, start: Any) -> str | None:
    """Why answer ``index`` is not a (JSON string, JSON integer offset) pair, or ``None``."""
    return wrong_type(f"answers[{index}].text", text, (str,), "a string") or wrong_type(
        f"answers[{index}].answer_start", start, (int,), "an integer offset"
    )


@dataclass
class RawParagraph:
    context: str
    row: str
    questions: list[RawQuestion] = field(default_factory=list)


@dataclass
class RawArticle:
    """One article of the source. ``key`` names it (title or source id) and yields its doc id."""

    key: str
    title: str | None
    row: str
    paragraphs: list[RawParagraph] = field(default_factory=list)
    license: str | None = None
    metadata: dict = field(default_factory=dict)


def assign_doc_ids(keys: list[str], rows: list[str], source: str) -> list[str]:
    """Stable, unique doc ids for the documents named ``keys`` (found at ``rows`` of ``source``).

    The id is the slug of the key. Two documents with the same key are an error (ambiguous
    source). Different keys that slugify to the same id get a short hash of their key appended,
    so ids stay stable across reruns.
    """
    first_row: dict[str, str] = {}
    for key, row in zip(keys, rows, strict=True):
        if key in first_row:
            raise SourceError(f"{source}: {row}: duplicate document {key!r}, already defined at {first_row[key]}")
        first_row[key] = row
    slugs = [doc_id_from(key) for key in keys]
    clashes = {slug for slug, n in Counter(slugs).items() if n > 1}
    return [disambiguate(slug, key) if slug in clashes else slug for slug, key in zip(slugs, keys, strict=True)]


def assemble(articles: list[RawArticle], source: str) -> SourceResult:
    """Turn raw articles into a :class:`SourceResult` (documents, queries, quarantine, counts)."""
    result = SourceResult()
    seen_queries: dict[str, str] = {}
    doc_ids = assign_doc_ids([a.key for a in articles], [a.row for a in articles], source)
    for article, doc_id in zip(articles, doc_ids, strict=True):
        offsets, texts, cursor = [], [], 0
        for paragraph in article.paragraphs:
            offsets.append(cursor)
            texts.append(paragraph.context)
            cursor += len(paragraph.context) + len(PARAGRAPH_SEPARATOR)
        result.documents.append(
            SourceDocument(
                doc_id=doc_id,
                title=article.title,
                text=PARAGRAPH_SEPARATOR.join(texts),
                source=source,
                license=article.license,
                metadata={**article.metadata, "row": article.row, "paragraphs": len(texts)},
            )
        )
        result.count("paragraphs", len(texts))
        for paragraph, offset in zip(article.paragraphs, offsets, strict=True):
            for question in paragraph.questions:
                _add_question(result, question, doc_id, offset, source, seen_queries)
    return result


def _add_question(
    result: SourceResult,
    question: RawQuestion,
    doc_id: str,
    offset: int,
    source: str,
    seen: dict[str, str],
) -> None:
    result.count("questions_read")

    def refuse(reason: QuarantineReason, detail: str) -> None:
        result.quarantine.append(
            QuarantineRecord(STAGE, reason, "query", question.query_id, doc_id, source, question.row, detail)
        )

    if question.invalid:
        refuse(QuarantineReason.INVALID_FIELD, question.invalid)
        return
    if question.is_impossible:
        result.count("unanswerable_skipped")
        return
    blank = blank_words(question.question, EMPTY_QUESTION)
    if blank:
        refuse(QuarantineReason.EMPTY_QUERY, blank)
        return
    if question.query_id in seen:
        refuse(QuarantineReason.DUPLICATE_QUERY_ID, f"query id already used at {seen[question.query_id]}")
        return
    seen[question.query_id] = question.row
    if not question.answers:
        refuse(QuarantineReason.NO_ANSWER, "answerable question without any answer span")
        return
    answers = [(text, start + offset) for text, start in question.answers]
    result.queries.append(SourceQuery(question.query_id, doc_id, question.question, answers, source, question.row))
