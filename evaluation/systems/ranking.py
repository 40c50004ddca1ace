"""Rank every chunk of a corpus for every query, block by block, in trec_eval order.

Order (trec_eval ``form_res_rels.c``, ``comp_sim_docno``; see ``evaluation/metrics/retrieval.py``): float32 score
descending, equal scores by id descending in ``strcmp`` order (:func:`tie_order`). Scores that are not
float32 are rounded to float32 first, as trec_eval stores them (``TEXT_RESULTS.sim`` is a C ``float``).

:func:`rank_corpus` scores ``block`` queries at a time (one ``[block, C]`` float32 matrix, memory
``O(block x C)``, never ``Q x C``) and keeps, per query:

* ``gold_rank``: ``1 + #{c : s_c > s_gold or (s_c == s_gold and key_c > key_gold)}`` over all C chunks;
* ``top_index`` / ``top_score``: the first ``min(top_k, C)`` chunks in trec order, exact at ties;
* ``doc_rank``: the same rank for documents scored by their best chunk (``max`` over their chunks),
  ties by document id, gold = the gold chunk's document (the public ConTEB "document-level" view);
* ``subset_rank``: the gold chunk's rank among the chunks of each document subset (corpus-size
  scaling), 0 where the gold's document is outside the subset.

Per block (``B`` queries), all vectorised over the block:

* gold rank: one ``scores > gold`` pass and one ``scores == gold`` pass, each counted per row; rows
  with ties at the gold score (rare for dense scores) compare tie keys;
* top-k without a full selection per row: the row is cut into ``m >= k`` strided groups; the k-th
  largest group maximum ``t`` is a lower bound of the k-th largest score (the k largest maxima are k
  distinct scores), so every chunk of the top k, ties included, scores ``>= t``; those few candidates
  are sorted exactly (``np.lexsort``). Rows where many group maxima tie at ``t`` (e.g. BM25's zeros)
  take an exact path: the k-th score by ``np.partition``, then the ties at it by tie key;
* document scores: when the scorer can permute its columns (``permuted``, :class:`DenseScorer`), the
  chunks are laid out position-major (see :class:`_Documents`) and a document's max is a running
  ``np.maximum`` over contiguous slices; otherwise ``np.maximum.reduceat`` over each document's run;
* subsets: the "beats the gold" mask summed per document (position-major slices, as the max) and
  multiplied by the ``[D, 1 + S]`` document-in-subset matrix; otherwise the float32 mask times the
  ``[C, 1 + S]`` chunk-in-subset matrix (one BLAS product each way).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from evaluation.indexed import ScoresNaN

ScoreBlock = Callable[[np.ndarray], np.ndarray]

_MIN_GROUPS = 2048  # strided groups per row for the top-k lower bound (at least 4 x top_k)
_SLOW_ROWS = 128  # rows per sub-block on the exact (tie-heavy) top-k path


@dataclass
class Ranking:
    """Per-query ranks of one system on one corpus (shapes: Q queries, k = min(top_k, C), S subsets)."""

    gold_rank: np.ndarray  # int64 [Q]: 1-based rank of the gold chunk among all C chunks (trec tie order)
    top_index: np.ndarray  # int64 [Q, k]: chunk rows, best first, trec order
    top_score: np.ndarray  # float32 [Q, k]
    doc_rank: np.ndarray  # int64 [Q]: 1-based rank of the gold chunk's document (score = max over its chunks)
    subset_rank: np.ndarray | None  # int64 [Q, S]: gold rank within subset s's chunks; 0: gold document not in s


def tie_order(ids: Sequence[str]) -> np.ndarray:
    """int64 [N] key per id: its position in ascending ``strcmp`` order of the ids (code-point order,
    the same as UTF-8 byte order). Among equal scores a larger key ranks first (trec_eval). Ids must be
    distinct."""
    ids = list(ids)
    order = sorted(range(len(ids)), key=ids.__getitem__)
    key = np.empty(len(ids), dtype=np.int64)
    key[order] = np.arange(len(ids), dtype=np.int64)
    if any(ids[a] == ids[b] for a, b in itertools.pairwise(order)):
        raise ValueError("ids must be distinct (trec_eval ranks by id among equal scores)")
    return key


class DenseScorer:
    """``rows -> query_vectors[rows] @ chunk_vectors.T`` as float32 ``[len(rows), C]``.

    :meth:`into` writes into a caller's buffer: :func:`rank_corpus` reuses one buffer across blocks,
    which avoids faulting in a fresh ``[block, C]`` matrix per block.
    """

    def __init__(self, query_vectors: np.ndarray, chunk_vectors: np.ndarray):
        self.query_vectors = np.ascontiguousarray(query_vectors, dtype=np.float32)
        self.chunk_vectors = np.ascontiguousarray(chunk_vectors, dtype=np.float32)
        if self.query_vectors.ndim != 2 or self.chunk_vectors.ndim != 2:
            raise ValueError("query_vectors and chunk_vectors must be 2-D [n, dim]")
        if self.query_vectors.shape[1] != self.chunk_vectors.shape[1]:
            raise ValueError(
                f"dimension mismatch: queries {self.query_vectors.shape[1]}, chunks {self.chunk_vectors.shape[1]}"
            )

    @property
    def n_chunks(self) -> int:
        return self.chunk_vectors.shape[0]

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        return self.into(rows, np.empty((len(rows), self.n_chunks), dtype=np.float32))

    def permuted(self, columns: np.ndarray) -> DenseScorer:
        """The same scorer with its chunk columns in ``columns`` order (copies the chunk vectors once)."""
        return DenseScorer(self.query_vectors, self.chunk_vectors[columns])

    def into(self, rows: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Write the scores of ``rows`` into ``out`` (float32 ``[len(rows), C]``, C-contiguous) and return it."""
        queries = self.query_vectors[rows[0] : rows[-1] + 1] if _is_range(rows) else self.query_vectors[rows]
        np.matmul(queries, self.chunk_vectors.T, out=out)
        return out


def dense_scorer(query_vectors: np.ndarray, chunk_vectors: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Dot-product scorer: ``rows -> query_vectors[rows] @ chunk_vectors.T`` (float32; cosine when normalised)."""
    return DenseScorer(query_vectors, chunk_vectors)


def _is_range(rows: np.ndarray) -> bool:
    return len(rows) > 0 and rows[-1] - rows[0] == len(rows) - 1 and bool(np.all(np.diff(rows) == 1))


class _Documents:
    """Each document's best chunk score from a score block whose column ``j`` is a chunk of ``col_doc[j]``.

    Two layouts. *Position-major* (``widths`` given, columns we chose): the first chunk of every
    document (documents by chunk count, descending), then the second chunk of every document that has
    one, ...; ``widths[p]`` documents have a chunk ``p``, so a document's max is a running
    ``np.maximum`` over contiguous slices. Otherwise (the scorer's own column order): runs of one
    document's chunks reduced by ``np.maximum.reduceat``, after a stable grouping permutation when a
    document's chunks are not contiguous. Scores of documents come out in "slot" order.
    """

    def __init__(self, col_doc: np.ndarray, doc_key: np.ndarray, widths: np.ndarray | None = None):
        self.widths = widths
        self.permutation = None
        if widths is not None:
            slot_doc = col_doc[: widths[0]]
        else:
            starts = np.flatnonzero(np.r_[True, col_doc[1:] != col_doc[:-1]])
            if len(np.unique(col_doc[starts])) != len(starts):  # some document's chunks are not contiguous
                self.permutation = np.argsort(col_doc, kind="stable")
                grouped = col_doc[self.permutation]
                starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
                col_doc = grouped
            self.starts = starts
            slot_doc = col_doc[starts]
        self.slot_doc = slot_doc
        self.slot_of_doc = np.full(len(doc_key), -1, dtype=np.int64)
        self.slot_of_doc[slot_doc] = np.arange(len(slot_doc))
        self.slot_key = doc_key[slot_doc]

    def max_scores(self, scores: np.ndarray) -> np.ndarray:
        """float32 [B, documents with chunks]: best chunk score of each document, in slot order."""
        if self.widths is None:
            if self.permutation is not None:
                scores = np.take(scores, self.permutation, axis=1)
            return np.maximum.reduceat(scores, self.starts, axis=1)
        return self._reduce_slices(scores, np.maximum, scores.dtype)

    def count(self, mask: np.ndarray) -> np.ndarray:
        """float32 [B, documents with chunks]: true values of ``mask`` per document (position-major only)."""
        return self._reduce_slices(mask, np.add, np.float32)

    def _reduce_slices(self, values: np.ndarray, ufunc: np.ufunc, dtype: npt.DTypeLike) -> np.ndarray:
        widths = self.widths
        if widths is None:
            raise ValueError("per-document slices need the position-major layout (widths)")
        first = int(widths[0])
        result: np.ndarray = np.empty((values.shape[0], first), dtype=dtype)
        rows = max(8, min(256, 2**18 // first))  # a row band of ``result`` stays in cache across the slices
        for r0 in range(0, values.shape[0], rows):
            band, out = values[r0 : r0 + rows], result[r0 : r0 + rows]
            np.copyto(out, band[:, :first])
            offset = first
            for width in widths[1:]:
                ufunc(out[:, :width], band[:, offset : offset + width], out=out[:, :width])
                offset += width
        return result


def position_major(chunk_doc: np.ndarray, n_docs: int) -> tuple[np.ndarray, np.ndarray]:
    """(columns int64 [C], widths int64 [max chunks per document]): the position-major chunk order of
    :class:`_Documents` (``columns[j]`` = corpus row of column ``j``) and the documents per position."""
    counts = np.bincount(chunk_doc, minlength=n_docs)
    grouped = np.argsort(chunk_doc, kind="stable")
    position = np.empty(len(chunk_doc), dtype=np.int64)
    position[grouped] = np.arange(len(chunk_doc)) - np.repeat(np.cumsum(counts) - counts, counts)
    doc_order = np.argsort(-counts, kind="stable")
    slot = np.empty(n_docs, dtype=np.int64)
    slot[doc_order] = np.arange(n_docs)
    columns = np.lexsort((slot[chunk_doc], position))
    widths = np.bincount(position)  # documents that have a chunk at position p (one chunk each)
    return columns, widths.astype(np.int64)


class _TopK:
    """Exact top-k in trec order of each row of a score block (see the module docstring)."""

    def __init__(self, key: np.ndarray, k: int):
        n_chunks = len(key)
        self.key, self.k = key, k
        self.groups = min(n_chunks, max(_MIN_GROUPS, 4 * k))
        self.group_size = n_chunks // self.groups
        self.by_key_desc = np.argsort(-key, kind="stable")

    def __call__(self, scores: np.ndarray, mask: np.ndarray, first_row: int) -> tuple[np.ndarray, np.ndarray]:
        n_rows, n_chunks = scores.shape
        m, g, k = self.groups, self.group_size, self.k
        maxima = scores[:, : m * g].reshape(n_rows, g, m).max(axis=1)  # [B, m]; NaN propagates
        bad = np.isnan(maxima).any(axis=1)
        if m * g < n_chunks:
            bad |= np.isnan(scores[:, m * g :]).any(axis=1)
        if bad.any():
            raise ScoresNaN(first_row + np.flatnonzero(bad), first_row + n_rows)
        bound = np.partition(maxima, m - k, axis=1)[:, m - k]
        slow = np.count_nonzero(maxima >= bound[:, None], axis=1) > 2 * k
        threshold = np.where(slow, np.float32(np.inf), bound).astype(np.float32)
        np.greater_equal(scores, threshold[:, None], out=mask)
        flat = np.flatnonzero(mask)
        rows = flat // n_chunks
        cols = flat - rows * n_chunks
        if slow.any():
            keep = ~slow[rows]
            rows, cols = rows[keep], cols[keep]
            extra = [self._exact(scores, part) for part in np.array_split(np.flatnonzero(slow), _chunks(slow.sum()))]
            rows = np.concatenate([rows, *(r for r, _ in extra)])
            cols = np.concatenate([cols, *(c for _, c in extra)])
        values = scores[rows, cols]
        order = np.lexsort((self.key[cols], values, -rows))[::-1]  # row asc, score desc, key desc
        rows, cols, values = rows[order], cols[order], values[order]
        counts = np.bincount(rows, minlength=n_rows)
        take = (np.cumsum(counts) - counts)[:, None] + np.arange(k)
        return cols[take], values[take]

    def _exact(self, scores: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows, cols) of exactly the top k of ``scores[rows]``: those above the k-th score, then the
        ties at it with the largest keys."""
        block = scores[rows]
        n_chunks, k = block.shape[1], self.k
        kth = np.partition(block, n_chunks - k, axis=1)[:, n_chunks - k]
        above = block > kth[:, None]
        need = k - np.count_nonzero(above, axis=1)
        flat = np.flatnonzero(above)
        ties = (block == kth[:, None])[:, self.by_key_desc]
        ties &= np.cumsum(ties, axis=1, dtype=np.int32) <= need[:, None]
        tied = np.flatnonzero(ties)
        local = np.concatenate([flat // n_chunks, tied // n_chunks])
        cols = np.concatenate([flat % n_chunks, self.by_key_desc[tied % n_chunks]])
        return rows[local], cols


def _chunks(n: int) -> int:
    return max(1, -(-int(n) // _SLOW_ROWS))


def rank_corpus(
    score_block: ScoreBlock,
    n_queries: int,
    chunk_ids: Sequence[str],
    gold: np.ndarray,
    chunk_doc: np.ndarray,
    doc_ids: Sequence[str],
    *,
    top_k: int = 100,
    block: int = 1024,
    subsets: np.ndarray | None = None,
    progress: Callable[[int], None] | None = None,
) -> Ranking:
    """Rank all C chunks for each of ``n_queries`` queries (see the module docstring).

    ``score_block(rows)``: float32 ``[len(rows), C]`` scores of query rows ``rows`` (int64, ascending).
    Optional fast paths, used when the scorer has them (:class:`DenseScorer` does): ``permuted(columns)``
    returns a scorer whose column ``j`` is chunk ``columns[j]`` (lets documents be reduced in a
    position-major layout); ``into(rows, out)`` writes into one reused buffer instead of a fresh matrix.
    ``gold``: int64 [Q] gold chunk row per query. ``chunk_doc``: int64 [C] document index (0..D-1) of each
    chunk; ``doc_ids``: [D]. ``subsets``: bool [S, D] document masks. ``progress(n)``: called after each
    block with its number of queries. Memory ``O(block x C)``. Raises :class:`~evaluation.indexed.ScoresNaN` (a
    ValueError) at the first block with a NaN score, naming its NaN rows.
    """
    gold, chunk_doc, subsets = _checked_arguments(
        n_queries, len(chunk_ids), gold, chunk_doc, len(doc_ids), top_k=top_k, block=block, subsets=subsets
    )
    space = _column_space(score_block, chunk_ids, chunk_doc, doc_ids, gold)
    k = min(top_k, len(chunk_ids))
    ranker = _BlockRanker(space, k, min(block, max(n_queries, 1)), subsets)
    ranking = Ranking(
        gold_rank=np.zeros(n_queries, dtype=np.int64),
        top_index=np.zeros((n_queries, k), dtype=np.int64),
        top_score=np.zeros((n_queries, k), dtype=np.float32),
        doc_rank=np.zeros(n_queries, dtype=np.int64),
        subset_rank=None if subsets is None else np.zeros((n_queries, len(subsets)), dtype=np.int64),
    )
    for start in range(0, n_queries, block):
        rows = np.arange(start, min(start + block, n_queries), dtype=np.int64)
        try:
            ranker.rank_block(rows, ranking)
        except ScoresNaN as nan:  # stops at the first block with NaN: the reason says how far it looked
            nan.of = n_queries
            raise
        if progress is not None:
            progress(len(rows))
    return ranking


def _checked_arguments(
    n_queries: int,
    n_chunks: int,
    gold: np.ndarray,
    chunk_doc: np.ndarray,
    n_docs: int,
    *,
    top_k: int,
    block: int,
    subsets: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(gold int64 [Q], chunk_doc int64 [C], subsets bool [S, D] or None) of :func:`rank_corpus`'s
    arguments; ValueError naming the first one that is out of shape or range."""
    gold = np.asarray(gold, dtype=np.int64)
    chunk_doc = np.asarray(chunk_doc, dtype=np.int64)
    if n_chunks == 0:
        raise ValueError("no chunks to rank")
    if top_k < 1 or block < 1:
        raise ValueError(f"top_k and block must be >= 1, got {top_k}, {block}")
    if gold.shape != (n_queries,) or (n_queries and (gold.min() < 0 or gold.max() >= n_chunks)):
        raise ValueError(f"gold must be int [{n_queries}] rows in [0, {n_chunks})")
    if chunk_doc.shape != (n_chunks,) or chunk_doc.min() < 0 or chunk_doc.max() >= n_docs:
        raise ValueError(f"chunk_doc must be int [{n_chunks}] document indices in [0, {n_docs})")
    if subsets is not None:
        subsets = np.asarray(subsets, dtype=bool)
        if subsets.ndim != 2 or subsets.shape[1] != n_docs:
            raise ValueError(f"subsets must be bool [S, {n_docs}], got shape {subsets.shape}")
    return gold, chunk_doc, subsets


@dataclass
class _ColumnSpace:
    """The columns of the score blocks: the scorer's own chunk order, or position-major when it can
    permute its columns (``columns[j]`` = corpus row of column ``j``; None: column ``j`` is chunk ``j``)."""

    score_block: ScoreBlock  # the scorer in column order
    columns: np.ndarray | None
    col_key: np.ndarray  # int64 [C]: tie key of each column's chunk
    col_doc: np.ndarray  # int64 [C]: document index of each column's chunk
    gold_col: np.ndarray  # int64 [Q]: column of each query's gold chunk
    gold_doc: np.ndarray  # int64 [Q]: document index of each query's gold chunk
    documents: _Documents


def _column_space(
    score_block: ScoreBlock, chunk_ids: Sequence[str], chunk_doc: np.ndarray, doc_ids: Sequence[str], gold: np.ndarray
) -> _ColumnSpace:
    """Work in "column" space: the scorer's own order, or position-major when it can permute its columns."""
    key = tie_order(chunk_ids)
    doc_key = tie_order(doc_ids)
    gold_doc = chunk_doc[gold]
    permuted = getattr(score_block, "permuted", None)
    if not callable(permuted):
        return _ColumnSpace(score_block, None, key, chunk_doc, gold, gold_doc, _Documents(chunk_doc, doc_key))
    columns, widths = position_major(chunk_doc, len(doc_ids))
    col_doc = chunk_doc[columns]
    col_of_chunk = np.empty(len(chunk_ids), dtype=np.int64)
    col_of_chunk[columns] = np.arange(len(chunk_ids))
    documents = _Documents(col_doc, doc_key, widths)
    return _ColumnSpace(permuted(columns), columns, key[columns], col_doc, col_of_chunk[gold], gold_doc, documents)


class _BlockRanker:
    """One block of queries at a time: scores into reused buffers, then the top k, the gold's rank
    (overall and per subset) and the gold document's rank, written into a :class:`Ranking`.

    Subset counts: "beats the gold" per chunk summed with weights [.., 1 + S] (float32 sums of 0/1 are
    exact below 2**24): weight column 0 counts everything (the gold rank), column 1 + s subset s. In the
    position-major layout per document first (cheap slices), then [B, D] @ [D, 1 + S]; otherwise per
    chunk, [B, C] @ [C, 1 + S] from a float32 copy of the mask.
    """

    def __init__(self, space: _ColumnSpace, k: int, rows_per_block: int, subsets: np.ndarray | None):
        n_chunks = len(space.col_key)
        self.space, self.subsets = space, subsets
        self.top = _TopK(space.col_key, k)
        self.count_dtype = np.float32 if n_chunks < 2**24 else np.float64
        self.weights: np.ndarray | None = None
        if subsets is not None:
            with_all = np.vstack([np.ones((1, subsets.shape[1]), dtype=bool), subsets])
            slot_or_col = space.documents.slot_doc if space.documents.widths is not None else space.col_doc
            self.weights = with_all[:, slot_or_col].T.astype(self.count_dtype)
        into = getattr(space.score_block, "into", None)
        self.into: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = into if callable(into) else None
        self.score_buffer = None if self.into is None else np.empty((rows_per_block, n_chunks), dtype=np.float32)
        self.mask = np.empty((rows_per_block, n_chunks), dtype=bool)
        self.beats: np.ndarray | None = None
        if self.weights is not None and space.documents.widths is None:
            self.beats = np.empty((rows_per_block, n_chunks), dtype=self.count_dtype)

    def rank_block(self, rows: np.ndarray, out: Ranking) -> None:
        """Fill ``out``'s rows ``rows`` (ascending, contiguous)."""
        space = self.space
        scores = self._scores(rows)
        block_mask = self.mask[: len(rows)]
        best, out.top_score[rows] = self.top(scores, block_mask, int(rows[0]))
        out.top_index[rows] = best if space.columns is None else space.columns[best]
        counts = self._gold_counts(scores, space.gold_col[rows], block_mask)
        out.gold_rank[rows] = 1 + counts[:, 0]
        if out.subset_rank is not None and self.subsets is not None:
            out.subset_rank[rows] = np.where(self.subsets[:, space.gold_doc[rows]].T, 1 + counts[:, 1:], 0)
        out.doc_rank[rows] = self._doc_rank(scores, space.gold_doc[rows])

    def _scores(self, rows: np.ndarray) -> np.ndarray:
        """float32 [B, C] C-contiguous scores of ``rows`` in column order (the reused buffer when possible)."""
        b, n_chunks = len(rows), len(self.space.col_key)
        if self.score_buffer is not None and self.into is not None:
            scores = self.into(rows, self.score_buffer[:b])
        else:
            scores = np.ascontiguousarray(self.space.score_block(rows), dtype=np.float32)
        if scores.shape != (b, n_chunks):
            raise ValueError(f"score_block returned shape {scores.shape}, expected {(b, n_chunks)}")
        return scores

    def _gold_counts(self, scores: np.ndarray, g: np.ndarray, block_mask: np.ndarray) -> np.ndarray:
        """int64 [B, 1 + S]: chunks strictly above the gold score, plus ties at it with a larger key
        (column 0 over all chunks, column 1 + s within subset s)."""
        col_key = self.space.col_key
        gold_score = scores[np.arange(len(g)), g][:, None]
        np.greater(scores, gold_score, out=block_mask)
        counts = self._count_beats(block_mask)
        np.equal(scores, gold_score, out=block_mask)
        tied = np.flatnonzero(_count_rows(block_mask) > 1)
        if len(tied):
            counts[tied] += self._count_beats(block_mask[tied] & (col_key[None, :] > col_key[g[tied], None]))
        return np.rint(counts).astype(np.int64)

    def _count_beats(self, beat_mask: np.ndarray) -> np.ndarray:
        """[n, 1 + S] (or [n, 1] without subsets) counts of the true values of ``beat_mask`` [n, C]."""
        if self.weights is None:
            return _count_rows(beat_mask)[:, None].astype(self.count_dtype)
        if self.beats is None:  # with weights, no float copy means the position-major layout (``documents.widths``)
            return self.space.documents.count(beat_mask) @ self.weights
        as_float = self.beats[: len(beat_mask)]
        np.copyto(as_float, beat_mask)
        return as_float @ self.weights

    def _doc_rank(self, scores: np.ndarray, gold_doc: np.ndarray) -> np.ndarray:
        """int64 [B]: documents scored by their best chunk, ties by document id; rank of the gold's document."""
        documents = self.space.documents
        doc_scores = documents.max_scores(scores)
        gold_slot = documents.slot_of_doc[gold_doc]
        gold_doc_score = doc_scores[np.arange(len(gold_doc)), gold_slot][:, None]
        doc_beats = (doc_scores > gold_doc_score) | (
            (doc_scores == gold_doc_score) & (documents.slot_key[None, :] > documents.slot_key[gold_slot, None])
        )
        return 1 + _count_rows(doc_beats)


def _count_rows(mask: np.ndarray) -> np.ndarray:
    """int64 [B]: true values per row of a C-contiguous bool matrix (a byte sum, faster than count_nonzero)."""
    return mask.view(np.uint8).sum(axis=1, dtype=np.int64)
