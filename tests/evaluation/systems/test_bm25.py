"""BM25 (``evaluation.systems.bm25``): hand-checkable rankings, tokenizer options, agreement with bm25s, speed."""

from __future__ import annotations

import dataclasses
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


# ------------------------------------------------------------------ contextual BM25 (context: title)

TITLED = BM25System(kind="bm25", name="bm25-title", context="title")


def titled_corpus() -> EvalCorpus:
    """Two islands whose chunks are word for word the same: only the title tells them apart."""
    chunks = ["The island exports cloves and nutmeg.", "The island exports cloves and nutmeg.", "Its port is old."]
    return EvalCorpus(
        name="islands",
        source="test",
        split="test",
        chunk_ids=["pemba_0", "zanzibar_0", "zanzibar_1"],
        chunks=chunks,
        doc_ids=["pemba", "zanzibar", "zanzibar"],
        chunk_index=np.array([0, 0, 1], dtype=np.int32),
        titles=["Pemba", "Zanzibar", "Zanzibar"],
        query_ids=["q0"],
        queries=["Which spices does Zanzibar export?"],
        gold=np.array([1], dtype=np.int64),
    )


def test_title_header_lets_bm25_match_a_term_only_the_title_carries():
    corpus = titled_corpus()
    rows = np.arange(1, dtype=np.int64)
    plain = prepare_bm25(WORDS, corpus)
    titled = prepare_bm25(TITLED, corpus)
    before, after = plain.score_block(rows)[0], titled.score_block(rows)[0]
    assert before[0] == before[1] > 0  # the chunks alone cannot be told apart ("zanzibar" is in no chunk)
    assert after[1] > after[0] and after[2] > 0 == before[2]  # the title's term ranks Zanzibar's chunks first
    assert np.argmax(after) == 1
    assert titled.details["context"] == "title" and titled.details["chunks_without_title"] == 0
    assert titled.details["title_template"] == "{title}\n\n{chunk}" and plain.details["context"] == "independent"
    assert titled.description.startswith("bm25 · title + chunk · words (stemmer: english")


def test_the_log_line_names_the_system_not_just_bm25():
    for system in (WORDS, TITLED, BM25System(kind="bm25", name="bm25-subword", tokenizer="model")):
        lines: list[str] = []
        prepare_bm25(system, corpus(["zebra"]), log=lines.append)
        assert len(lines) == 1 and lines[0].startswith(
            f"{system.name}: BM25 ({system.tokenizer} tokenizer) indexed 6 chunks"
        )


def test_contextual_bm25_indexes_exactly_the_title_prefix_text():
    """The same text the dense title-prefix system embeds (evaluation.systems.headers.title_texts), chunks without
    a title indexed alone."""
    from evaluation.systems.headers import title_texts

    corpus = titled_corpus()
    corpus.titles[0] = "  "
    texts, missing = title_texts(TITLED.title_template, corpus)
    assert texts == ["The island exports cloves and nutmeg.", *(f"Zanzibar\n\n{c}" for c in corpus.chunks[1:])]
    assert missing == 1
    rows = np.arange(1, dtype=np.int64)
    as_text = prepare_bm25(WORDS, dataclasses.replace(corpus, chunks=texts))
    titled = prepare_bm25(TITLED, corpus)
    np.testing.assert_array_equal(titled.score_block(rows), as_text.score_block(rows))
    assert titled.details["chunks_without_title"] == 1
    custom = BM25System(kind="bm25", name="b", context="title", title_template="About {title}: {chunk}")
    assert prepare_bm25(custom, corpus).details["title_template"] == "About {title}: {chunk}"
    with pytest.raises(ValueError, match="must contain \\{chunk\\}"):
        BM25System(kind="bm25", name="b", context="title", title_template="{title}")
