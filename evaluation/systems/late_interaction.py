"""Late interaction (ColBERT MaxSim) over per-token chunk vectors.

Chunk tokens come from :meth:`embedding.encoder.LateChunkingEncoder.encode_document_tokens` (``context: late``: one
pass over the document, each chunk keeps its own token states, each document's title passed for
``window_policy: anchored``, whose head tokens are never kept; ``independent``: each chunk alone), query tokens from
:meth:`~embedding.encoder.LateChunkingEncoder.encode_query_tokens`; every token vector is L2-normalised.

Score (MaxSim, Khattab & Zaharia 2020): ``s(q, c) = Σ_i max_j <q_i, d_j>`` over the query's tokens ``i`` (``[CLS]``
and ``[SEP]`` included, no ``[MASK]`` query augmentation) and the chunk's tokens ``j``. A chunk without tokens gets
``-n_query_tokens``, the lowest value MaxSim can take.

Memory: the chunk tokens are one float16 ``[N_tokens, D]`` matrix plus offsets; a block of queries is scored tile by
tile (chunk tiles of about :data:`TILE_TOKENS` tokens, converted to float32 per tile; query sub-blocks sized so
that a similarity tile holds at most :data:`TILE_ELEMENTS` floats), reducing each tile with ``np.maximum.reduceat``
per chunk and ``np.add.reduceat`` per query.

all-MiniLM-L6-v2 (``offline-minilm``) is not a multi-vector model: MaxSim over its token states works mechanically
but is not a ColBERT; use a model trained for late interaction (e.g. ``lightonai/GTE-ModernColBERT-v1`` through
sentence-transformers, or an InSeNT model trained with ``mode: tokens``) for meaningful numbers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluation.config import LateInteractionSystem
from evaluation.corpus import EvalCorpus
from evaluation.encoded import ChunkEncoding, given_or_encoded
from evaluation.indexed import IndexedSystem, Log, no_log
from evaluation.systems.dense import CONTEXT_LABELS, document_rows, document_titles
from evaluation.systems.embedders import EncoderSetup, measured, setup_encoder

TILE_TOKENS = 1 << 16
TILE_ELEMENTS = 1 << 24


@dataclass
class TokenIndex:
    """Chunk token vectors: ``tokens`` float16 ``[N, D]``; chunk ``c`` owns rows ``offsets[c]:offsets[c + 1]``."""

    tokens: np.ndarray
    offsets: np.ndarray  # int64 [C + 1]

    @classmethod
    def from_chunks(cls, chunks: list[np.ndarray], dim: int) -> TokenIndex:
        """Concatenate per-chunk ``[n_c, D]`` arrays (corpus order)."""
        counts = np.fromiter((len(c) for c in chunks), dtype=np.int64, count=len(chunks))
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        tokens = np.concatenate(chunks).astype(np.float16) if chunks else np.zeros((0, dim), np.float16)
        return cls(tokens.reshape(-1, dim), offsets)

    @property
    def n_chunks(self) -> int:
        return len(self.offsets) - 1

    def tiles(self) -> list[tuple[int, int]]:
        """Chunk ranges ``[a, b)`` of about ``TILE_TOKENS`` tokens each (a longer chunk is a tile of its own)."""
        tiles, a = [], 0
        while a < self.n_chunks:
            limit = self.offsets[a] + TILE_TOKENS
            b = max(int(np.searchsorted(self.offsets, limit, side="right")) - 1, a + 1)
            tiles.append((a, min(b, self.n_chunks)))
            a = tiles[-1][1]
        return tiles


def maxsim_scores(queries: list[np.ndarray], index: TokenIndex) -> np.ndarray:
    """float32 ``[B, C]``: ``Σ_i max_j <q_i, d_j>`` for each query (``[n_i, D]``) and chunk of ``index``."""
    n_queries = len(queries)
    out = np.zeros((n_queries, index.n_chunks), dtype=np.float32)
    lengths = np.fromiter((len(q) for q in queries), dtype=np.int64, count=n_queries)
    empty_chunks = np.flatnonzero(np.diff(index.offsets) == 0)
    out[:, empty_chunks] = -lengths[:, None].astype(np.float32)
    for a, b in index.tiles():
        chunk_ids = np.arange(a, b)
        chunk_ids = chunk_ids[index.offsets[chunk_ids + 1] > index.offsets[chunk_ids]]
        if chunk_ids.size == 0:
            continue
        start, end = int(index.offsets[a]), int(index.offsets[b])
        tile = index.tokens[start:end].astype(np.float32)
        starts = index.offsets[chunk_ids] - start
        rows_per_sub = max(1, TILE_ELEMENTS // max(1, end - start))
        q = 0
        while q < n_queries:
            stop, rows = q, 0
            while stop < n_queries and (stop == q or rows + lengths[stop] <= rows_per_sub):
                rows += int(lengths[stop])
                stop += 1
            members = [i for i in range(q, stop) if lengths[i] > 0]
            if members:
                stacked = np.concatenate([queries[i] for i in members]).astype(np.float32, copy=False)
                best = np.maximum.reduceat(stacked @ tile.T, starts, axis=1)  # [rows, chunks]
                firsts = np.concatenate([[0], np.cumsum(lengths[members])[:-1]])
                out[np.asarray(members)[:, None], chunk_ids[None, :]] = np.add.reduceat(best, firsts, axis=0)
            q = stop
    return out


def encode_late_interaction(
    system: LateInteractionSystem, corpus: EvalCorpus, setup: EncoderSetup, *, show_progress: bool = False
) -> ChunkEncoding:
    """The chunk token vectors of ``system`` over ``corpus`` (one float16 ``[n_c, D]`` array per chunk, corpus
    order) with the encoder's counters and the seconds spent: what one shard of the evaluation computes."""
    groups = document_rows(corpus)
    encoder = setup.encoder
    documents = [[corpus.chunks[r] for r in rows] for rows in groups]
    titles = document_titles(corpus, groups) if system.context == "late" else None

    def encode() -> list[np.ndarray]:
        encoded = encoder.encode_document_tokens(
            documents, mode=system.context, show_progress=show_progress, titles=titles, progress_label=system.name
        )
        per_chunk: list[np.ndarray] = [np.zeros((0, encoder.dimension), np.float16)] * corpus.n_chunks
        for rows, chunks in zip(groups, encoded, strict=True):
            for row, tokens in zip(rows, chunks, strict=True):
                per_chunk[row] = tokens
        return per_chunk

    per_chunk, seconds, counts = measured(encoder, encode)
    return ChunkEncoding(
        list(corpus.chunk_ids), tokens=per_chunk, seconds=seconds, counts=counts, documents=len(groups)
    )


def prepare_late_interaction(
    system: LateInteractionSystem,
    corpus: EvalCorpus,
    models_dir: Path,
    *,
    encoded: ChunkEncoding | None = None,
    show_progress: bool = False,
    log: Log = no_log,
) -> IndexedSystem:
    """Encode chunk tokens (or take ``encoded``: the shards' tokens, in any chunk order) and query tokens; the scorer
    is MaxSim over all chunks (float32 ``[B, C]``).

    Raises :class:`evaluation.encoded.EncodingMismatch` when ``encoded`` does not cover exactly the corpus's chunks.
    """
    setup = setup_encoder(system, models_dir)
    details = dict(setup.details, context=system.context, multi_vector_note=_note(setup.spec.label))
    encoded, where = given_or_encoded(
        encoded,
        lambda: encode_late_interaction(system, corpus, setup, show_progress=show_progress),
        corpus.chunk_ids,
        system.context,
        str(setup.device),
    )
    assert encoded.tokens is not None, f"{system.name}: a late-interaction system has token vectors"
    index = TokenIndex.from_chunks(encoded.tokens, setup.encoder.dimension)
    details.update(
        truncated_chunks=encoded.counts.get("truncated_chunks", 0),
        chunk_tokens=int(index.tokens.shape[0]),
        encode_shards=encoded.shards,
    )
    log(
        f"{system.name}: encoded {index.tokens.shape[0]:,} tokens of {corpus.n_chunks:,} chunks of "
        f"{encoded.documents:,} documents in {encoded.seconds:.1f} s {where}"
    )
    index_seconds = encoded.seconds
    del encoded
    started = time.perf_counter()
    query_tokens = setup.encoder.encode_query_tokens(
        list(corpus.queries), show_progress=show_progress, progress_label=system.name
    )
    query_seconds = time.perf_counter() - started
    log(f"{system.name}: encoded {corpus.n_queries:,} queries in {query_seconds:.1f} s")

    def score_block(rows: np.ndarray) -> np.ndarray:
        return maxsim_scores([query_tokens[int(r)] for r in np.asarray(rows)], index)

    caveat = "; not a multi-vector model" if details["multi_vector_note"] else ""
    note = details.get("window_layout_note")  # a trained model read otherwise than it was trained
    if note:
        log(f"{system.name}: {note}")
    description = (
        f"late interaction (MaxSim) · {CONTEXT_LABELS[system.context]} · {setup.spec.label} "
        f"({setup.prefixes.describe()}{caveat})" + (f" · {note}" if note else "")
    )
    return IndexedSystem(score_block, index_seconds, query_seconds, description, details)


def _note(label: str) -> str | None:
    if "minilm" in label.lower():
        return "all-MiniLM-L6-v2 is not a multi-vector model: MaxSim works mechanically, it is not a ColBERT"
    return None
