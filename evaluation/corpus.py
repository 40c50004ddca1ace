"""An evaluation corpus: the chunks and queries of one ConTEB task, in arrays the scorers use.

Chunk order: documents in order of first appearance in ``documents``, each document's chunks by
``chunk_index``. ``gold[q]`` is the row of query ``q``'s gold chunk (qrels: that chunk, relevance 1,
as the public ConTEB evaluator). ``needs_context[q]`` is the query's context-necessity label
(``curation/necessity.py``), ``None`` when the queries carry no labels (external ConTEB datasets).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from conteb.content import DocumentPrints, document_prints


@dataclass
class EvalCorpus:
    """One task, ready to index and score. Lists of length C (chunks) or Q (queries)."""

    name: str
    source: str  # folder path or hub dataset id
    split: str
    chunk_ids: list[str]
    chunks: list[str]  # the text to embed (``chunk`` column: reformulated where the task reformulates)
    doc_ids: list[str]  # per chunk
    chunk_index: np.ndarray  # int32 [C]: position of the chunk in its document
    titles: list[str | None]  # per chunk
    query_ids: list[str]
    queries: list[str]
    gold: np.ndarray  # int64 [Q]: row of the gold chunk
    contexts: dict[str, str] | None = None  # chunk_id -> LLM-written context (contextual baseline), when available
    contexts_missing: str | None = None  # without contexts: why (what is missing and how to get it), when known
    needs_context: np.ndarray | None = None  # bool [Q]: the query needs its document's context; None: unlabelled
    notes: list[str] = field(default_factory=list)  # what loading skipped or repaired, and why
    og_chunks: list[str] | None = None  # per chunk, its original text (``og_chunk``); None: ``chunks`` are
    char_starts: list[int | None] | None = None  # per chunk, its offset in its document; None: not published

    @property
    def n_chunks(self) -> int:
        return len(self.chunk_ids)

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    @property
    def n_needs_context(self) -> int | None:
        """How many queries need context; ``None`` when the queries are unlabelled."""
        return None if self.needs_context is None else int(np.count_nonzero(self.needs_context))

    @property
    def query_documents(self) -> list[str]:
        """Per query, the document of its gold chunk: the unit every confidence interval and paired test resamples
        (:mod:`evaluation.metrics.stats`)."""
        return [self.doc_ids[g] for g in self.gold]

    @property
    def document_order(self) -> list[str]:
        """Distinct document ids in corpus order."""
        return list(dict.fromkeys(self.doc_ids))

    @property
    def n_documents(self) -> int:
        return len(self.document_order)

    def fingerprint(self) -> str:
        """sha256 over chunk ids and texts, query ids and texts, gold rows and (when labelled) the
        ``needs_context`` labels: the same corpus, the same value."""
        digest = hashlib.sha256()
        for values in (self.chunk_ids, self.chunks, self.query_ids, self.queries):
            for value in values:
                digest.update(value.encode("utf-8"))
                digest.update(b"\x00")
            digest.update(b"\x01")
        digest.update(np.ascontiguousarray(self.gold, dtype=np.int64).tobytes())
        if self.needs_context is not None:  # unlabelled corpora keep their earlier fingerprint
            digest.update(b"needs_context\x00" + np.ascontiguousarray(self.needs_context, dtype=np.bool_).tobytes())
        return digest.hexdigest()

    def chunks_of(self, doc_ids: Collection[str]) -> EvalCorpus:
        """The chunks of ``doc_ids`` (corpus order) with their titles and LLM contexts, and no queries: what an
        encode shard of the evaluation needs (``evaluation/sharding.py``). Ids absent from the corpus add nothing."""
        wanted = set(doc_ids)
        rows = [row for row, doc in enumerate(self.doc_ids) if doc in wanted]
        chunk_ids = [self.chunk_ids[r] for r in rows]
        contexts = None
        if self.contexts is not None:
            contexts = {cid: self.contexts[cid] for cid in chunk_ids if cid in self.contexts}
        return EvalCorpus(
            name=self.name,
            source=self.source,
            split=self.split,
            chunk_ids=chunk_ids,
            chunks=[self.chunks[r] for r in rows],
            doc_ids=[self.doc_ids[r] for r in rows],
            chunk_index=self.chunk_index[np.asarray(rows, dtype=np.int64)],
            titles=[self.titles[r] for r in rows],
            query_ids=[],
            queries=[],
            gold=np.zeros(0, dtype=np.int64),
            contexts=contexts,
            contexts_missing=self.contexts_missing,
            og_chunks=[self.og_chunks[r] for r in rows] if self.og_chunks is not None else None,
            char_starts=[self.char_starts[r] for r in rows] if self.char_starts is not None else None,
        )

    @cached_property
    def content_prints(self) -> dict[str, DocumentPrints]:
        """doc_id -> the fingerprints of the document's text, chunks and passages
        (:func:`conteb.content.document_prints` on its chunks in order: originals, embedded texts, offsets), what
        train/test overlap is checked on (:mod:`evaluation.leakage`). Computed once per corpus."""
        rows: dict[str, list[int]] = {}
        for row, doc in enumerate(self.doc_ids):
            rows.setdefault(doc, []).append(row)
        originals = self.og_chunks if self.og_chunks is not None else self.chunks
        return {
            doc: document_prints(
                [self.chunk_ids[r] for r in doc_rows],
                [originals[r] for r in doc_rows],
                [self.chunks[r] for r in doc_rows],
                [self.char_starts[r] for r in doc_rows] if self.char_starts is not None else None,
            )
            for doc, doc_rows in rows.items()
        }

    def chunk_doc_index(self) -> np.ndarray:
        """int64 [C]: index of each chunk's document in :attr:`document_order`."""
        position = {doc: i for i, doc in enumerate(self.document_order)}
        return np.fromiter((position[d] for d in self.doc_ids), dtype=np.int64, count=self.n_chunks)

    def documents(self) -> list[list[str]]:
        """Per document (corpus order), its chunk texts in order: the input of late chunking."""
        grouped: dict[str, list[str]] = {}
        for doc, text in zip(self.doc_ids, self.chunks, strict=True):
            grouped.setdefault(doc, []).append(text)
        return list(grouped.values())
