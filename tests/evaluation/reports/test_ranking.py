"""The one ordering of systems in the reports (best score first, unscored last) and the one family of a system."""

from __future__ import annotations

import math

from evaluation.config import default_systems
from evaluation.reports.ranking import (
    FAMILIES,
    FAMILY_COLORS,
    best_cheap_baseline,
    by_score,
    overall_scores,
    ranked_runs,
    ranked_systems,
    run_family,
)
from evaluation.results import BEST_BASELINE, PROVENANCE_RECORDED, Comparison, Summary, SystemRun, TaskEvaluation


def _run(task: str, system: str, value: float | None, status: str = "ok") -> SystemRun:
    metrics = {"ndcg@10": Summary(value, value, value, 10)} if value is not None else {}
    return SystemRun(task, system, "dense", status, metrics=metrics)  # type: ignore[arg-type]


def test_by_score_is_best_first_with_unscored_last_in_given_order() -> None:
    scores = {"a": 0.5, "b": None, "c": 0.9, "d": math.nan, "e": 0.5, "f": 0.7}
    assert by_score(scores, scores.get) == ["c", "f", "a", "e", "b", "d"]  # ties keep their order
    assert by_score([], lambda _: 1.0) == []


def test_runs_and_systems_rank_by_task_score_and_by_mean_over_tasks() -> None:
    one = TaskEvaluation("one", "s", "test", 1, 1, 1)
    one.runs = [_run("one", "bm25", 0.4), _run("one", "insent", None, "not_run"), _run("one", "late", 0.6)]
    two = TaskEvaluation("two", "s", "test", 1, 1, 1)
    two.runs = [_run("two", "bm25", 0.9), _run("two", "insent", None, "failed"), _run("two", "late", 0.5)]
    assert [r.system for r in ranked_runs(one)] == ["late", "bm25", "insent"]
    scores = overall_scores([one, two])
    assert scores == {"bm25": 0.65, "insent": None, "late": 0.55}
    assert ranked_systems(scores) == ["bm25", "late", "insent"]


def test_every_default_system_has_a_family_as_the_runner_records_it() -> None:
    expected = {
        "bm25": "lexical", "bm25-subword": "lexical", "bm25-title": "lexical",
        "independent": "dense", "title-prefix": "dense",
        "late-chunking": "contextual", "late-chunking-anchored": "contextual", "late-chunking-title": "contextual",
        "late-chunking-anchored-title": "contextual", "contextual": "contextual",
        "insent": "trained", "finetune-control": "trained",
        "hybrid": "fusion", "hybrid-title": "fusion",
    }  # fmt: skip
    families = {}
    for system in default_systems():
        details = {"context": getattr(system, "context", None), "trained": getattr(system, "trained", None)}
        families[system.name] = run_family(SystemRun("t", system.name, system.kind, "ok", details=details))
    assert families == expected
    # a model folder trained here (the reproduce experiment's): its recorded training documents say so
    folder = SystemRun(
        "t", "insent-anchored", "dense", "ok", details={"context": "late"}, provenance=PROVENANCE_RECORDED
    )
    assert run_family(folder) == "trained"
    assert run_family(SystemRun("t", "fused-insent", "fusion", "ok")) == "fusion"
    assert set(FAMILY_COLORS) == set(FAMILIES) and len(set(FAMILY_COLORS.values())) == len(FAMILIES) == 5


def test_the_best_cheap_baseline_is_the_runners_on_all_queries() -> None:
    evaluation = TaskEvaluation("t", "s", "test", 1, 1, 1)
    assert best_cheap_baseline(evaluation) is None
    test = ("ndcg@10", 0.6, 0.5, 0.1, 0.01, 10, "randomization", 100)
    evaluation.comparisons = [
        Comparison("t", "late", "independent", *test),
        Comparison("t", "late", "bm25-title", *test, plan=BEST_BASELINE),
    ]
    assert best_cheap_baseline(evaluation) == "bm25-title"


def test_the_needs_context_tables_list_the_best_on_the_subset_first() -> None:
    from evaluation.reports.document import Table
    from evaluation.reports.subsets import overall_subset_blocks, task_subset_blocks

    evaluation = TaskEvaluation("t", "s", "test", 1, 1, 10, n_needs_context=4)
    for system, overall, subset in (("bm25", 0.9, 0.3), ("late", 0.5, 0.7), ("title", 0.7, 0.5)):
        run = _run("t", system, overall)
        run.subset_metrics = {"needs_context": {"ndcg@10": Summary(subset, subset, subset, 4)}}
        evaluation.runs.append(run)
    evaluation.runs.append(_run("t", "insent", None, "not_run"))
    for blocks in (task_subset_blocks(evaluation), overall_subset_blocks([evaluation])):
        [table] = [b for b in blocks if isinstance(b, Table) and b.name == "needs-context"]
        names = [row[0].spans[0].text for row in table.rows]
        assert names[:3] == ["late", "title", "bm25"]  # by nDCG@10 on the subset, not on all queries
