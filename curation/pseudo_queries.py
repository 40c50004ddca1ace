"""Offline pseudo-queries for documents-only corpora: the inverse cloze task, as pure functions.

Source: Lee, Chang and Toutanova (2019), "Latent Retrieval for Weakly Supervised Open Domain Question Answering"
(ACL), section 4 (Inverse Cloze Task): a sentence of a passage is the pseudo-query and the rest of the passage,
without that sentence, its pseudo-evidence. Here the passage is a published chunk and the document's subject is
made explicit in the query, so that the query asks what a context-dependent query asks: something the chunk says
about a subject the chunk itself does not name. The rules (the dataset card states them, :data:`RULE`):

* **Documents**: those the task's document-level splits put in ``pseudo_queries.split`` (``train``), by the same
  assignment the published folder uses (:func:`curation.splits.assign_task_splits`); no other document gets any.
* **Sentences** (:func:`sentence_spans`): the document is cut at line breaks and after ``.``, ``!`` or ``?``
  (closing quotes and brackets kept with the sentence) followed by whitespace, except after a known abbreviation
  (``Mr.``, ``Dr.``, ``St.``, ... :data:`ABBREVIATIONS`), an initial (``F.``), a dotted acronym (``U.S.``), or
  before a lower-case letter. Spans are in document coordinates, whitespace trimmed.
* **Filters**, the first that applies is the sentence's outcome (:class:`Outcome`): it lies in a document's first
  chunk (chunk_index 0, which usually names the subject: context does not matter there); it crosses a chunk
  boundary; it is a fragment (no ``.``/``!``/``?`` at its end: headings, list items); boilerplate (a stage
  direction such as ``[Applause]`` or ``(Laughter.)`` anywhere in it, a salutation such as ``Mr. Speaker, ...``
  or ``Thank you``, or no lower-case letter); fewer than ``min_words`` or more than ``max_words`` words (tokens
  holding a letter or digit); it names the subject (:func:`curation.themes.mentions.find_mentions` over the subject's
  names, see below); its text (case-, accent- and whitespace-folded) occurs more than once in the document (a copy
  elsewhere would answer the query); it overlaps an annotated answer span of the task's paired queries.
* **Selection**: the eligible sentences of a document, shuffled by ``random.Random(f"{seed}:{doc_id}")`` (so a
  document's picks depend only on the seed and itself), are taken in that order unless the document already has
  ``per_document`` (outcome ``over_per_document``), the chunk has ``per_chunk`` (``over_per_chunk``), or the
  chunk would lose more than half of its visible characters (``over_chunk_share``: the training copy must stay a
  passage).
* **Query** (:func:`query_text`): ``template`` with ``{subject}`` and ``{sentence}`` (whitespace runs collapsed).
  The subject (:func:`document_subject`) is ``subject`` formatted with ``{title}`` (the document's title, its doc
  id when untitled), ``{theme}`` (:func:`curation.themes.naming.theme_from_title` of it) and the named groups of
  ``title_pattern``, which the whole title must match (a document whose title does not is quarantined, reason
  ``title_unmatched``). The subject's names, which no query sentence may contain, are the theme, its aliases and
  every group value, with their variants (:func:`curation.themes.mentions.theme_variants`).
* **Row**: a ``PSEUDO_QUERIES`` row per selected sentence, pairing ``pseudo``, source ``pseudo``, gold = the chunk
  holding it, ``answer`` = the sentence as written, ``answer_start``/``answer_end`` = its span in the document.
* **Training copy** (:func:`remove_sentences`): the published ``chunk`` of such a chunk is its ``og_chunk`` with
  each selected sentence cut out, with the whitespace after it (before it at the chunk's end); ``og_chunk`` and
  the offsets stay the original ones. Lee et al. keep the sentence in 10% of cases; here it is always removed.

Pure (no Dagster); the ``[task]/pseudo_queries`` asset and the published folder call it.
"""

from __future__ import annotations

import bisect
import random
import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

import pyarrow as pa
import pyarrow.compute as pc

from conteb.config import PseudoQueriesConfig, TaskConfig
from conteb.names import Pairing, Stage
from conteb.schemas import PSEUDO_QUERIES, PSEUDO_SENTENCES, table_from_rows
from conteb.text import is_blank, is_blank_character
from curation.quarantine import QuarantineReason, QuarantineRecord
from curation.splits import assign_task_splits
from curation.themes.mentions import find_mentions, fold, theme_variants
from curation.themes.naming import theme_from_title

STAGE = Stage.PSEUDO_QUERIES
SOURCE = "pseudo"
"""The ``source`` of every pseudo-query row (its provenance is the document, ``doc_id`` and the answer span)."""
MAX_REMOVED_SHARE = 0.5
"""At most this share of a chunk's visible characters may be cut out of its training copy."""

ABBREVIATIONS = frozenset(
    {
        *("Mr", "Mrs", "Ms", "Messrs", "Dr", "St", "Jr", "Sr", "Prof", "Rev", "Hon", "Gen", "Gov", "Sen", "Rep"),
        *("Col", "Capt", "Lt", "Sgt", "Adm", "Mt", "Ft", "No", "Nos", "Vol", "Art", "Fig", "Jan", "Feb", "Mar"),
        *("Apr", "Aug", "Sept", "Sep", "Oct", "Nov", "Dec", "vs", "etc", "approx", "cf", "Inc", "Ltd", "Co", "Corp"),
    }
)
"""Words after which a period does not end a sentence (compared case-sensitively, without the period)."""

SALUTATIONS = (
    "mr. speaker",
    "madam speaker",
    "mr. president",
    "madam president",
    "mr. vice president",
    "mr. chief justice",
    "members of the congress",
    "members of congress",
    "ladies and gentlemen",
    "my fellow",
    "thank you",
    "god bless",
)
"""Openings of a sentence that addresses the audience rather than says something (compared case-folded)."""

_STAGE_DIRECTION = re.compile(
    r"[\[(]\s*(?:applause|laughter|cheers|cheering|boos|booing|inaudible|music|crosstalk)\b[^\])]*[\])]",
    re.IGNORECASE,
)
_CANDIDATE_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s)")
_SENTENCE_FINAL = re.compile(r"[.!?][\"'”’)\]]*\Z")
_TOKEN_BEFORE = re.compile(r"(\S+)\Z")
_INITIAL_OR_ACRONYM = re.compile(r"[A-Z]|(?:[A-Za-z]\.)+[A-Za-z]")
_WORD = re.compile(r"\w", re.UNICODE)


class Outcome(StrEnum):
    """What became of a sentence: ``selected``, or why not (the ``outcome`` column of ``PSEUDO_SENTENCES``).
    Values are stable: they are stored and counted in metadata and the dataset card."""

    SELECTED = "selected"
    FIRST_CHUNK = "first_chunk"
    CROSSES_CHUNKS = "crosses_chunks"
    FRAGMENT = "fragment"
    BOILERPLATE = "boilerplate"
    TOO_SHORT = "too_short"
    TOO_LONG = "too_long"
    NAMES_SUBJECT = "names_subject"
    DUPLICATED = "duplicated"
    HOLDS_ANSWER = "holds_answer"
    OVER_PER_DOCUMENT = "over_per_document"
    OVER_PER_CHUNK = "over_per_chunk"
    OVER_CHUNK_SHARE = "over_chunk_share"


FILTERS = (
    Outcome.FIRST_CHUNK,
    Outcome.CROSSES_CHUNKS,
    Outcome.FRAGMENT,
    Outcome.BOILERPLATE,
    Outcome.TOO_SHORT,
    Outcome.TOO_LONG,
    Outcome.NAMES_SUBJECT,
    Outcome.DUPLICATED,
    Outcome.HOLDS_ANSWER,
)
"""The outcomes of a sentence refused by a filter, in the order they are tried."""
CAPS = (Outcome.OVER_PER_DOCUMENT, Outcome.OVER_PER_CHUNK, Outcome.OVER_CHUNK_SHARE)
"""The outcomes of an eligible sentence left out by the selection's bounds."""

RULE = (
    "Pseudo-queries follow the inverse cloze task (Lee, Chang and Toutanova 2019, *Latent Retrieval for Weakly "
    "Supervised Open Domain Question Answering*): a sentence of a later chunk (`chunk_index` >= 1) of a document of "
    "the training split, prefixed with the document's subject, is a query whose gold chunk is the chunk it came "
    "from; the sentence is cut out of that chunk's `chunk` (the text trained on; `og_chunk` and the offsets keep "
    "the original, and `answer_start`/`answer_end` locate the sentence in the document). Sentences are refused when "
    "they cross chunks, are fragments or boilerplate (stage directions, salutations, headings), are too short or "
    "too long, name the subject, occur twice in the document or hold an annotated answer; at most `per_chunk` per "
    "chunk (and never more than half of a chunk's text) and `per_document` per document are kept, picked by a "
    "seeded shuffle. Rows have `pairing: pseudo`, `source: pseudo`; they are training data: no pseudo-query is in "
    "an evaluated split (a blocking check), and the evaluation refuses them."
)
"""The rule in one paragraph (Markdown), as the dataset card states it."""


# --- sentences ---------------------------------------------------------------------------------


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``[(start, end)]`` of the sentences of ``text`` in order (rule in the module doc); ``text[start:end]`` is
    trimmed of whitespace and never blank."""
    spans: list[tuple[int, int]] = []
    line_start = 0
    for line in text.splitlines(keepends=True):
        cursor = line_start
        for match in _CANDIDATE_END.finditer(line):
            end = line_start + match.end()
            if _ends_sentence(text, line_start + match.start(), end):
                _add_trimmed(spans, text, cursor, end)
                cursor = end
        line_start += len(line)
        _add_trimmed(spans, text, cursor, line_start)
    return spans


def _ends_sentence(text: str, punct_start: int, end: int) -> bool:
    """Whether the punctuation at ``[punct_start, end)`` ends a sentence (not an abbreviation, an initial or an
    acronym before a single period, not followed by a lower-case letter)."""
    following = text[end : end + 40].lstrip()
    if following[:1].islower():
        return False
    if text[punct_start:end].rstrip("\"'”’)]") != ".":
        return True
    token = _TOKEN_BEFORE.search(text, max(0, punct_start - 40), punct_start)
    if token is None:
        return True
    word = token.group(1).lstrip("\"'“‘([")
    return word not in ABBREVIATIONS and _INITIAL_OR_ACRONYM.fullmatch(word) is None


def _add_trimmed(spans: list[tuple[int, int]], text: str, start: int, end: int) -> None:
    while start < end and is_blank_character(text[start]):
        start += 1
    while end > start and is_blank_character(text[end - 1]):
        end -= 1
    if start < end:
        spans.append((start, end))


def word_count(sentence: str) -> int:
    """Whitespace-separated tokens holding at least one letter or digit."""
    return sum(1 for token in sentence.split() if _WORD.search(token))


def is_boilerplate(sentence: str) -> bool:
    """A stage direction anywhere, a salutation at the start, or no lower-case letter (rule in the module doc)."""
    opening = " ".join(sentence.split()).lower().lstrip("\"'“‘([")
    return (
        _STAGE_DIRECTION.search(sentence) is not None
        or opening.startswith(SALUTATIONS)
        or not any(char.islower() for char in sentence)
    )


def _normalised(text: str) -> str:
    return " ".join(fold(text).split())


# --- the subject -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subject:
    """How the queries of one document name it (``text``) and the names a query sentence may not contain
    (``variants``: :func:`curation.themes.mentions.theme_variants`)."""

    text: str
    variants: tuple[str, ...]


def document_subject(title: str | None, doc_id: str, settings: PseudoQueriesConfig) -> Subject | None:
    """The document's :class:`Subject` (rule in the module doc), or None when ``settings.title_pattern`` does not
    match its title."""
    title = title if title and not is_blank(title) else doc_id
    groups: dict[str, str] = {}
    if settings.title_pattern is not None:
        match = re.fullmatch(settings.title_pattern, title)
        if match is None:
            return None
        groups = match.groupdict(default="")
    theme, aliases = theme_from_title(title)
    theme = theme or doc_id
    text = " ".join(settings.subject.format(title=title, theme=theme, **groups).split())
    names = [*aliases, *(value for value in groups.values() if value)]
    return Subject(text, tuple(theme_variants(theme, names)))


def query_text(settings: PseudoQueriesConfig, subject: Subject, sentence: str) -> str:
    """``settings.template`` with the subject and the sentence (its whitespace runs collapsed)."""
    return settings.template.format(subject=subject.text, sentence=" ".join(sentence.split()))


# --- building ----------------------------------------------------------------------------------


@dataclass
class PseudoResult:
    """The ``PSEUDO_QUERIES`` and ``PSEUDO_SENTENCES`` tables, the quarantined documents and the counts."""

    queries: pa.Table
    sentences: pa.Table
    quarantine: list[QuarantineRecord] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Chunk:
    chunk_id: str
    index: int
    start: int
    end: int
    visible: int  # characters that show something (conteb.text)


def pseudo_documents(task: TaskConfig, chunks: pa.Table) -> list[str]:
    """The documents of ``chunks`` that the published folder puts in ``task.pseudo_split`` (sorted)."""
    if task.splits is None or task.pseudo_split is None:
        raise ValueError(f"task '{task.name}': pseudo_queries needs document-level splits")
    doc_ids = chunks.column("doc_id").to_pylist()
    assignment = assign_task_splits(task.name, doc_ids, task.splits.fractions, task.splits.seed)
    return sorted(doc_id for doc_id, split in assignment.items() if split == task.pseudo_split)


def build_pseudo_queries(
    documents: pa.Table,
    chunks: pa.Table,
    doc_ids: Collection[str],
    settings: PseudoQueriesConfig,
    answers: pa.Table | None = None,
) -> PseudoResult:
    """Pseudo-queries for the documents ``doc_ids`` of ``documents`` (``SOURCE_DOCUMENTS``) cut into ``chunks``
    (``CHUNKS``); ``answers`` (``PAIRED_QUERIES``): spans no chosen sentence may overlap. Rules in the module doc.

    Every sentence of those documents gets a ``PSEUDO_SENTENCES`` row (its outcome); a document without chunks
    has none (it was quarantined at chunking). Rows are in document, then text order.
    """
    wanted = set(doc_ids)
    by_doc = _chunks_by_document(chunks, wanted)
    spans = _answer_spans(answers, wanted)
    queries: list[dict] = []
    sentences: list[dict] = []
    result = PseudoResult(PSEUDO_QUERIES.empty_table(), PSEUDO_SENTENCES.empty_table())
    for doc_id, title, text, source in sorted(
        zip(*(documents.column(c).to_pylist() for c in ("doc_id", "title", "text", "source")), strict=True)
    ):
        if doc_id not in wanted or doc_id not in by_doc:
            continue
        subject = document_subject(title, doc_id, settings)
        if subject is None:
            result.quarantine.append(
                QuarantineRecord(
                    STAGE,
                    QuarantineReason.TITLE_UNMATCHED,
                    "document",
                    doc_id,
                    doc_id,
                    source,
                    "title",
                    f"title {title!r} does not match pseudo_queries.title_pattern {settings.title_pattern!r}: "
                    "the document gets no pseudo-queries",
                )
            )
            continue
        rows, picked = _document_sentences(doc_id, text, by_doc[doc_id], subject, settings, spans.get(doc_id, []))
        sentences += rows
        queries += picked
    result.queries = table_from_rows(queries, PSEUDO_QUERIES)
    result.sentences = table_from_rows(sentences, PSEUDO_SENTENCES)
    result.stats = pseudo_counts(result.sentences) | {
        "documents": sum(1 for doc_id in wanted if doc_id in by_doc),
        "documents_quarantined": len(result.quarantine),
        "documents_with_queries": len({row["doc_id"] for row in queries}),
    }
    return result


def pseudo_counts(sentences: pa.Table) -> dict[str, int]:
    """``sentences`` (every row), ``pseudo_queries`` (selected) and one count per other outcome, in
    :class:`Outcome` order, from a ``PSEUDO_SENTENCES`` table."""
    outcomes = Counter(sentences.column("outcome").to_pylist())
    counts = {"sentences": sentences.num_rows, "pseudo_queries": outcomes.get(Outcome.SELECTED, 0)}
    counts.update({str(outcome): outcomes.get(outcome, 0) for outcome in (*FILTERS, *CAPS)})
    return counts


def _chunks_by_document(chunks: pa.Table, wanted: set[str]) -> dict[str, list[_Chunk]]:
    grouped: dict[str, list[_Chunk]] = {}
    columns = ("doc_id", "chunk_id", "chunk_index", "char_start", "char_end", "og_chunk")
    for doc_id, cid, index, start, end, text in zip(*(chunks.column(c).to_pylist() for c in columns), strict=True):
        if doc_id in wanted:
            visible = sum(not is_blank_character(char) for char in text)
            grouped.setdefault(doc_id, []).append(_Chunk(cid, index, start, end, visible))
    for entries in grouped.values():
        entries.sort(key=lambda chunk: chunk.start)
    return grouped


def _answer_spans(answers: pa.Table | None, wanted: set[str]) -> dict[str, list[tuple[int, int]]]:
    spans: dict[str, list[tuple[int, int]]] = {}
    if answers is None:
        return spans
    columns = ("doc_id", "answer_start", "answer_end")
    for doc_id, start, end in zip(*(answers.column(c).to_pylist() for c in columns), strict=True):
        if doc_id in wanted and start is not None and end is not None:
            spans.setdefault(doc_id, []).append((start, end))
    return spans


def _chunk_of(chunks: list[_Chunk], starts: list[int], start: int, end: int) -> _Chunk | None:
    """The one chunk that ``[start, end)`` overlaps, when it holds all of it; None when the span crosses a chunk
    boundary or lies in the overlap of two chunks (``chunk_overlap``: a copy would stay in the other one)."""
    position = bisect.bisect_left(starts, end) - 1  # the last chunk starting before the span ends
    overlapping: list[_Chunk] = []
    while position >= 0 and len(overlapping) < 2:
        chunk = chunks[position]
        if chunk.end <= start:
            break  # chunks are in text order: every earlier one ends before the span starts
        overlapping.append(chunk)
        position -= 1
    if len(overlapping) == 1 and overlapping[0].start <= start and end <= overlapping[0].end:
        return overlapping[0]
    return None


def _filter(
    sentence: str,
    chunk: _Chunk | None,
    words: int,
    span: tuple[int, int],
    counts: Counter[str],
    subject: Subject,
    settings: PseudoQueriesConfig,
    answers: list[tuple[int, int]],
) -> Outcome | None:
    """The first filter that refuses the sentence (order of :data:`FILTERS`), or None when it is eligible."""
    if chunk is not None and chunk.index == 0:
        return Outcome.FIRST_CHUNK
    if chunk is None:
        return Outcome.CROSSES_CHUNKS
    if _SENTENCE_FINAL.search(sentence) is None:
        return Outcome.FRAGMENT
    if is_boilerplate(sentence):
        return Outcome.BOILERPLATE
    if words < settings.min_words:
        return Outcome.TOO_SHORT
    if words > settings.max_words:
        return Outcome.TOO_LONG
    if find_mentions(sentence, subject.variants):
        return Outcome.NAMES_SUBJECT
    if counts[_normalised(sentence)] > 1:
        return Outcome.DUPLICATED
    if any(start < span[1] and span[0] < end for start, end in answers):
        return Outcome.HOLDS_ANSWER
    return None


def _document_sentences(
    doc_id: str,
    text: str,
    chunks: list[_Chunk],
    subject: Subject,
    settings: PseudoQueriesConfig,
    answers: list[tuple[int, int]],
) -> tuple[list[dict], list[dict]]:
    """The ``PSEUDO_SENTENCES`` rows and ``PSEUDO_QUERIES`` rows of one document."""
    spans = sentence_spans(text)
    starts = [chunk.start for chunk in chunks]
    folded_text = _normalised(text)
    counts: Counter[str] = Counter()
    for start, end in spans:
        key = _normalised(text[start:end])
        if key not in counts:
            counts[key] = _occurrences(folded_text, key)
    rows: list[dict] = []
    eligible: list[int] = []
    for position, (start, end) in enumerate(spans):
        sentence = text[start:end]
        chunk = _chunk_of(chunks, starts, start, end)
        words = word_count(sentence)
        outcome = _filter(sentence, chunk, words, (start, end), counts, subject, settings, answers)
        rows.append(
            {
                "doc_id": doc_id,
                "chunk_id": chunk.chunk_id if chunk else None,
                "char_start": start,
                "char_end": end,
                "words": words,
                "outcome": outcome or Outcome.SELECTED,
                "query_id": None,
            }
        )
        if outcome is None:
            eligible.append(position)
    order = list(eligible)
    random.Random(f"{settings.seed}:{doc_id}").shuffle(order)
    per_chunk: Counter[str] = Counter()
    removed: Counter[str] = Counter()
    chosen = 0
    by_id = {chunk.chunk_id: chunk for chunk in chunks}
    for position in order:
        row = rows[position]
        chunk = by_id[row["chunk_id"]]
        visible = sum(not is_blank_character(char) for char in text[row["char_start"] : row["char_end"]])
        if chosen >= settings.per_document:
            row["outcome"] = Outcome.OVER_PER_DOCUMENT
        elif per_chunk[chunk.chunk_id] >= settings.per_chunk:
            row["outcome"] = Outcome.OVER_PER_CHUNK
        elif removed[chunk.chunk_id] + visible > MAX_REMOVED_SHARE * chunk.visible:
            row["outcome"] = Outcome.OVER_CHUNK_SHARE
        else:
            chosen += 1
            per_chunk[chunk.chunk_id] += 1
            removed[chunk.chunk_id] += visible
            row["query_id"] = f"pseudo-{doc_id}-{row['char_start']}"
    queries = [
        {
            "query_id": row["query_id"],
            "query": query_text(settings, subject, text[row["char_start"] : row["char_end"]]),
            "chunk_id": row["chunk_id"],
            "chunk_ids": [row["chunk_id"]],
            "answer": text[row["char_start"] : row["char_end"]],
            "answer_start": row["char_start"],
            "answer_end": row["char_end"],
            "doc_id": doc_id,
            "pairing": Pairing.PSEUDO,
            "source": SOURCE,
        }
        for row in rows
        if row["query_id"] is not None
    ]
    return rows, queries


def _occurrences(haystack: str, needle: str) -> int:
    """Occurrences of ``needle`` in ``haystack`` that no letter or digit touches on either side."""
    count, position = 0, haystack.find(needle)
    while needle and position >= 0:
        after = position + len(needle)
        if (position == 0 or not haystack[position - 1].isalnum()) and (
            after == len(haystack) or not haystack[after].isalnum()
        ):
            count += 1
        position = haystack.find(needle, position + 1)
    return count


# --- the training copy -------------------------------------------------------------------------


def remove_sentences(chunk: str, spans: Iterable[tuple[int, int]]) -> str:
    """``chunk`` without the ``[start, end)`` spans (chunk coordinates), each cut with the whitespace after it, or
    before it when nothing but whitespace follows (rule in the module doc)."""
    cuts: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if not 0 <= start < end <= len(chunk):
            raise ValueError(f"span [{start}, {end}) is outside the chunk (length {len(chunk)})")
        while end < len(chunk) and is_blank_character(chunk[end]):
            end += 1
        if cuts and start <= cuts[-1][1]:
            cuts[-1] = (cuts[-1][0], max(end, cuts[-1][1]))
        else:
            cuts.append((start, end))
    if cuts and cuts[-1][1] == len(chunk):  # the last cut ends the chunk: take the whitespace before it instead
        start = cuts[-1][0]
        while start > 0 and is_blank_character(chunk[start - 1]):
            start -= 1
        cuts[-1] = (start, len(chunk))
    pieces, cursor = [], 0
    for start, end in cuts:
        pieces.append(chunk[cursor:start])
        cursor = end
    pieces.append(chunk[cursor:])
    return "".join(pieces)


def with_sentences_removed(documents: pa.Table, queries: pa.Table) -> pa.Table:
    """``documents`` (``CONTEB_DOCUMENTS``) with the ``chunk`` of every gold chunk of a pseudo-query of
    ``queries`` made its training copy: its ``og_chunk`` without those queries' sentences
    (:func:`remove_sentences`). A pseudo-query whose sentence is not in its gold chunk's ``og_chunk`` at its
    offsets (a stale stage table) raises ``ValueError`` naming it."""
    pseudo = queries.filter(pc.equal(queries.column("pairing"), str(Pairing.PSEUDO)))
    if pseudo.num_rows == 0:
        return documents
    cuts: dict[str, list[tuple[int, int]]] = {}
    rows = {cid: row for row, cid in enumerate(documents.column("chunk_id").to_pylist())}
    starts = documents.column("char_start").to_pylist()
    originals = documents.column("og_chunk").to_pylist()
    for qid, cid, answer, start, end in zip(
        *(pseudo.column(c).to_pylist() for c in ("query_id", "chunk_id", "answer", "answer_start", "answer_end")),
        strict=True,
    ):
        row = rows.get(cid)
        local = (start - starts[row], end - starts[row]) if row is not None else (0, 0)
        if row is None or originals[row][local[0] : local[1]] != answer:
            raise ValueError(
                f"pseudo-query {qid!r}: its sentence is not at [{start}, {end}) of chunk {cid!r}: the pseudo_queries "
                "table is stale; materialize it again"
            )
        cuts.setdefault(cid, []).append(local)
    texts = documents.column("chunk").to_pylist()
    for cid, spans in cuts.items():
        texts[rows[cid]] = remove_sentences(originals[rows[cid]], spans)
    index = documents.schema.get_field_index("chunk")
    return documents.set_column(index, documents.schema.field("chunk"), pa.array(texts, pa.string()))


def without_pseudo(queries: pa.Table) -> pa.Table:
    """The rows of ``queries`` that are not pseudo-queries (what an LLM judge or an evaluation may see)."""
    if "pairing" not in queries.column_names or queries.num_rows == 0:
        return queries
    return queries.filter(pc.not_equal(queries.column("pairing"), str(Pairing.PSEUDO)))


OUTCOME_TEXT = {
    Outcome.FIRST_CHUNK: "in a document's first chunk",
    Outcome.CROSSES_CHUNKS: "crosses a chunk boundary (or lies in an overlap of chunks)",
    Outcome.FRAGMENT: "a fragment: no `.`, `!` or `?` at its end (headings, list items)",
    Outcome.BOILERPLATE: "boilerplate: a stage direction, a salutation, no lower-case letter",
    Outcome.TOO_SHORT: "fewer than `min_words` words",
    Outcome.TOO_LONG: "more than `max_words` words",
    Outcome.NAMES_SUBJECT: "names the subject",
    Outcome.DUPLICATED: "its text occurs more than once in the document",
    Outcome.HOLDS_ANSWER: "overlaps an annotated answer span",
    Outcome.OVER_PER_DOCUMENT: "eligible, left out: the document had `per_document`",
    Outcome.OVER_PER_CHUNK: "eligible, left out: the chunk had `per_chunk`",
    Outcome.OVER_CHUNK_SHARE: "eligible, left out: the chunk would lose over half its text",
}
"""What each outcome but ``selected`` means, as the dataset card says it."""


def card_rows(counts: Mapping[str, int]) -> list[tuple[str, str, int]]:
    """The dataset card's rows ``(outcome, meaning, sentences)`` of :func:`pseudo_counts`: every outcome that has
    sentences, ``selected`` first."""
    rows = [("selected", "a pseudo-query", counts.get("pseudo_queries", 0))]
    rows += [(str(o), OUTCOME_TEXT[o], counts[str(o)]) for o in (*FILTERS, *CAPS) if counts.get(str(o))]
    return rows
