"""The needs_context subset: labels loaded from the queries table, every metric and comparison repeated
on the subset, stored in evaluation.json, and left out (with a note) when the queries are unlabelled."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from evaluation.load import CorpusError, load_corpus
from evaluation.metrics.stats import summarize
from evaluation.results import from_json, to_json
from evaluation.run_files import evaluation_path, per_query_path
from evaluation.runner import evaluate_task
from tests.evaluation.test_load import DOCS, QUERIES, write_task
from tests.evaluation.test_runner import CONFIG
from tests.evaluation.toy import toy_corpus


def evaluate(corpus, reports: Path):
    return evaluate_task(corpus, CONFIG, models_dir=reports / "models", reports_dir=reports)


def test_labels_are_read_and_missing_labels_are_noted(tmp_path: Path) -> None:
    labelled = [{**q, "needs_context": flag} for q, flag in zip(QUERIES, (True, False), strict=True)]
    corpus = load_corpus(write_task(tmp_path / "l", DOCS, labelled), name="l")
    assert corpus.needs_context.tolist() == [True, False] and corpus.n_needs_context == 1 and corpus.notes == []
    plain = load_corpus(write_task(tmp_path / "p", DOCS, QUERIES), name="p")
    assert plain.needs_context is None and plain.n_needs_context is None
    assert any("no context-necessity labels" in note for note in plain.notes)
    assert corpus.fingerprint() != dataclasses.replace(corpus, needs_context=np.array([True, True])).fingerprint()
    assert dataclasses.replace(corpus, needs_context=None).fingerprint() == plain.fingerprint()
    broken = [{**QUERIES[0], "needs_context": True}, {**QUERIES[1], "needs_context": None}]
    with pytest.raises(CorpusError, match=r"queries/test-00000-of-00001.parquet: row 1: needs_context is None"):
        load_corpus(write_task(tmp_path / "b", DOCS, broken), name="b")


def test_every_metric_and_comparison_is_repeated_on_the_subset(tmp_path: Path) -> None:
    mask = np.array([True, False, True])
    corpus = dataclasses.replace(toy_corpus(), needs_context=mask)
    evaluation_corpus_documents = corpus.query_documents
    evaluation = evaluate(corpus, tmp_path)
    assert evaluation.n_needs_context == 2
    b = CONFIG.bootstrap
    for run in evaluation.runs:
        per_query = pq.read_table(per_query_path(tmp_path, "toy", run.system)).to_pydict()
        subset = run.subset_metrics["needs_context"]
        assert set(subset) == set(run.metrics)
        for metric, summary in subset.items():
            values = np.array(per_query[metric])[mask]
            assert summary.n_queries == 2
            assert summary.value == pytest.approx(values.mean())
            documents = np.array(evaluation_corpus_documents)[mask]
            expected = summarize(values, documents, b.resamples, b.confidence, b.seed)
            assert summary.n_documents == len(set(documents))
            assert (summary.ci_low, summary.ci_high) == pytest.approx((expected.ci_low, expected.ci_high))
    [everything] = evaluation.comparisons
    [on_subset] = evaluation.subset_comparisons
    assert (everything.subset, everything.n_queries) == ("all", 3)
    assert (on_subset.subset, on_subset.n_queries, on_subset.system_a) == ("needs_context", 2, "bm25")
    per_query = {
        s: np.array(pq.read_table(per_query_path(tmp_path, "toy", s)).column("ndcg@10").to_pylist())[mask]
        for s in ("bm25", "bm25-plain")
    }
    assert on_subset.difference == pytest.approx(per_query["bm25"].mean() - per_query["bm25-plain"].mean())
    stored = from_json(evaluation_path(tmp_path, "toy").read_text())
    assert (
        to_json(stored) == to_json(evaluation)
        and stored.run("bm25").subset_metrics == evaluation.run("bm25").subset_metrics
    )


@pytest.mark.parametrize("mask", [None, np.array([False, False, False])])
def test_no_subset_without_labels_or_without_such_queries(tmp_path: Path, mask) -> None:
    evaluation = evaluate(dataclasses.replace(toy_corpus(), needs_context=mask), tmp_path)
    assert evaluation.n_needs_context == (None if mask is None else 0)
    assert all(run.subset_metrics == {} for run in evaluation.runs) and evaluation.subset_comparisons == []
    assert len(evaluation.comparisons) == 1


def test_older_evaluation_files_still_load(tmp_path: Path) -> None:
    evaluation = evaluate(toy_corpus(), tmp_path)
    raw = json.loads(to_json(evaluation))
    for run in raw["runs"]:
        del run["subset_metrics"]
    del raw["subset_comparisons"], raw["n_needs_context"]
    for comparison in raw["comparisons"]:
        del comparison["subset"]
    old = from_json(json.dumps(raw))
    assert old.n_needs_context is None and old.comparisons[0].subset == "all" and old.runs[0].subset_metrics == {}


def test_subset_numbers_are_verified_against_trec_eval(tmp_path: Path) -> None:
    """The needs_context subset gets its own qrels file; verify.py scores the run files against it."""
    from evaluation.metrics.verify import verify_against_trec_eval

    mask = np.array([True, False, True])
    corpus = dataclasses.replace(toy_corpus(), needs_context=mask)
    evaluation = evaluate(corpus, tmp_path)
    qrels = tmp_path / evaluation.subset_qrels_files["needs_context"]
    assert qrels.name == "qrels.needs_context.trec" and len(qrels.read_text().splitlines()) == 2
    assert verify_against_trec_eval(evaluation, tmp_path) == []
    run = evaluation.run("bm25")
    wrong = dataclasses.replace(run.subset_metrics["needs_context"]["ndcg@10"], value=0.123)
    run.subset_metrics["needs_context"]["ndcg@10"] = wrong
    [problem] = verify_against_trec_eval(evaluation, tmp_path)
    assert "bm25 (needs_context subset): ndcg@10 reported 0.12300000" in problem
    unlabelled = evaluate(toy_corpus(), tmp_path / "plain")
    assert unlabelled.subset_qrels_files == {} and verify_against_trec_eval(unlabelled, tmp_path / "plain") == []
