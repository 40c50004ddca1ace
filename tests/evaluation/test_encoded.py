"""Chunk encodings apart from queries (``evaluation.encoded``): alignment by chunk id, shards joined, problems."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.encoded import (
    ChunkEncoding,
    EncodingKey,
    EncodingMismatch,
    EncodingProblem,
    concat_encodings,
    merge_outcomes,
)


def vectors(ids: list[str], start: float = 0.0) -> ChunkEncoding:
    values = np.arange(len(ids) * 2, dtype=np.float32).reshape(-1, 2) + start
    return ChunkEncoding(ids, vectors=values, seconds=1.5, counts={"windows": len(ids)}, documents=1)


def test_aligned_puts_rows_in_the_corpus_order():
    encoding = vectors(["a", "b", "c"])
    aligned = encoding.aligned(["c", "a", "b"])
    assert aligned.chunk_ids == ["c", "a", "b"]
    assert aligned.vectors.tolist() == [[4, 5], [0, 1], [2, 3]]
    assert encoding.aligned(["a", "b", "c"]) is encoding


def test_aligned_refuses_other_chunks_and_says_which():
    encoding = vectors(["a", "b", "c"])
    with pytest.raises(EncodingMismatch, match=r"1 missing \(first 'd'\), 1 extra \(first 'c'\)"):
        encoding.aligned(["a", "b", "d"])
    twice = ChunkEncoding(["a", "a"], vectors=np.zeros((2, 2), np.float32))
    with pytest.raises(EncodingMismatch, match="1 encoded twice"):
        twice.aligned(["a"])


def test_token_encodings_align_per_chunk():
    tokens = [np.full((n, 2), n, np.float16) for n in (1, 2, 3)]
    encoding = ChunkEncoding(["a", "b", "c"], tokens=tokens)
    assert [len(t) for t in encoding.aligned(["b", "c", "a"]).tokens] == [2, 3, 1]


def test_an_encoding_holds_vectors_or_tokens_with_one_row_per_chunk():
    with pytest.raises(ValueError, match="exactly one"):
        ChunkEncoding(["a"])
    with pytest.raises(ValueError, match="2 encoded rows for 1 chunk ids"):
        ChunkEncoding(["a"], vectors=np.zeros((2, 2), np.float32))


def test_concat_joins_rows_and_sums_time_and_counters():
    joined = concat_encodings([vectors(["a", "b"]), vectors(["c"], start=10)])
    assert joined.chunk_ids == ["a", "b", "c"]
    assert joined.vectors.tolist() == [[0, 1], [2, 3], [10, 11]]
    assert (joined.seconds, joined.counts["windows"], joined.documents, joined.shards) == (3.0, 3, 2, 2)
    tokens = ChunkEncoding(["d"], tokens=[np.zeros((1, 2), np.float16)])
    with pytest.raises(ValueError, match="single-vector and token"):
        concat_encodings([vectors(["a"]), tokens])


def test_merge_keeps_shard_order_and_a_shards_problem_is_the_systems():
    dense, late, broken = EncodingKey("dense"), EncodingKey("late", 500), EncodingKey("broken")
    shards = [
        {dense: vectors(["a"]), late: vectors(["x"]), broken: EncodingProblem("not_run", "no model")},
        {dense: vectors(["b"]), late: vectors(["y"]), broken: EncodingProblem("failed", "shard s0001: boom")},
    ]
    merged = merge_outcomes(shards)
    assert merged[dense].chunk_ids == ["a", "b"] and merged[late].chunk_ids == ["x", "y"]
    assert merged[broken] == EncodingProblem("failed", "shard s0001: boom")  # failed before not_run
    assert str(late) == "late@500" and str(dense) == "dense"


def test_merge_leaves_out_a_key_some_shards_lack():
    key = EncodingKey("dense")
    assert merge_outcomes([{key: vectors(["a"])}, {}]) == {}
