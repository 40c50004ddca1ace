"""BM25 (``evaluation.systems.bm25``): hand-checkable rankings, tokenizer options, agreement with bm25s, speed."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import bm25s
import numpy as np
import pytest

from evaluation.config import BM25System
from evaluation.corpus import EvalCorpus
from evaluation.indexed import NotRunnable
from evaluation.systems.bm25 import BM25Scorer, prepare_bm25, words_tokenizer
from evaluation.systems.dispatch import requirement_problem
from tests.conftest import SAMPLE_DIR

CHUNKS = [
    "The cat sat on the mat near the door.",
    "A zebra crossed the dusty savanna at dawn.",
    "Dogs are running in the park every morning.",
    "The weather today is sunny and warm.",
    "Snow fell on the mountain all night.",
    "Boarding the train was slow and crowded.",
]


def corpus(queries: list[str], chunks: list[str] = CHUNKS) -> EvalCorpus:
    """One document per chunk; gold = row 0 (unused here)."""
    n = len(chunks)
    return EvalCorpus(
        name="toy",
        source="test",
        split="test",
        chunk_ids=[f"d{i}_0" for i in range(n)],
        chunks=list(chunks),
        doc_ids=[f"d{i}" for i in range(n)],
        chunk_index=np.zeros(n, dtype=np.int32),
        titles=[None] * n,
        query_ids=[f"q{i}" for i in range(len(queries))],
        queries=list(queries),
        gold=np.zeros(len(queries), dtype=np.int64),
    )


def scores(system: BM25System, queries: list[str], chunks: list[str] = CHUNKS) -> tuple[np.ndarray, dict]:
    indexed = prepare_bm25(system, corpus(queries, chunks))
    out = indexed.score_block(np.arange(len(queries), dtype=np.int64))
    assert out.dtype == np.float32 and out.shape == (len(queries), len(chunks))
    return out, indexed.details


WORDS = BM25System(kind="bm25", name="bm25")


def test_rare_word_ranks_its_chunk_first():
    out, _ = scores(WORDS, ["where did the zebra go", "sunny weather"])
    assert out[0].argmax() == 1 and out[0, 1] > 0
    assert np.count_nonzero(out[0]) == 1  # "zebra" is the only non-stop word in one chunk; "go" is absent
    assert out[1].argmax() == 3


def test_stemming_matches_inflections():
    out, _ = scores(WORDS, ["run"])
    assert out[0].argmax() == 2 and out[0, 2] > 0  # "running" stems to "run"
    unstemmed, _ = scores(BM25System(kind="bm25", name="b", stemmer=None), ["run"])
    assert not unstemmed.any()


def test_stop_words_are_configurable():
    with_stop, details = scores(WORDS, ["the"])
    assert not with_stop.any() and details["queries_without_known_tokens"] == 1
    kept, _ = scores(BM25System(kind="bm25", name="b", stopwords=None), ["the"])
    assert set(np.flatnonzero(kept[0])) == {0, 1, 2, 3, 4, 5}


def test_all_out_of_vocabulary_query_scores_zero():
    out, details = scores(WORDS, ["xylophone quartz", "", "zebra"])
    assert not out[0].any() and not out[1].any() and out[2].any()
    assert details["queries_without_known_tokens"] == 2


def test_subword_variant_differs_from_words():
    """'snowboarding' is one unknown word, but WordPiece splits it into 'snow' + '##boarding'."""
    subword = BM25System(kind="bm25", name="s", tokenizer="model", stemmer=None, stopwords=None)
    words, _ = scores(WORDS, ["snowboarding"])
    pieces, details = scores(subword, ["snowboarding"])
    assert not words.any()
    assert pieces[0].argmax() == 4  # the chunk with "snow"
    assert details["special_tokens"] is True and details["tokenizer_path"]
    assert "subword" in prepare_bm25(subword, corpus(["x"])).description
    assert "words" in prepare_bm25(WORDS, corpus(["x"])).description


def test_subword_variant_ignores_stemming_options_visibly():
    _, details = scores(BM25System(kind="bm25", name="s", tokenizer="model"), ["snow"])
    assert details["ignored"]["stemmer"] == "english"


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_block_scores_equal_bm25s_get_scores(method):
    tokenize = words_tokenizer("en", "english")
    chunk_tokens = tokenize(CHUNKS)
    queries = ["the cat runs in the park park", "dusty zebra", "warm snow night", "nothing known here xyz"]
    scorer = BM25Scorer.fit(chunk_tokens, 1.2, 0.7, method)
    block = scorer.score(scorer.query_counts(tokenize(queries)))
    reference = bm25s.BM25(k1=1.2, b=0.7, method=method)
    reference.index(chunk_tokens, show_progress=False)
    for row, tokens in enumerate(tokenize(queries)):
        ids = reference.get_tokens_ids(tokens)
        expected = reference.get_scores_from_ids(ids) if ids else np.zeros(len(CHUNKS))
        if method in ("bm25l", "bm25+") and not ids:
            expected = np.zeros(len(CHUNKS))
        np.testing.assert_allclose(block[row], expected, rtol=1e-5, atol=1e-6)


def test_unknown_stemmer_language_is_a_requirement_problem():
    system = BM25System(kind="bm25", name="b", stemmer="klingon")
    reason = requirement_problem(system, corpus(["x"]), models_dir=None)  # type: ignore[arg-type]
    assert reason and "klingon" in reason
    with pytest.raises(NotRunnable, match="klingon"):
        prepare_bm25(system, corpus(["x"]))


def test_corpus_without_any_token():
    out, details = scores(WORDS, ["anything"], chunks=["...", "!!"])
    assert not out.any() and details["chunks_without_tokens"] == 2


def test_ten_thousand_queries_against_two_thousand_chunks_take_seconds():
    rng = np.random.default_rng(0)
    words = np.array([f"w{i}x" for i in range(5000)])
    chunks = [" ".join(rng.choice(words, 120)) for _ in range(2000)]
    queries = [" ".join(rng.choice(words, 8)) for _ in range(10000)]
    started = time.perf_counter()
    indexed = prepare_bm25(BM25System(kind="bm25", name="b", stemmer=None), corpus(queries, chunks))
    total = 0.0
    for start in range(0, len(queries), 1024):
        total += float(indexed.score_block(np.arange(start, min(start + 1024, len(queries)))).sum())
    assert total > 0
    assert time.perf_counter() - started < 30


SCORES_DIGEST = """
import hashlib, sys
from pathlib import Path
import numpy as np
from curation.sources.sample import load_sample
from evaluation.systems.bm25 import prepare_bm25
from evaluation.config import BM25System
from evaluation.rechunk import rechunk_corpus

source = load_sample(Path(sys.argv[1]))
corpus = rechunk_corpus(source.documents_table(), source.queries_table(), 1000, name="sample")
indexed = prepare_bm25(BM25System(kind="bm25", name="bm25"), corpus)
print(hashlib.sha256(indexed.score_block(np.arange(corpus.n_queries)).tobytes()).hexdigest())
"""


def test_scores_are_the_same_whatever_the_string_hash_seed():
    """bm25s numbers tokens in set order (Python's hash seed); the scorer renumbers them, so the float32 sums run in
    one order: the same scores, to the bit, in every process (they used to differ in the last digits and swap
    near-ties between two runs of one evaluation)."""
    digests = {
        subprocess.run(
            [sys.executable, "-c", SCORES_DIGEST, str(SAMPLE_DIR)],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2", "3")
    }
    assert len(digests) == 1, digests
