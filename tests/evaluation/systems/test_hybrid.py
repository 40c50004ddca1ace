"""Hybrid retrieval (``evaluation.systems.hybrid``): reciprocal rank fusion on hand-built score lists, and how the
runner prepares a hybrid's components once and reports a hybrid whose component cannot run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

import evaluation.runner as runner
from evaluation.config import BM25System, EvaluationConfig, HybridSystem
from evaluation.indexed import IndexedSystem
from evaluation.runner import evaluate_task
from evaluation.systems.bm25 import prepare_bm25
from evaluation.systems.hybrid import FusedScorer, corpus_ranks, prepare_hybrid, rrf_scores
from evaluation.systems.ranking import rank_corpus, tie_order
from tests.evaluation.toy import all_scores, toy_corpus


def fused_order(ids: list[str], *components: list[float], k: float) -> list[str]:
    """The chunk ids in the order the project ranks the RRF of ``components`` (one score per chunk each, one query)."""
    matrices = [np.array([scores], dtype=np.float32) for scores in components]
    scorer = FusedScorer([(f"s{i}", lambda rows, m=m: m[rows]) for i, m in enumerate(matrices)], ids, k)
    ranking = rank_corpus(
        scorer, 1, ids, np.array([0]), np.arange(len(ids)), [f"doc{i}" for i in range(len(ids))], top_k=len(ids)
    )
    return [ids[i] for i in ranking.top_index[0]]


def test_corpus_ranks_follow_trec_order_ties_by_id_descending():
    key = tie_order(["a", "b", "c", "d"])
    scores = np.array([[3, 2, 2, 0], [0.0, -0.0, 1, 0.0]], dtype=np.float32)
    # Row 0: b and c tie at 2, c (the larger id) first. Row 1: 0.0 and -0.0 are equal scores: d, b, a after c.
    np.testing.assert_array_equal(corpus_ranks(scores, key), [[1, 3, 2, 4], [4, 3, 1, 2]])
    with pytest.raises(ValueError, match="NaN score for query row 1"):
        corpus_ranks(np.array([[1, 2, 3, 4], [1, np.nan, 0, 0]], dtype=np.float32), key)


def test_rrf_sum_with_k_and_exact_ties():
    ids = ["a", "b", "c", "d"]
    first, second = [4, 3, 2, 1], [2, 1, 4, 3]  # ranks a1 b2 c3 d4, and c1 d2 a3 b4
    k = 60
    expected = [
        [1 / (k + 1) + 1 / (k + 3), 1 / (k + 2) + 1 / (k + 4), 1 / (k + 3) + 1 / (k + 1), 1 / (k + 4) + 1 / (k + 2)]
    ]
    fused = rrf_scores([np.array([first], np.float32), np.array([second], np.float32)], tie_order(ids), k)
    np.testing.assert_allclose(fused, expected, rtol=0, atol=1e-15)
    # a and c sum the same two terms (ranks 1 and 3), as b and d do (2 and 4): the ties go to the larger id.
    assert fused[0, 0] == fused[0, 2] and fused[0, 1] == fused[0, 3]
    assert fused_order(ids, first, second, k=60) == ["c", "a", "d", "b"]
    assert fused_order(ids, first, second, k=0) == ["c", "a", "d", "b"]


def test_k_changes_the_fused_order():
    ids = ["a", "b", "c", "d", "e", "f", "g", "h", "x", "y"]
    # Ranked best first: x a b y c d e f g h, and a b c y d e f g h x. x is (1, 10), y is (4, 4).
    by_first = ["x", "a", "b", "y", "c", "d", "e", "f", "g", "h"]
    by_second = ["a", "b", "c", "y", "d", "e", "f", "g", "h", "x"]
    first = [float(10 - by_first.index(i)) for i in ids]
    second = [float(10 - by_second.index(i)) for i in ids]
    # k = 0: 1/rank, so x's first place (1 + 1/10) beats y's two fourth places (1/4 + 1/4) and c's (1/5 + 1/3).
    assert fused_order(ids, first, second, k=0) == ["a", "x", "b", "c", "y", "d", "e", "f", "g", "h"]
    # k = 60 (the paper's) damps first places: y (2/64) and c (1/65 + 1/63) now beat x (1/61 + 1/70).
    assert fused_order(ids, first, second, k=60) == ["a", "b", "c", "y", "x", "d", "e", "f", "g", "h"]


def test_fused_scorer_blocks_rows_and_checks_shapes(monkeypatch):
    ids = [f"c{i}" for i in range(7)]
    rng = np.random.default_rng(0)
    a, b = rng.random((600, 7), dtype=np.float32), rng.integers(0, 3, (600, 7)).astype(np.float32)
    monkeypatch.setattr("evaluation.systems.hybrid._ROWS", 64)  # several row blocks per call
    scorer = FusedScorer([("a", lambda rows: a[rows]), ("b", lambda rows: b[rows])], ids, 60)
    rows = np.arange(600, dtype=np.int64)
    expected = rrf_scores([a, b], tie_order(ids), 60).astype(np.float32)
    np.testing.assert_array_equal(scorer(rows), expected)
    picked = np.array([599, 3, 64], dtype=np.int64)
    np.testing.assert_array_equal(scorer(picked), expected[picked])
    broken = FusedScorer([("a", lambda rows: a[rows]), ("b", lambda rows: b[rows, :3])], ids, 60)
    with pytest.raises(ValueError, match="component b: scores of shape"):
        broken(rows[:2])


def test_prepare_hybrid_reuses_the_components_and_sums_their_cost():
    corpus = toy_corpus()
    words = prepare_bm25(BM25System(kind="bm25", name="bm25"), corpus)
    plain = prepare_bm25(BM25System(kind="bm25", name="plain", stemmer=None, stopwords=None), corpus)
    system = HybridSystem(kind="hybrid", name="h", systems=("bm25", "plain"), k=10)
    hybrid = prepare_hybrid(system, [("bm25", words), ("plain", plain)], corpus.chunk_ids)
    expected = rrf_scores(
        [all_scores(words, corpus.n_queries), all_scores(plain, corpus.n_queries)], tie_order(corpus.chunk_ids), 10
    )
    np.testing.assert_allclose(all_scores(hybrid, corpus.n_queries), expected, rtol=1e-6)
    assert hybrid.index_seconds == pytest.approx(words.index_seconds + plain.index_seconds)
    assert hybrid.description == "hybrid · reciprocal rank fusion (k=10) of bm25 + plain"
    assert hybrid.details["components"] == ["bm25", "plain"] and hybrid.details["k"] == 10
    with pytest.raises(ValueError, match="components \\['plain', 'bm25'\\], expected"):
        prepare_hybrid(system, [("plain", plain), ("bm25", words)], corpus.chunk_ids)


def test_hybrid_config_is_validated():
    bm25 = {"kind": "bm25", "name": "bm25"}
    for systems, reason in (
        ([bm25, {"kind": "hybrid", "name": "h", "systems": ["bm25", "dense"]}], "fuses undeclared system"),
        (
            [bm25, {"kind": "bm25", "name": "b2"}, {"kind": "hybrid", "name": "h", "systems": ["bm25", "b2"]},
             {"kind": "hybrid", "name": "hh", "systems": ["h", "bm25"]}],
            "fuses hybrid",
        ),
        ([bm25, {"kind": "hybrid", "name": "h", "systems": ["bm25", "bm25"]}], "named more than once"),
        ([bm25, {"kind": "hybrid", "name": "h", "systems": ["bm25"]}], "at least 2"),
        ([bm25, {"kind": "bm25", "name": "b2"}, {"kind": "hybrid", "name": "h", "systems": ["bm25", "b2"], "k": -1}],
         "greater than or equal to 0"),
    ):  # fmt: skip
        with pytest.raises(ValidationError, match=reason):
            EvaluationConfig(systems=systems, chunk_sizes={"systems": []})


# ------------------------------------------------------------------ in the runner

BM25 = {"kind": "bm25", "name": "bm25"}
PLAIN = {"kind": "bm25", "name": "plain", "stemmer": None, "stopwords": None}
HYBRID = {"kind": "hybrid", "name": "hybrid", "systems": ["bm25", "plain"]}


def config(*systems: dict) -> EvaluationConfig:
    return EvaluationConfig(
        systems=list(systems),
        bootstrap={"resamples": 100},
        significance={"resamples": 100, "comparisons": []},
        chunk_sizes={"enabled": False, "systems": []},
    )


@pytest.fixture
def prepared(monkeypatch) -> list[str]:
    """The names of the systems the runner prepares, in order."""
    calls: list[str] = []
    real = runner.prepare_system

    def counted(system, *args, **kwargs):
        calls.append(system.name)
        return real(system, *args, **kwargs)

    monkeypatch.setattr(runner, "prepare_system", counted)
    return calls


@pytest.mark.parametrize("hybrid_first", [False, True])
def test_components_are_prepared_once_whatever_the_order(tmp_path: Path, prepared: list[str], hybrid_first: bool):
    corpus = toy_corpus()
    systems = (HYBRID, BM25, PLAIN) if hybrid_first else (BM25, PLAIN, HYBRID)
    evaluation = evaluate_task(corpus, config(*systems), models_dir=tmp_path, reports_dir=tmp_path)
    assert sorted(prepared) == ["bm25", "hybrid", "plain"]
    runs = {run.system: run for run in evaluation.runs}
    assert {name: run.status for name, run in runs.items()} == {"bm25": "ok", "plain": "ok", "hybrid": "ok"}
    assert runs["hybrid"].kind == "hybrid" and runs["hybrid"].details["components"] == ["bm25", "plain"]
    # The hybrid's run file holds the RRF ranking of the components' own scores.
    words = prepare_bm25(BM25System(kind="bm25", name="bm25"), corpus)
    plain = prepare_bm25(BM25System(kind="bm25", name="plain", stemmer=None, stopwords=None), corpus)
    fused = rrf_scores(
        [all_scores(words, corpus.n_queries), all_scores(plain, corpus.n_queries)], tie_order(corpus.chunk_ids), 60
    )
    best = {line.split()[0]: line.split()[2] for line in (tmp_path / runs["hybrid"].run_file).read_text().splitlines()
            if line.split()[3] == "1"}  # fmt: skip
    assert best == {qid: corpus.chunk_ids[int(np.argmax(fused[q]))] for q, qid in enumerate(corpus.query_ids)}


def test_a_hybrid_alone_prepares_its_components_without_reporting_them(tmp_path: Path, prepared: list[str]):
    evaluation = evaluate_task(
        toy_corpus(), config(BM25, PLAIN, HYBRID), models_dir=tmp_path, reports_dir=tmp_path, systems=["hybrid"]
    )
    assert [run.system for run in evaluation.runs] == ["hybrid"] and evaluation.runs[0].status == "ok"
    assert prepared == ["bm25", "plain", "hybrid"]


def test_a_component_that_cannot_run_makes_the_hybrid_not_run(tmp_path: Path):
    bad = {"kind": "bm25", "name": "plain", "stemmer": "klingon"}
    evaluation = evaluate_task(toy_corpus(), config(BM25, bad, HYBRID), models_dir=tmp_path, reports_dir=tmp_path)
    runs = {run.system: run for run in evaluation.runs}
    assert runs["plain"].status == "not_run" and runs["hybrid"].status == "not_run"
    assert runs["hybrid"].reason.startswith("component plain not run: unknown stemmer language 'klingon'")


def test_a_failing_component_leaves_the_hybrid_not_run(tmp_path: Path, monkeypatch):
    real = runner.prepare_system

    def flaky(system, *args, **kwargs):
        if system.name == "plain":
            raise RuntimeError("index exploded")
        return real(system, *args, **kwargs)

    monkeypatch.setattr(runner, "prepare_system", flaky)
    evaluation = evaluate_task(toy_corpus(), config(BM25, PLAIN, HYBRID), models_dir=tmp_path, reports_dir=tmp_path)
    runs = {run.system: (run.status, run.reason) for run in evaluation.runs}
    assert runs["bm25"] == ("ok", None) and runs["plain"] == ("failed", "RuntimeError: index exploded")
    assert runs["hybrid"] == ("not_run", "needs plain, which failed: RuntimeError: index exploded")


def test_components_are_released_after_the_systems_ran(tmp_path: Path, monkeypatch):
    kept: list[dict] = []
    real = runner._Evaluator.release

    def spy(self, size):
        kept.append(dict(self.prepared))
        real(self, size)
        assert not any(key[1] == size for key in self.prepared)

    monkeypatch.setattr(runner._Evaluator, "release", spy)
    evaluate_task(toy_corpus(), config(BM25, PLAIN, HYBRID), models_dir=tmp_path, reports_dir=tmp_path)
    assert sorted(kept[0]) == [("bm25", None), ("plain", None)]
    assert all(isinstance(value, IndexedSystem) for value in kept[0].values())
