"""Readings generated from hand-built evaluations (evaluation/reports/reading.py)."""

from __future__ import annotations

from evaluation.reports.reading import overall_reading, task_reading
from evaluation.results import Comparison, Summary, SystemRun, TaskEvaluation

TEST = ("randomization", 1000)


def run(system: str, value: float, subset: float | None = None, context: str | None = None, **details) -> SystemRun:
    kind = "bm25" if system.startswith("bm25") else "dense"
    if context is not None:
        details["context"] = context
    result = SystemRun(
        "t", system, kind, "ok", metrics={"ndcg@10": Summary(value, value - 0.02, value + 0.02, 200)}, details=details
    )
    if subset is not None:
        result.subset_metrics = {"needs_context": {"ndcg@10": Summary(subset, subset - 0.05, subset + 0.05, 50)}}
    return result


def evaluation(runs: list[SystemRun], comparisons=(), needs: int | None = 50, subset_comparisons=()) -> TaskEvaluation:
    return TaskEvaluation(
        "t", "src", "test", n_documents=40, n_chunks=400, n_queries=200, runs=runs,
        comparisons=list(comparisons), subset_comparisons=list(subset_comparisons), n_needs_context=needs,
    )  # fmt: skip


def comparison(a: str, b: str, diff: float, p: float, n: int = 200, subset: str = "all") -> Comparison:
    return Comparison("t", a, b, "ndcg@10", 0.5 + diff, 0.5, diff, p, n, *TEST, subset=subset)


UNTRAINED_LONG = {"model": "offline-minilm", "max_length": 512, "windows": 100, "trained": None}


def test_best_system_significance_and_the_needs_context_subset() -> None:
    e = evaluation(
        [
            run("bm25", 0.61, 0.40),
            run("independent", 0.744, 0.628, context="independent"),
            run("late-chunking", 0.625, 0.529, context="late", **UNTRAINED_LONG),
        ],
        [comparison("late-chunking", "independent", -0.119, 1e-5), comparison("independent", "bm25", 0.134, 0.2)],
        subset_comparisons=[comparison("late-chunking", "independent", -0.099, 0.03, 50, "needs_context")],
    )
    sentences = task_reading(e)
    assert sentences[0] == (
        "Best system: independent, nDCG@10 0.744 [0.724, 0.764] over 200 queries; next late-chunking 0.625 "
        "(outside its CI)."
    )
    assert sentences[1] == (
        "Significant differences (p < 0.05): late-chunking vs independent -0.119 (p = 1.0e-05, 200 queries)."
    )
    assert sentences[2] == "Not significant: independent vs bm25 +0.134 (p = 0.200, 200 queries)."
    assert sentences[3] == "50 of 200 queries (25%) need context."
    assert sentences[4] == (
        "On them the best is independent with nDCG@10 0.628 [0.578, 0.678]; independent 0.628 (all queries 0.744), "
        "late-chunking 0.529 (all queries 0.625), bm25 0.400 (all queries 0.610)."
    )
    assert sentences[5].startswith("Significant differences on them (p < 0.05): late-chunking vs independent -0.099")


def test_late_chunking_loss_names_the_causes_that_apply() -> None:
    late = run("late-chunking", 0.625, context="late", **UNTRAINED_LONG)
    anchored = run("late-chunking-anchored", 0.70, context="late", window_policy="anchored")
    [loss] = [
        s
        for s in task_reading(evaluation([run("independent", 0.744), late, anchored]))
        if s.startswith("late-chunking loses")
    ]
    assert loss.startswith("late-chunking loses to independent (0.625 vs 0.744); known causes that apply: ")
    assert "longer than the 512-token window (2.5 windows per document on average)" in loss
    assert "plain windows lose the document's head" in loss and "(late-chunking-anchored) score 0.700" in loss
    assert "not trained for late chunking" in loss
    # The anchored run does not lose (0.700 < 0.744 but it is anchored, trained facts unknown): its own causes
    # leave the plain-window one out.
    [anchored_loss] = [s for s in task_reading(evaluation([run("independent", 0.744), anchored])) if "loses" in s]
    assert "plain windows" not in anchored_loss and "not trained" not in anchored_loss


def test_causes_that_do_not_apply_are_left_out_or_ruled_out() -> None:
    one_window = {"model": "m", "max_length": 8192, "windows": 40, "trained": "insent_model"}
    late = run("insent", 0.70, context="late", **one_window)
    [loss] = [s for s in task_reading(evaluation([run("independent", 0.744), late])) if "loses" in s]
    assert "every document fit in one 8,192-token window, so document length is not the cause" in loss
    assert "not trained" not in loss and "no anchored run to compare" in loss
    unknown = run("late-chunking", 0.60, context="late")  # nothing recorded (an older evaluation)
    [loss] = [s for s in task_reading(evaluation([run("independent", 0.744), unknown])) if "loses" in s]
    assert "windows per document were not recorded" in loss and "not trained" not in loss
    # A late-chunking run that wins has no loss sentence; neither has one without a baseline.
    assert not [s for s in task_reading(evaluation([run("independent", 0.5), unknown])) if "loses" in s]
    assert not [s for s in task_reading(evaluation([run("bm25", 0.9), unknown])) if "loses" in s]


def test_unlabelled_empty_and_untested_tasks_say_so() -> None:
    sentences = task_reading(evaluation([run("bm25", 0.5)], needs=None))
    assert "No paired comparison was run." in sentences
    assert "The queries carry no context-necessity labels, so the needs_context subset is not reported." in sentences
    assert "None of the 200 queries is labelled as needing context." in task_reading(
        evaluation([run("bm25", 0.5)], needs=0)
    )
    failed = SystemRun("t", "bm25", "bm25", "failed", reason="boom")
    assert task_reading(evaluation([failed])) == ["No system ran on t: nothing to read."]
    nothing_significant = task_reading(evaluation([run("a", 0.5), run("b", 0.49)], [comparison("a", "b", 0.01, 0.6)]))
    assert "No difference is significant (p ≥ 0.05): a vs b +0.010 (p = 0.600, 200 queries)." in nothing_significant


def test_overall_reading() -> None:
    first = evaluation(
        [run("independent", 0.744, 0.628), run("late-chunking", 0.625, 0.529, context="late", **UNTRAINED_LONG)],
        [comparison("late-chunking", "independent", -0.119, 1e-5)],
    )
    second = evaluation(
        [run("independent", 0.415), run("late-chunking", 0.353, context="late"), run("bm25", 0.9)], needs=None
    )
    second.task = "covid"
    sentences = overall_reading([first, second])
    assert sentences[0] == (
        "Best system over the 2 task(s): independent, mean nDCG@10 0.580, best on 1 of 2 task(s); next late-chunking "
        "0.489."
    )  # bm25 ran on one task only: not in the mean
    assert sentences[1] == (
        "1 of 1 paired comparisons are significant: t: late-chunking vs independent -0.119 (p = 1.0e-05, 200 queries)."
    )
    assert sentences[2] == "50 of 200 labelled queries need context (t 50/200); unlabelled: covid."
    assert sentences[3] == "Best on those queries: t: independent 0.628."
    assert sentences[4].startswith("t: late-chunking loses to independent (0.625 vs 0.744)")
    assert sentences[5].startswith("covid: late-chunking loses to independent (0.353 vs 0.415)")
    assert overall_reading([]) == ["No task was evaluated: nothing to read."]
    assert "No task carries context-necessity labels" in " ".join(overall_reading([second]))
