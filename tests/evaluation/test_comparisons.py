"""The comparison plan (``evaluation.comparisons``): which systems are cheap baselines, which are tested, and the
best baseline each tested system is compared with, on all queries and on the needs_context subset."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from conteb.names import SystemName
from conteb.schemas import per_query_metrics_schema
from conteb.storage import write_parquet_atomic
from evaluation.comparisons import BASELINE, TESTED, compare_systems, comparison_plan, system_role
from evaluation.config import EvaluationConfig, default_systems
from evaluation.results import BEST_BASELINE, CONFIGURED, NEEDS_CONTEXT, SystemRun, TaskEvaluation, from_json
from evaluation.run_files import evaluation_path, per_query_path
from evaluation.runner import evaluate_task
from tests.evaluation.toy import save_tiny_model, toy_corpus


def test_roles_of_the_default_systems():
    config = EvaluationConfig()
    roles = {s.name: system_role(s, config) for s in default_systems()}
    assert {name for name, role in roles.items() if role == BASELINE} == {
        SystemName.BM25,
        SystemName.BM25_SUBWORD,
        SystemName.BM25_TITLE,
        SystemName.INDEPENDENT,
        SystemName.TITLE_PREFIX,
        SystemName.HYBRID,
        SystemName.HYBRID_TITLE,
    }
    assert {name for name, role in roles.items() if role == TESTED} == {
        SystemName.LATE_CHUNKING,
        SystemName.LATE_CHUNKING_ANCHORED,
        SystemName.LATE_CHUNKING_TITLE,
        SystemName.LATE_CHUNKING_ANCHORED_TITLE,
        SystemName.INSENT,
        SystemName.FINETUNE_CONTROL,
        SystemName.CONTEXTUAL,
    }
    plan = comparison_plan(config)
    assert plan.baselines == tuple(n for n in roles if roles[n] == BASELINE)  # declared order
    assert plan.configured == config.significance.comparisons and plan.metric == "ndcg@10"


def test_roles_follow_the_declaration_not_the_name():
    config = EvaluationConfig(
        systems=[
            {"kind": "bm25", "name": "bm25"},
            {"kind": "dense", "name": "late", "context": "late"},
            {"kind": "dense", "name": "trained-title", "context": "title", "trained": "insent_model"},
            {"kind": "late_interaction", "name": "colbert-alone", "context": "independent"},
            {"kind": "late_interaction", "name": "colbert-late", "context": "late"},
            {"kind": "hybrid", "name": "cheap", "systems": ["bm25", "colbert-alone"]},
            {"kind": "hybrid", "name": "with-late", "systems": ["bm25", "late"]},
            {"kind": "dense", "name": "a-folder", "context": "independent", "model": "/models/mine"},
            {"kind": "dense", "name": "declared", "context": "independent", "model": "/models/mine", "role": "tested"},
            {"kind": "hybrid", "name": "with-declared", "systems": ["bm25", "declared"]},
            {"kind": "dense", "name": "late-baseline", "context": "late", "role": "baseline"},
        ],
        chunk_sizes={"systems": []},
    )
    roles = {s.name: system_role(s, config) for s in config.systems}
    assert roles == {
        "bm25": BASELINE,
        "late": TESTED,
        "trained-title": TESTED,  # a trained model is not a cheap baseline, header or not
        "colbert-alone": BASELINE,
        "colbert-late": TESTED,
        "cheap": BASELINE,
        "with-late": TESTED,  # a hybrid with a tested component is tested
        "a-folder": BASELINE,  # the rule reads the declaration: a folder counts as an untrained model
        "declared": TESTED,  # ... unless the system says otherwise
        "with-declared": TESTED,
        "late-baseline": BASELINE,
    }


# ------------------------------------------------------------------ picked on the queries tested

CONFIG = EvaluationConfig(
    systems=[
        {"kind": "bm25", "name": "words"},
        {"kind": "dense", "name": "title", "context": "title"},
        {"kind": "bm25", "name": "broken", "stemmer": "klingon"},
        {"kind": "dense", "name": "late", "context": "late"},
        {"kind": "dense", "name": "anchored", "context": "late", "window_policy": "anchored"},
    ],
    significance={"resamples": 200, "comparisons": [("late", "title"), ("anchored", "late")]},
    chunk_sizes={"systems": []},
)
QUERIES = ["q0", "q1", "q2", "q3"]
PER_QUERY = {  # nDCG@10 per query; q2 and q3 need context
    "words": [1.0, 1.0, 0.0, 0.0],  # mean 0.5 on all, 0.0 on the subset
    "title": [0.5, 0.5, 0.5, 0.5],  # mean 0.5 on all (a tie with words, declared later), 0.5 on the subset
    "late": [0.0, 0.5, 1.0, 1.0],
    "anchored": [0.0, 0.0, 1.0, 0.5],
}


def test_best_baseline_ties_absent_and_nan():
    plan = comparison_plan(CONFIG)
    assert (plan.baselines, plan.tested) == (("words", "title", "broken"), ("late", "anchored"))
    assert plan.best_baseline({"title": 0.9, "words": 0.8}) == "title"
    assert plan.best_baseline({"title": 0.8, "words": 0.8}) == "words"  # tie: the first declared
    assert plan.best_baseline({"words": float("nan"), "title": 0.1}) == "title"
    assert plan.best_baseline({"late": 0.99, "words": 0.5}) == "words"  # only baselines compete
    assert plan.best_baseline({}) is None
    assert plan.role("late") == TESTED and plan.role("broken") == BASELINE and plan.role("ghost") is None


DOCUMENTS = {"q0": "d0", "q1": "d0", "q2": "d1", "q3": "d1"}


def evaluation_on_disk(reports: Path) -> TaskEvaluation:
    runs = [SystemRun(task="t", system=name, kind="x", status="ok") for name in PER_QUERY]
    runs.append(SystemRun(task="t", system="broken", kind="bm25", status="not_run", reason="unknown stemmer"))
    for name, values in PER_QUERY.items():
        table = pa.table({"query_id": QUERIES, "ndcg@10": values}, schema=per_query_metrics_schema(["ndcg@10"]))
        write_parquet_atomic(table, per_query_path(reports, "t", name))
    return TaskEvaluation(task="t", source="s", split="test", n_documents=2, n_chunks=4, n_queries=4, runs=runs)


def test_each_tested_system_meets_the_best_baseline_of_the_queries_tested(tmp_path: Path):
    evaluation = evaluation_on_disk(tmp_path)
    on_all = compare_systems(evaluation, CONFIG, tmp_path, QUERIES, DOCUMENTS)
    best = [c for c in on_all if c.plan == BEST_BASELINE]
    assert [(c.system_a, c.system_b) for c in best] == [("late", "words"), ("anchored", "words")]  # tie: declared first
    assert best[0].baselines == {"words": 0.5, "title": 0.5}  # the one that did not run is not a candidate
    assert best[0].mean_a == pytest.approx(0.625) and best[0].difference == pytest.approx(0.125)
    # Then the configured pairs.
    assert [(c.system_a, c.system_b, c.plan) for c in on_all[2:]] == [
        ("late", "title", CONFIGURED),
        ("anchored", "late", CONFIGURED),
    ]
    subset = compare_systems(evaluation, CONFIG, tmp_path, ["q2", "q3"], DOCUMENTS, NEEDS_CONTEXT)
    best = [c for c in subset if c.plan == BEST_BASELINE]
    assert [(c.system_a, c.system_b) for c in best] == [("late", "title"), ("anchored", "title")]  # best on these
    assert best[0].baselines == {"words": 0.0, "title": 0.5} and {c.subset for c in subset} == {NEEDS_CONTEXT}
    # (late, title) is both the best-baseline test and a configured pair: tested once.
    assert [(c.system_a, c.system_b) for c in subset if c.plan == CONFIGURED] == [("anchored", "late")]


def test_no_baseline_ran_no_best_baseline_comparison(tmp_path: Path):
    evaluation = evaluation_on_disk(tmp_path)
    for run in evaluation.runs:
        if run.system in ("words", "title"):
            run.status = "failed"
    comparisons = compare_systems(evaluation, CONFIG, tmp_path, QUERIES, DOCUMENTS)
    assert [(c.system_a, c.system_b, c.plan) for c in comparisons] == [("anchored", "late", CONFIGURED)]


def test_the_runner_writes_the_best_baseline_comparisons_to_evaluation_json(tmp_path: Path):
    tiny = str(save_tiny_model(tmp_path / "tiny"))
    config = EvaluationConfig(
        systems=[
            {"kind": "bm25", "name": "bm25"},
            {"kind": "bm25", "name": "plain", "stemmer": None, "stopwords": None},
            {"kind": "hybrid", "name": "hybrid", "systems": ["bm25", "plain"]},
            {"kind": "dense", "name": "late", "context": "late", "model": tiny},
            {"kind": "dense", "name": "insent", "context": "late", "trained": "insent_model"},  # not trained yet
        ],
        bootstrap={"resamples": 100},
        significance={"resamples": 100, "comparisons": []},
        chunk_sizes={"enabled": False, "systems": []},
    )
    corpus = dataclasses.replace(toy_corpus(), needs_context=np.array([True, False, True]))
    evaluation = evaluate_task(corpus, config, models_dir=tmp_path / "models", reports_dir=tmp_path)
    roles = {run.system: run.role for run in evaluation.runs}
    assert roles == {"bm25": BASELINE, "plain": BASELINE, "hybrid": BASELINE, "late": TESTED, "insent": TESTED}
    means = {r.system: r.metrics["ndcg@10"].value for r in evaluation.runs if r.role == BASELINE}
    best = max(means, key=lambda name: (means[name], -list(means).index(name)))
    [versus] = evaluation.comparisons
    assert (versus.system_a, versus.system_b, versus.plan, versus.n_queries) == ("late", best, BEST_BASELINE, 3)
    assert versus.baselines == pytest.approx(means)
    [on_subset] = evaluation.subset_comparisons
    assert (on_subset.system_a, on_subset.subset, on_subset.n_queries) == ("late", NEEDS_CONTEXT, 2)
    written = from_json(evaluation_path(tmp_path, "toy").read_text())
    assert written.comparisons == evaluation.comparisons and written.subset_comparisons == evaluation.subset_comparisons
    assert [run.role for run in written.runs] == [BASELINE, BASELINE, BASELINE, TESTED, TESTED]
    raw = json.loads(evaluation_path(tmp_path, "toy").read_text())
    assert raw["comparisons"][0]["plan"] == BEST_BASELINE and set(raw["comparisons"][0]["baselines"]) == set(means)
