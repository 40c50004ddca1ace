"""Augmentation: LLM-written synthetic queries, N per chunk, that the chunk answers given its document.

Flow: :func:`build_synthetic_requests` -> (the LLM client) -> :func:`parse_synthetic_results` ->
:func:`filter_synthetic` -> :func:`synthetic_queries_table` (schema ``SYNTHETIC_QUERIES``).

Rules (documented in the dataset card):

* **Document window.** The LLM sees the document for context, cut to ``max_document_chars``
  characters around the chunk by :func:`curation.windows.document_window` (rule there; the
  contextual-description stage shows the same window). The prompt gives the title and the window
  before the passage, so chunks sharing a window share a cacheable prefix; such requests carry the same
  ``prefix_group`` (:func:`curation.contextual.window_group`) and are listed by document.
* **Filters**, in this order, each removal counted under its name:

  1. ``empty``: nothing left after :func:`normalize_query`.
  2. ``too_long``: more than ``max_chars`` characters or ``max_words`` words.
  3. ``copies_chunk``: the normalised query occurs in the normalised chunk as a whole-word
     substring, or shares an 8-word shingle (8 consecutive normalised words) with it.
  4. ``duplicate``: the same normalised text as a query already kept anywhere in the task.
  5. ``near_duplicate``: Jaccard similarity of word unigrams + bigrams (normalised text)
     ``>= near_duplicate_threshold`` with a query already kept for the same document (which
     includes the same chunk). Only queries of the same document are compared, and among them only
     those sharing a rare feature (an exact prefix filter).

* **Ids.** ``synth-<chunk_id>-<k>`` where ``k`` is the query's position in the LLM's answer for
  that chunk: stable across reruns with the cached answer, and not renumbered by the filters.
* **Answer offsets.** When the answer (surrounding whitespace stripped) occurs verbatim in the
  chunk, ``answer_start``/``answer_end`` are its first occurrence in *document* coordinates;
  otherwise they are null (the query is kept and counted as ``answer_not_in_chunk``).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import pyarrow as pa

from conteb.names import Pairing
from conteb.schemas import SYNTHETIC_QUERIES, table_from_rows
from conteb.text import is_blank
from curation.llm_results import chunk_results
from curation.lookups import by_document
from curation.windows import document_lookup, document_window, window_group
from llm.prompts import load_prompt
from llm.types import LLMRequest, LLMResult

PROMPT_NAME = "synthetic_queries"
CUSTOM_ID_PREFIX = "synth:"
SHINGLE_WORDS = 8
FILTERS = ("empty", "too_long", "copies_chunk", "duplicate", "near_duplicate")
_NON_WORD = re.compile(r"[\W_]+")


@dataclass(frozen=True)
class Candidate:
    """One LLM-written query for ``chunk_id``; ``index`` is its position in the LLM's answer."""

    chunk_id: str
    doc_id: str
    query: str
    answer: str
    index: int


# --- requests ---------------------------------------------------------------------------------


def synthetic_schema(n: int) -> dict[str, Any]:
    """Strict JSON schema of the answer: ``{"queries": [{"query", "answer"}]}`` with 1..n items."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    item = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "answer": {"type": "string"}},
        "required": ["query", "answer"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"queries": {"type": "array", "items": item, "minItems": 1, "maxItems": n}},
        "required": ["queries"],
        "additionalProperties": False,
    }


def synthetic_validator(n: int) -> Callable[[dict[str, Any]], str | None]:
    """Validator accepting 1..n well-formed items (lenient on the count; the prompt asks for n)."""

    def validate(value: dict[str, Any]) -> str | None:
        problem = _shape_problem(value)
        if problem is not None:
            return problem
        count = len(value["queries"])
        return None if 1 <= count <= n else f"got {count} queries; write {n} (at least 1, at most {n})"

    return validate


def _shape_problem(value: dict[str, Any]) -> str | None:
    """Why ``value`` is not ``{"queries": [{"query": str, "answer": str}, ...]}``, or ``None``."""
    items = value.get("queries")
    if not isinstance(items, list):
        return '"queries" must be a list of objects with string fields "query" and "answer"'
    for k, item in enumerate(items):
        if not isinstance(item, dict) or not all(isinstance(item.get(key), str) for key in ("query", "answer")):
            return f'item {k} of "queries" must be an object with string fields "query" and "answer"'
    return None


def build_synthetic_requests(
    chunks: pa.Table, documents: pa.Table, n: int, max_document_chars: int = 20000
) -> list[LLMRequest]:
    """One request per chunk (``synth:<chunk_id>``), grouped by document (documents in order of first
    appearance, chunks in table order within one); chunks of unknown documents are skipped. ``prefix_group``
    is :func:`curation.contextual.window_group`."""
    prompt = load_prompt(PROMPT_NAME)
    schema, validator = synthetic_schema(n), synthetic_validator(n)
    docs = document_lookup(documents)
    requests = []
    for chunk in by_document(chunks.to_pylist()):
        if chunk["doc_id"] not in docs:
            continue
        title, text = docs[chunk["doc_id"]]
        start, end = chunk["char_start"], chunk["char_end"]
        window = document_window(text, start, end, max_document_chars)
        messages = prompt.messages(title=title, document=window, chunk=chunk["og_chunk"], n=n)
        requests.append(
            LLMRequest(
                custom_id=f"{CUSTOM_ID_PREFIX}{chunk['chunk_id']}",
                messages=messages,
                schema_name="synthetic_queries",
                schema=schema,
                prompt_tag=prompt.tag,
                validator=validator,
                prefix_group=window_group(chunk["doc_id"], text, start, end, max_document_chars),
            )
        )
    return requests


# --- results ----------------------------------------------------------------------------------


def parse_synthetic_results(
    results: dict[str, LLMResult], chunks: pa.Table
) -> tuple[list[Candidate], list[tuple[str, str]]]:
    """Candidates of every chunk with a usable result, and ``(chunk_id, error)`` for the others.

    A chunk fails when its result is missing, is an error, or is not ``{"queries": [{query, answer}]}``.
    """
    candidates: list[Candidate] = []
    failures: list[tuple[str, str]] = []
    for chunk_id, doc_id, value in chunk_results(results, chunks, CUSTOM_ID_PREFIX, _shape_problem, failures):
        for k, item in enumerate(value["queries"]):
            candidates.append(Candidate(chunk_id, doc_id, item["query"], item["answer"], k))
    return candidates, failures


# --- filters ----------------------------------------------------------------------------------


def normalize_query(text: str) -> str:
    """Accents stripped, casefolded, every run of whitespace/punctuation -> one space, trimmed."""
    decomposed = unicodedata.normalize("NFKD", text)
    folded = "".join(char for char in decomposed if not unicodedata.combining(char)).casefold()
    return _NON_WORD.sub(" ", folded).strip()


def shingles(words: list[str], size: int = SHINGLE_WORDS) -> set[tuple[str, ...]]:
    """Every run of ``size`` consecutive words (empty when there are fewer words)."""
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


def similarity_features(normalized: str) -> frozenset[str]:
    """Word unigrams and bigrams (``"a b"``) of normalised text: the near-duplicate features."""
    words = normalized.split()
    return frozenset(words + [f"{a} {b}" for a, b in pairwise(words)])


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """``|a ∩ b| / |a ∪ b|`` (0.0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


@dataclass(frozen=True)
class _ChunkIndex:
    """A chunk's normalised text padded with spaces (whole-word search) and its 8-word shingles."""

    padded: str
    shingles: set[tuple[str, ...]]

    @classmethod
    def of(cls, text: str) -> _ChunkIndex:
        normalized = normalize_query(text)
        return cls(f" {normalized} ", shingles(normalized.split()))

    def copied_by(self, normalized_query: str) -> bool:
        """The copy rule: whole-word substring of the chunk, or a shared 8-word shingle."""
        if f" {normalized_query} " in self.padded:
            return True
        return not shingles(normalized_query.split()).isdisjoint(self.shingles)


@dataclass
class _SimilarityIndex:
    """Kept feature sets of one document, found again by Jaccard ``>= threshold`` without comparing all pairs.

    Prefix filter (AllPairs, Bayardo et al. 2007): ``J(a, b) >= t`` implies ``|a ∩ b| >= ceil(t |x|)``
    for ``x`` in ``{a, b}``, so under any fixed feature order the first ``|x| - ceil(t |x|) + 1``
    features of ``a`` and of ``b`` intersect. Only kept sets sharing a prefix feature are compared;
    ``rank`` orders features rarest first so that prefixes are short and selective. Exact, not approximate.
    """

    threshold: float
    rank: dict[str, int]
    sets: list[frozenset[str]] = field(default_factory=list)
    postings: dict[str, list[int]] = field(default_factory=dict)

    def _prefix(self, features: frozenset[str]) -> list[str]:
        ordered = sorted(features, key=lambda feature: (self.rank.get(feature, 0), feature))
        overlap = math.ceil(self.threshold * len(ordered) - 1e-9)  # least overlap J >= t allows; float-safe
        return ordered[: len(ordered) - overlap + 1]

    def has_similar(self, features: frozenset[str]) -> bool:
        """True when a kept set has Jaccard ``>= threshold`` with ``features``."""
        candidates = {index for feature in self._prefix(features) for index in self.postings.get(feature, ())}
        return any(jaccard(features, self.sets[index]) >= self.threshold for index in candidates)

    def add(self, features: frozenset[str]) -> None:
        for feature in self._prefix(features):
            self.postings.setdefault(feature, []).append(len(self.sets))
        self.sets.append(features)


@dataclass
class _FilterState:
    """What the filters remember across candidates: chunk indexes, kept texts, kept features by document."""

    chunks_text: dict[str, str]
    max_chars: int
    max_words: int
    threshold: float
    rank: dict[str, int]
    chunks: dict[str, _ChunkIndex] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    similar_by_doc: dict[str, _SimilarityIndex] = field(default_factory=dict)

    def chunk(self, chunk_id: str) -> _ChunkIndex:
        if chunk_id not in self.chunks:
            self.chunks[chunk_id] = _ChunkIndex.of(self.chunks_text.get(chunk_id, ""))
        return self.chunks[chunk_id]

    def similar(self, doc_id: str) -> _SimilarityIndex:
        if doc_id not in self.similar_by_doc:
            self.similar_by_doc[doc_id] = _SimilarityIndex(self.threshold, self.rank)
        return self.similar_by_doc[doc_id]

    def reason(self, candidate: Candidate, normalized: str, features: frozenset[str]) -> str | None:
        """The first filter (in ``FILTERS`` order) that removes ``candidate``, or ``None`` to keep it."""
        stripped = candidate.query.strip()
        if not normalized:
            return "empty"
        if len(stripped) > self.max_chars or len(stripped.split()) > self.max_words:
            return "too_long"
        if self.chunk(candidate.chunk_id).copied_by(normalized):
            return "copies_chunk"
        if normalized in self.seen:
            return "duplicate"
        if self.similar(candidate.doc_id).has_similar(features):
            return "near_duplicate"
        return None

    def keep(self, candidate: Candidate, normalized: str, features: frozenset[str]) -> None:
        self.seen.add(normalized)
        self.similar(candidate.doc_id).add(features)


def filter_synthetic(
    candidates: list[Candidate],
    chunks_text: dict[str, str],
    max_chars: int = 300,
    max_words: int = 40,
    near_duplicate_threshold: float = 0.85,
) -> tuple[list[Candidate], dict[str, int]]:
    """Kept candidates (input order) and ``{filter: removed}`` for every filter in ``FILTERS``.

    ``chunks_text`` maps chunk ids to chunk text; a chunk missing from it counts as empty (its
    queries cannot copy it). ``near_duplicate_threshold`` is in ``(0, 1]``.
    ``sum(counts.values()) + len(kept) == len(candidates)``.
    """
    if not 0 < near_duplicate_threshold <= 1:
        raise ValueError(f"near_duplicate_threshold must be in (0, 1], got {near_duplicate_threshold}")
    normalized = [normalize_query(candidate.query) for candidate in candidates]
    features = [similarity_features(text) for text in normalized]
    rank = Counter(feature for feature_set in features for feature in feature_set)
    state = _FilterState(chunks_text, max_chars, max_words, near_duplicate_threshold, rank)
    counts = dict.fromkeys(FILTERS, 0)
    kept: list[Candidate] = []
    for candidate, text, feature_set in zip(candidates, normalized, features, strict=True):
        reason = state.reason(candidate, text, feature_set)
        if reason is None:
            state.keep(candidate, text, feature_set)
            kept.append(candidate)
        else:
            counts[reason] += 1
    return kept, counts


# --- output table -----------------------------------------------------------------------------


def answer_offsets(answer: str, chunk_text: str, chunk_start: int, document: str | None) -> tuple[int, int] | None:
    """Document ``[start, end)`` of the answer's first verbatim occurrence in the chunk, else ``None``.

    ``None`` too for an empty answer, or when the document text at those offsets differs (a chunk
    whose ``og_chunk`` is not the document span).
    """
    if not answer:
        return None
    position = chunk_text.find(answer)
    if position < 0:
        return None
    start, end = chunk_start + position, chunk_start + position + len(answer)
    if document is not None and document[start:end] != answer:
        return None
    return start, end


def synthetic_queries_table(
    candidates_kept: list[Candidate],
    chunks: pa.Table,
    documents: pa.Table,
    model: str,
    prompt_version: str,
    source: str,
) -> pa.Table:
    """``SYNTHETIC_QUERIES`` rows for the kept candidates, in their order (rules in the module doc)."""
    chunk_rows = {row["chunk_id"]: row for row in chunks.select(["chunk_id", "char_start", "og_chunk"]).to_pylist()}
    texts = dict(zip(documents.column("doc_id").to_pylist(), documents.column("text").to_pylist(), strict=True))
    rows = []
    for candidate in candidates_kept:
        answer = None if is_blank(candidate.answer) else candidate.answer.strip()
        chunk = chunk_rows.get(candidate.chunk_id)
        offsets = None
        if answer is not None and chunk is not None:
            offsets = answer_offsets(answer, chunk["og_chunk"], chunk["char_start"], texts.get(candidate.doc_id))
        rows.append(
            {
                "query_id": f"synth-{candidate.chunk_id}-{candidate.index}",
                "query": candidate.query.strip(),
                "chunk_id": candidate.chunk_id,
                "chunk_ids": [candidate.chunk_id],
                "answer": answer,
                "answer_start": offsets[0] if offsets else None,
                "answer_end": offsets[1] if offsets else None,
                "doc_id": candidate.doc_id,
                "pairing": Pairing.LLM,
                "source": source,
                "model": model,
                "prompt_version": prompt_version,
            }
        )
    return table_from_rows(rows, SYNTHETIC_QUERIES)


def synthetic_stats(table: pa.Table) -> dict[str, int]:
    """``queries``, ``chunks`` (with at least one query) and ``answer_not_in_chunk`` of a synthetic table."""
    return {
        "queries": table.num_rows,
        "chunks": len(set(table.column("chunk_id").to_pylist())),
        "answer_not_in_chunk": table.column("answer_start").null_count,
    }
