"""BM25 over the chunks of a task, with ``bm25s``; every chunk scored for every query.

Two tokenizers (``BM25System.tokenizer``):

* ``words``: ``bm25s.tokenize`` (lowercased words of two or more characters, the scikit-learn pattern), stop words
  from bm25s's lists (``stopwords``, e.g. ``en``; null keeps every word), stemmed with PyStemmer (``stemmer``, e.g.
  ``english``; null: no stemming).
* ``model``: the subword ids of an embedding model's tokenizer, special tokens included, no lowercasing beyond the
  tokenizer's own, no stemming, no stop words: the public ConTEB code's BM25 baseline
  (``cde_benchmark/embedders/bm25_embedder.py`` tokenizes with ``tokenizer(text)["input_ids"]``; it scores with
  ``rank_bm25.BM25Okapi``, we with bm25s and the configured ``method``).

What is indexed per chunk (``BM25System.context``): the chunk (``independent``), or the chunk under its document's
title (``title``, contextual BM25): the same text the dense title-prefix system embeds
(:func:`evaluation.systems.headers.title_texts`; a chunk without a title is indexed alone, counted in
``details["chunks_without_title"]``). Queries are tokenized the same way either way.

Scoring: bm25s precomputes the score of every (token, chunk) pair (a sparse ``[V, C]`` matrix); a query's score for
a chunk is the sum over its tokens, repeated tokens counted each time, of that token's entry (exactly
``bm25s.BM25.get_scores``). A block of queries is one sparse product ``counts [B, V] @ scores [V, C]``. Query tokens
absent from the corpus vocabulary (and stop words) contribute nothing, so a query made only of such tokens scores 0
for every chunk (counted in ``details["queries_without_known_tokens"]``), never an error.
Token ids are renumbered in sorted token order (bm25s numbers them in a set's order, which follows Python's string
hash seed), so the float32 sums, hence the scores and the order of near-ties, are the same in every process.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

import bm25s
import numpy as np
import scipy.sparse as sp
import Stemmer
from bm25s.tokenization import _infer_stopwords

from evaluation.config import BM25System
from evaluation.corpus import EvalCorpus
from evaluation.indexed import IndexedSystem, Log, NotRunnable, no_log
from evaluation.systems.headers import title_texts

Tokenize = Callable[[list[str]], list[list[str]]]


@dataclass
class BM25Scorer:
    """A fitted BM25 index: ``scores`` ``[V, C]`` (CSR) of token ``v`` in chunk ``c``, and the vocabulary.

    ``nonoccurrence[v]`` (BM25L / BM25+ only) is added once per query occurrence of token ``v`` to every chunk, as
    bm25s does.
    """

    scores: sp.csr_matrix
    vocabulary: dict[str, int]
    nonoccurrence: np.ndarray | None = None

    @classmethod
    def fit(cls, corpus_tokens: list[list[str]], k1: float, b: float, method: str) -> BM25Scorer:
        """Index ``corpus_tokens`` (one token list per chunk) with ``bm25s.BM25(k1, b, method)``."""
        n_chunks = len(corpus_tokens)
        if not any(corpus_tokens):  # no token at all: bm25s cannot build a vocabulary
            return cls(sp.csr_matrix((0, n_chunks), dtype=np.float32), {})
        retriever = bm25s.BM25(k1=k1, b=b, method=method)
        retriever.index(corpus_tokens, create_empty_token=False, show_progress=False)
        raw = retriever.scores
        n_vocab = len(raw["indptr"]) - 1
        by_token = sp.csc_matrix((raw["data"], raw["indices"], raw["indptr"]), shape=(raw["num_docs"], n_vocab)).T
        ids = {token: i for token, i in retriever.vocab_dict.items() if i < n_vocab}
        # bm25s numbers the tokens in the iteration order of a set, which follows Python's string hash seed: renumber
        # them in sorted order, so that the float32 sums of a query's score run in the same order in every process.
        tokens = sorted(ids)
        rows = np.fromiter((ids[token] for token in tokens), dtype=np.int64, count=len(tokens))
        nonoccurrence = getattr(retriever, "nonoccurrence_array", None)
        if nonoccurrence is not None:
            nonoccurrence = np.asarray(nonoccurrence)[rows]
        scores = by_token.tocsr().astype(np.float32)[rows]
        return cls(scores, {token: i for i, token in enumerate(tokens)}, nonoccurrence)

    @property
    def n_chunks(self) -> int:
        return self.scores.shape[1]

    def query_counts(self, query_tokens: list[list[str]]) -> sp.csr_matrix:
        """``[Q, V]`` counts of each query's in-vocabulary tokens (out-of-vocabulary tokens dropped)."""
        indptr: list[int] = [0]
        indices: list[int] = []
        for tokens in query_tokens:
            indices.extend(self.vocabulary[t] for t in tokens if t in self.vocabulary)
            indptr.append(len(indices))
        data = np.ones(len(indices), dtype=np.float32)
        counts = sp.csr_matrix((data, indices, indptr), shape=(len(query_tokens), len(self.vocabulary)))
        counts.sum_duplicates()
        return counts

    def score(self, counts: sp.csr_matrix) -> np.ndarray:
        """float32 ``[B, C]``: ``counts [B, V] @ scores [V, C]`` (+ the non-occurrence term for BM25L / BM25+)."""
        if counts.shape[1] == 0:
            return np.zeros((counts.shape[0], self.n_chunks), dtype=np.float32)
        out = np.asarray((counts @ self.scores).toarray(), dtype=np.float32)
        if self.nonoccurrence is not None:
            out += (counts @ self.nonoccurrence.astype(np.float32))[:, None]
        return out


def bm25_problem(system: BM25System) -> str | None:
    """A reason the configuration cannot run (unknown stemmer or stop-word language, missing tokenizer folder)."""
    if system.tokenizer == "words":
        if system.stemmer is not None and system.stemmer not in Stemmer.algorithms():
            return f"unknown stemmer language {system.stemmer!r}; PyStemmer knows {sorted(Stemmer.algorithms())}"
        if system.stopwords is not None:
            try:
                _infer_stopwords(system.stopwords)
            except ValueError:
                return f"unknown stop-word list {system.stopwords!r} (bm25s lists: en, de, fr, es, it, pt, nl, ...)"
        return None
    from evaluation.systems.embedders import model_location_problem

    return model_location_problem(system.model)


def words_tokenizer(stopwords: str | None, stemmer: str | None) -> Tokenize:
    """``bm25s.tokenize`` with the given stop-word list and PyStemmer language (None: off), returning strings."""
    stem = Stemmer.Stemmer(stemmer) if stemmer else None

    def tokenize(texts: list[str]) -> list[list[str]]:
        if not texts:
            return []
        return bm25s.tokenize(texts, stopwords=stopwords, stemmer=stem, return_ids=False, show_progress=False)

    return tokenize


@functools.lru_cache(maxsize=4)
def _auto_tokenizer(location: str):
    """``transformers.AutoTokenizer`` for a folder or hub id (cached per process)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(location)


def model_tokenizer(model: str) -> tuple[Tokenize, str]:
    """Subword-id tokenizer of ``model`` (``offline-minilm``, a folder or a hub id) and the folder/id it came from.

    Only the tokenizer is loaded. Raises :class:`NotRunnable` when it cannot be (e.g. a hub id without network).
    """
    from evaluation.systems.embedders import resolve_location

    location = resolve_location(model)
    try:
        tokenizer = _auto_tokenizer(location)
    except (OSError, ValueError) as error:
        raise NotRunnable(f"cannot load the tokenizer of {model!r} ({location}): {error}") from error

    def tokenize(texts: list[str]) -> list[list[str]]:
        if not texts:
            return []
        ids = tokenizer(list(texts), add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
        return [[str(i) for i in row] for row in ids]

    return tokenize, location


def describe(system: BM25System) -> str:
    """One line saying what is tokenized how, e.g. ``bm25 · words (stemmer: english, stop words: en) · lucene ...``;
    ``bm25 · title + chunk · words ...`` for ``context: title``."""
    scoring = f"{system.method} k1={system.k1:g} b={system.b:g}"
    head = "bm25 · title + chunk" if system.context == "title" else "bm25"
    if system.tokenizer == "model":
        return (
            f"{head} · subword ids of {system.model}'s tokenizer (public ConTEB variant: special tokens kept, "
            f"no stemming, no stop words) · {scoring}"
        )
    return f"{head} · words (stemmer: {system.stemmer or 'none'}, stop words: {system.stopwords or 'none'}) · {scoring}"


def prepare_bm25(
    system: BM25System, corpus: EvalCorpus, *, show_progress: bool = False, log: Log = no_log
) -> IndexedSystem:
    """Index the chunks of ``corpus`` (under their titles for ``context: title``) and tokenize ``corpus.queries``;
    the scorer returns float32 ``[B, C]`` BM25 scores. ``log`` gets one line, headed by the system's name."""
    problem = bm25_problem(system)
    if problem:
        raise NotRunnable(problem)
    details: dict = {
        "tokenizer": system.tokenizer,
        "method": system.method,
        "k1": system.k1,
        "b": system.b,
        "context": system.context,
    }
    texts = list(corpus.chunks)
    if system.context == "title":
        texts, missing = title_texts(system.title_template, corpus)
        details.update(title_template=system.title_template, chunks_without_title=missing)
    if system.tokenizer == "model":
        tokenize, location = model_tokenizer(system.model)
        details.update(tokenizer_model=system.model, tokenizer_path=location, special_tokens=True)
        ignored = {k: v for k, v in (("stemmer", system.stemmer), ("stopwords", system.stopwords)) if v}
        if ignored:
            details["ignored"] = {**ignored, "why": "stemming and stop words apply to tokenizer: words only"}
    else:
        tokenize = words_tokenizer(system.stopwords, system.stemmer)
        details.update(stemmer=system.stemmer, stopwords=system.stopwords)

    started = time.perf_counter()
    chunk_tokens = tokenize(texts)
    scorer = BM25Scorer.fit(chunk_tokens, system.k1, system.b, system.method)
    index_seconds = time.perf_counter() - started
    started = time.perf_counter()
    counts = scorer.query_counts(tokenize(list(corpus.queries)))
    query_seconds = time.perf_counter() - started

    empty_queries = int(np.count_nonzero(np.diff(counts.indptr) == 0))
    details.update(
        vocabulary_size=len(scorer.vocabulary),
        chunks_without_tokens=sum(1 for tokens in chunk_tokens if not tokens),
        queries_without_known_tokens=empty_queries,
    )
    log(
        f"{system.name}: BM25 ({system.tokenizer} tokenizer) indexed {corpus.n_chunks:,} chunks "
        f"({len(scorer.vocabulary):,} terms) in {index_seconds:.1f} s; {empty_queries:,} of {corpus.n_queries:,} "
        "queries have no known term"
    )

    def score_block(rows: np.ndarray) -> np.ndarray:
        return scorer.score(counts[np.asarray(rows, dtype=np.int64)])

    return IndexedSystem(score_block, index_seconds, query_seconds, describe(system), details)
