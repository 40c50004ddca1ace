"""Single-vector systems: ``dense`` (independent chunks or late chunking) and ``contextual`` (Anthropic's
contextual retrieval).

* ``dense``: :meth:`embedding.encoder.LateChunkingEncoder.encode_documents` over the corpus's documents (each
  document's chunks in ``chunk_index`` order), ``mode`` = the system's ``context``; one L2-normalised float32
  ``[D]`` vector per chunk. Independent vectors equal ``model.encode(document_prefix + chunk)``. Late chunking
  passes each document's title (its first chunk's ``title``; used by ``window_policy: anchored``) and reports the
  encode cost (``windows``, ``tokens_forwarded``, ``anchor_tokens``: head tokens, included in the former).
* ``dense`` with ``context: title`` (the title-prefix baseline, the cheapest contextual chunk header): each chunk
  embedded alone (independent mode) as ``title_template.format(title=..., chunk=...)``; a chunk without a title
  (null or blank) is embedded alone, counted in ``details["chunks_without_title"]`` (the text:
  :func:`evaluation.systems.headers.title_texts`).
* ``dense`` with ``context: late`` and ``header: title`` (header with windows): late chunking over the same header
  texts, so inside the sequence each chunk reads ``title_template`` filled (``[CLS] t c_1 [SEP] t c_2 [SEP] ...``)
  and its vector pools the header's tokens with its own. Anchored windows then take no separate title for their
  head: the head is the first chunk's header text (the title, then the first chunk), not the title twice.
* ``contextual``: each chunk embedded alone (independent mode) as ``template.format(context=..., chunk=...,
  title=...)`` with its LLM-written context from ``corpus.contexts``; a chunk without a context is embedded alone
  (counted in ``details["chunks_without_context"]``).

Score of query ``q`` for chunk ``c``: ``query_vectors[q] @ chunk_vectors[c]`` (cosine: both are normalised).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from conteb.text import is_blank
from embedding.windows import Context
from evaluation.config import ContextualSystem, DenseSystem, expansion_problem, template_fields
from evaluation.corpus import EvalCorpus
from evaluation.encoded import COUNTERS, ChunkEncoding, given_or_encoded
from evaluation.indexed import IndexedSystem, Log, NotRunnable, no_log
from evaluation.systems.embedders import EncoderSetup, encode_queries_cached, measured, setup_encoder
from evaluation.systems.headers import title_texts
from evaluation.systems.ranking import dense_scorer

CONTEXT_LABELS = {"independent": "independent chunks", "late": "late chunking", "title": "title + chunk"}
TEMPLATE_FIELDS = {"context", "chunk", "title"}


def document_rows(corpus: EvalCorpus) -> list[np.ndarray]:
    """Per document (corpus order), the int64 rows of its chunks sorted by ``chunk_index``."""
    doc_index = corpus.chunk_doc_index()
    order = np.lexsort((np.asarray(corpus.chunk_index), doc_index))  # by document, then chunk_index
    bounds = np.flatnonzero(np.diff(doc_index[order])) + 1
    return np.split(order.astype(np.int64), bounds) if order.size else []


def document_titles(corpus: EvalCorpus, groups: list[np.ndarray]) -> list[str | None]:
    """Per document (the order of ``groups``), the title of its first chunk (by ``chunk_index``), or None."""
    return [corpus.titles[int(rows[0])] if len(rows) else None for rows in groups]


def encode_chunks(
    setup: EncoderSetup,
    texts: list[str],
    groups: list[np.ndarray],
    mode: Context,
    show_progress: bool,
    titles: list[str | None] | None = None,
    progress_label: str = "",
) -> np.ndarray:
    """float32 ``[C, D]`` chunk vectors: ``texts`` grouped into documents by ``groups`` (rows), encoded in ``mode``.

    ``titles``: one per document (anchored late chunking uses them). ``progress_label``: the system the progress bar
    names (:func:`embedding.encoder.progress_desc`).
    """
    documents = [[texts[r] for r in rows] for rows in groups]
    encoded = setup.encoder.encode_documents(
        documents,
        mode=mode,
        show_progress=show_progress,
        titles=titles,
        progress_label=progress_label,
    )
    vectors = np.zeros((len(texts), setup.encoder.dimension), dtype=np.float32)
    for rows, array in zip(groups, encoded, strict=True):
        vectors[rows] = array
    return vectors


def template_problem(template: str) -> str | None:
    """Why ``template`` cannot be filled (unknown field, bad syntax, an unbounded expansion), or None."""
    try:
        fields = template_fields(template)
    except ValueError as error:
        return f"template {template!r} is not a format string: {error}"
    unknown = sorted(fields - TEMPLATE_FIELDS)
    if unknown or "" in fields:
        return f"template {template!r} uses unknown field(s) {unknown or ['{}']}; known: {sorted(TEMPLATE_FIELDS)}"
    if "chunk" not in fields:
        return f"template {template!r} does not contain {{chunk}}"
    return expansion_problem(template, frozenset(TEMPLATE_FIELDS))


def contextual_problem(system: ContextualSystem, corpus: EvalCorpus) -> str | None:
    """Missing chunk contexts or an unusable template."""
    if not corpus.contexts:
        return corpus.contexts_missing or "no LLM chunk contexts were given with this corpus"
    return template_problem(system.template)


def contextual_texts(system: ContextualSystem, corpus: EvalCorpus) -> tuple[list[str], int]:
    """The text embedded per chunk, and how many chunks had no context (embedded alone)."""
    contexts = corpus.contexts or {}
    texts, missing = [], 0
    for cid, chunk, title in zip(corpus.chunk_ids, corpus.chunks, corpus.titles, strict=True):
        context = contexts.get(cid)
        if is_blank(context):
            missing += 1
            texts.append(chunk)
        else:
            texts.append(system.template.format(context=context, chunk=chunk, title=title or ""))
    return texts, missing


@dataclass
class ChunkSide:
    """What a single-vector system embeds per chunk of a corpus: ``texts`` (corpus order) in ``mode``, whether
    anchored windows get the documents' titles for their head (``head_titles``), the details the texts add to the
    report (template, chunks without a context or title) and the description's head (``what``)."""

    texts: list[str]
    mode: Context
    what: str
    details: dict = field(default_factory=dict)
    head_titles: bool = True


def chunk_side(system: DenseSystem | ContextualSystem, corpus: EvalCorpus, setup: EncoderSetup) -> ChunkSide:
    """The :class:`ChunkSide` of ``system`` over ``corpus`` (module docstring)."""
    label = setup.spec.label
    if isinstance(system, ContextualSystem):
        texts, missing = contextual_texts(system, corpus)
        what = f"contextual retrieval · LLM context + chunk, embedded independently · {label}"
        details: dict = {"template": system.template, "chunks_without_context": missing, "context": "independent"}
        return ChunkSide(texts, "independent", what, details)
    details = {"context": system.context}
    if system.context == "title":
        texts, missing = title_texts(system.title_template, corpus)
        details.update(title_template=system.title_template, chunks_without_title=missing)
        return ChunkSide(
            texts, "independent", f"dense · {CONTEXT_LABELS['title']}, embedded independently · {label}", details
        )
    policy = " (anchored windows)" if system.context == "late" and setup.encoder.window_policy == "anchored" else ""
    if system.header == "title":  # context: late (validated)
        texts, missing = title_texts(system.title_template, corpus)
        details.update(header=system.header, title_template=system.title_template, chunks_without_title=missing)
        what = f"dense · {CONTEXT_LABELS['late']}{policy}, each chunk under its title · {label}"
        return ChunkSide(texts, "late", what, details, head_titles=False)
    return ChunkSide(
        list(corpus.chunks), system.context, f"dense · {CONTEXT_LABELS[system.context]}{policy} · {label}", details
    )


def encode_single_vector(
    system: DenseSystem | ContextualSystem, corpus: EvalCorpus, setup: EncoderSetup, *, show_progress: bool = False
) -> ChunkEncoding:
    """The chunk vectors of ``system`` over ``corpus`` (float32 ``[C, D]``, corpus order) with the encoder's counters
    (``evaluation.encoded.COUNTERS``) and the seconds spent: what one shard of the evaluation computes."""
    return _encode_texts(setup, corpus, chunk_side(system, corpus, setup), show_progress, system.name)


def _encode_texts(
    setup: EncoderSetup, corpus: EvalCorpus, side: ChunkSide, show_progress: bool, label: str
) -> ChunkEncoding:
    """:func:`encode_single_vector` once the :class:`ChunkSide` is known; ``label`` (the system's name) heads the
    progress bar."""
    groups = document_rows(corpus)
    titles = document_titles(corpus, groups) if side.mode == "late" and side.head_titles else None
    vectors, seconds, counts = measured(
        setup.encoder, lambda: encode_chunks(setup, side.texts, groups, side.mode, show_progress, titles, label)
    )
    return ChunkEncoding(list(corpus.chunk_ids), vectors=vectors, seconds=seconds, counts=counts, documents=len(groups))


def prepare_single_vector(
    system: DenseSystem | ContextualSystem,
    corpus: EvalCorpus,
    models_dir: Path,
    *,
    encoded: ChunkEncoding | None = None,
    show_progress: bool = False,
    log: Log = no_log,
) -> IndexedSystem:
    """Encode chunks (or take ``encoded``: the shards' vectors, in any chunk order) and queries; the scorer is
    ``query_vectors[rows] @ chunk_vectors.T`` (float32 ``[B, C]``).

    Raises :class:`evaluation.encoded.EncodingMismatch` when ``encoded`` does not cover exactly the corpus's chunks.
    """
    if isinstance(system, ContextualSystem):
        problem = contextual_problem(system, corpus)
        if problem:
            raise NotRunnable(problem)
    setup = setup_encoder(system, models_dir)
    side = chunk_side(system, corpus, setup)
    details = {**setup.details, **side.details}
    encoded, where = given_or_encoded(
        encoded,
        lambda: _encode_texts(setup, corpus, side, show_progress, system.name),
        corpus.chunk_ids,
        side.mode,
        str(setup.device),
    )
    assert encoded.vectors is not None, f"{system.name}: a single-vector system has vectors"
    details.update({name: encoded.counts.get(name, 0) for name in COUNTERS})
    details["encode_shards"] = encoded.shards
    log(
        f"{system.name}: encoded {corpus.n_chunks:,} chunks of {encoded.documents:,} documents in "
        f"{encoded.seconds:.1f} s {where}"
    )
    started = time.perf_counter()
    query_vectors, reused = encode_queries_cached(
        setup, list(corpus.queries), show_progress=show_progress, progress_label=system.name
    )
    query_seconds = time.perf_counter() - started
    details["query_vectors_reused"] = reused
    if reused:
        log(f"{system.name}: reused the {corpus.n_queries:,} query vectors of {setup.spec.label} (same model, prefix)")
    else:
        log(f"{system.name}: encoded {corpus.n_queries:,} queries in {query_seconds:.1f} s")
    # A DenseScorer: rank_corpus uses its fast paths (columns grouped by document, one reused buffer).
    score_block = dense_scorer(query_vectors, encoded.vectors)
    note = setup.details.get("window_layout_note")
    description = f"{side.what} ({setup.prefixes.describe()})" + (f" · {note}" if note else "")
    if note:
        log(f"{system.name}: {note}")
    return IndexedSystem(score_block, encoded.seconds, query_seconds, description, details)
