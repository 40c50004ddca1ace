"""Readings from hand-built evaluations (evaluation/reports/reading.py): each rule's precondition, both ways."""

from __future__ import annotations

from evaluation.reports.reading import (
    cause_long_documents,
    cause_plain_windows,
    cause_untrained,
    late_versus_baseline,
    lead,
    necessity_share,
    overall_comparisons,
    overall_lead,
    overall_necessity,
    overall_reading,
    overall_subset,
    subset_scores,
    task_reading,
    task_reading_parts,
)
from evaluation.reports.reading_groups import comparison_line, task_groups
from evaluation.results import Comparison, Summary, SystemRun, TaskEvaluation

TEST = ("randomization", 100000)


def run(system: str, value: float, subset: float | None = None, context: str | None = None, **details) -> SystemRun:
    kind = "bm25" if system.startswith("bm25") else "dense"
    if context is not None:
        details["context"] = context
    result = SystemRun(
        "t",
        system,
        kind,
        "ok",
        metrics={"ndcg@10": Summary(value, value - 0.02, value + 0.02, 200, 40)},
        details=details,
    )
    if subset is not None:
        result.subset_metrics = {"needs_context": {"ndcg@10": Summary(subset, subset - 0.05, subset + 0.05, 50)}}
    return result


def evaluation(runs: list[SystemRun], comparisons=(), needs: int | None = 50, subset_comparisons=()) -> TaskEvaluation:
    return TaskEvaluation(
        "t", "src", "test", n_documents=40, n_chunks=400, n_queries=200, runs=runs,
        comparisons=list(comparisons), subset_comparisons=list(subset_comparisons), n_needs_context=needs,
    )  # fmt: skip


def comparison(
    a: str, b: str, diff: float, p: float, n: int = 200, subset: str = "all", metric: str = "ndcg@10"
) -> Comparison:
    """A paired comparison of ``n`` queries from ``n / 5`` documents, its adjusted p ``p`` (the family's adjustment
    is :func:`evaluation.metrics.stats.adjust_family`'s, tested there), its interval ±0.02, detectable ±0.030."""
    return Comparison(
        "t", a, b, metric, 0.5 + diff, 0.5, diff, p, n, *TEST, subset=subset, n_documents=n // 5, p_adjusted=p,
        ci_low=diff - 0.02, ci_high=diff + 0.02, mdd=0.03,
    )  # fmt: skip


UNTRAINED_LONG = {"model": "offline-minilm", "max_length": 512, "windows": 100, "trained": None}
PLAIN = run("late-chunking", 0.625, context="late", **UNTRAINED_LONG)
ANCHORED = run("late-chunking-anchored", 0.70, context="late", window_policy="anchored", trained=None)
TRAINED = run("insent", 0.69, context="late", model="m", trained="insent_model")
INDEPENDENT = run("independent", 0.744, context="independent")


# --- rule 1: the lead ------------------------------------------------------------------------------------------------


def test_lead_says_best_only_when_the_paired_test_finds_it() -> None:
    runs = [run("independent", 0.744), run("late-chunking", 0.625)]
    significant = evaluation(runs, [comparison("late-chunking", "independent", -0.119, 1e-5)])
    assert lead(significant) == (
        "Best system: independent, nDCG@10 0.744 [0.724, 0.764] over 200 queries of 40 documents; next late-chunking "
        "0.625, significantly lower (+0.119 [+0.099, +0.139], adjusted p = 1.0e-05, 200 queries of 40 documents)."
    )
    not_significant = evaluation(runs, [comparison("independent", "late-chunking", 0.119, 0.2)])
    assert lead(not_significant) == (
        "Highest nDCG@10: independent, nDCG@10 0.744 [0.724, 0.764] over 200 queries of 40 documents; next "
        "late-chunking 0.625, no measurable difference (+0.119 [+0.099, +0.139], adjusted p = 0.200, 200 queries of "
        "40 documents; this test set detects differences of ±0.030 or more at 80% power): no system is shown best."
    )
    close = [run("a", 0.50), run("b", 0.49)]
    assert lead(evaluation(close)) == (
        "Highest nDCG@10: a, nDCG@10 0.500 [0.480, 0.520] over 200 queries of 40 documents; next b 0.490 (the CIs "
        "overlap; no paired test of the two was run)."
    )
    assert "(outside the leader's CI; no paired test of the two was run)" in lead(
        evaluation([run("a", 0.6), run("b", 0.5)])
    )
    # A test on another metric, or one in the other direction, shows nothing about nDCG@10's leader.
    other_metric = evaluation(close, [comparison("a", "b", 0.01, 1e-4, metric="map@10")])
    wrong_way = evaluation(close, [comparison("a", "b", -0.01, 1e-4)])
    assert "no paired test" in lead(other_metric) and not lead(wrong_way).startswith("Best system")
    assert (
        lead(evaluation([run("bm25", 0.5)]))
        == "Only system scored: bm25, nDCG@10 0.500 [0.480, 0.520] over 200 queries of 40 documents."
    )


def test_nothing_scored_is_the_whole_reading() -> None:
    failed = SystemRun("t", "bm25", "bm25", "failed", reason="boom")
    assert lead(evaluation([failed])) is None
    assert task_reading(evaluation([failed])) == ["No system ran on t: nothing to read."]


# --- rules 2 and 5: the comparisons ----------------------------------------------------------------------------------


def test_every_comparison_is_one_line_in_its_group() -> None:
    runs = [run("bm25", 0.61), run("independent", 0.744), run("late-chunking", 0.625), TRAINED]
    runs[0].role = "baseline"
    none = evaluation(runs)
    assert task_groups(none) == [] and "No paired comparison was run." in task_reading(none)
    assert "No paired comparison was run on the queries that need context." in task_reading(none)
    tested = evaluation(
        runs,
        [
            comparison("independent", "bm25", 0.134, 0.2),
            comparison("late-chunking", "independent", -0.119, 1e-5),
            comparison("insent", "late-chunking", 0.064, 1e-4),
            comparison("a", "b", 0.01, 0.6),
        ],
        subset_comparisons=[comparison("late-chunking", "independent", -0.099, 0.03, 50, subset="needs_context")],
    )
    groups = task_groups(tested)
    assert [(g.title, [(c.system_a, c.system_b) for c in g.comparisons]) for g in groups] == [
        ("Contextual systems vs the cheap baselines", [("independent", "bm25")]),
        ("Trained vs untrained", [("insent", "late-chunking")]),
        ("Other pairs", [("late-chunking", "independent"), ("a", "b")]),  # significant first
        ("On the queries that need context", [("late-chunking", "independent")]),
    ]
    detects = "this test set detects differences of ±0.030 or more at 80% power"
    assert task_reading(tested)[2:7] == [
        "Contextual systems vs the cheap baselines: independent vs bm25 +0.134 [+0.114, +0.154] (adjusted p = 0.200, "
        f"200 queries of 40 documents): no measurable difference ({detects}).",
        "Trained vs untrained: insent vs late-chunking +0.064 [+0.044, +0.084] (adjusted p = 1.0e-04, 200 queries of "
        "40 documents): significantly better.",
        "Other pairs: late-chunking vs independent -0.119 [-0.139, -0.099] (adjusted p = 1.0e-05, 200 queries of 40 "
        "documents): significantly worse.",
        "Other pairs: a vs b +0.010 [-0.010, +0.030] (adjusted p = 0.600, 200 queries of 40 documents): no measurable "
        f"difference ({detects}).",
        "On the queries that need context: late-chunking vs independent -0.099 [-0.119, -0.079] (adjusted p = 0.030, "
        "50 queries of 10 documents): significantly worse.",
    ]
    assert not any("No paired comparison" in line for line in task_reading(tested))
    # another metric is named; over several tasks, each line names its task
    other = comparison("a", "b", 0.01, 0.6, metric="map@10")
    assert (
        comparison_line(other, with_task=True)
        == "t: a vs b on map@10 +0.010 [-0.010, +0.030] (adjusted p = 0.600, 200 queries of 40 documents): no "
        "measurable difference (this test set detects differences of ±0.030 or more at 80% power)."
    )


# --- rule 3: the share of queries that need context ------------------------------------------------------------------


def test_the_share_is_always_stated_and_an_absent_label_says_why() -> None:
    for needs, expected in (
        (50, "50 of 200 queries (25%) need context."),
        (0, "None of the 200 queries (0%) is labelled as needing context: no query names its document's theme"),
        (None, "The queries carry no context-necessity labels (no needs_context column: a dataset not curated"),
    ):
        e = evaluation([run("bm25", 0.5)], needs=needs)
        assert necessity_share(e).startswith(expected)
        assert necessity_share(e) in task_reading(e)
    assert "subset is not reported" in necessity_share(evaluation([run("bm25", 0.5)], needs=0))


# --- rules 4 and 5: the needs_context subset -------------------------------------------------------------------------


def test_subset_scores_and_tests_only_when_some_queries_need_context() -> None:
    runs = [run("bm25", 0.61, 0.40), run("independent", 0.744, 0.628), run("late-chunking", 0.625, 0.529)]
    labelled = evaluation(runs)
    assert subset_scores(labelled) == (
        "nDCG@10 on them, highest first: independent 0.628 [0.578, 0.678] (all queries 0.744), late-chunking 0.529 "
        "[0.479, 0.579] (all queries 0.625), bm25 0.400 [0.350, 0.450] (all queries 0.610)."
    )
    assert "No paired comparison was run on the queries that need context." in task_reading(labelled)
    tested = evaluation(runs, subset_comparisons=[comparison("late-chunking", "independent", -0.099, 0.03, 50)])
    assert task_reading_parts(tested).opening[1:3] == (necessity_share(tested), subset_scores(tested))
    assert any(
        s.startswith(
            "On the queries that need context: late-chunking vs independent -0.099 [-0.119, -0.079] (adjusted p = "
            "0.030, 50 queries of 10 documents)"
        )
        for s in task_reading(tested)
    )
    # none need context: no subset sentence at all; no system scored on them: no scores, the tests still said
    none_need = evaluation(runs, needs=0)
    assert subset_scores(none_need) is None and not any("need context:" in s for s in task_reading(none_need))
    unscored = evaluation([run("bm25", 0.6)])
    assert subset_scores(
        unscored
    ) is None and "No paired comparison was run on the queries that need context." in task_reading(unscored)


# --- rule 6: late chunking below its baseline, and its causes --------------------------------------------------------


def test_a_loss_only_when_the_paired_test_finds_it() -> None:
    significant = evaluation([INDEPENDENT, PLAIN], [comparison("late-chunking", "independent", -0.119, 1e-5)])
    loss = late_versus_baseline(significant, PLAIN)
    assert loss.startswith(
        "late-chunking loses to independent (0.625 vs 0.744, -0.119 [-0.139, -0.099], adjusted p = 1.0e-05, 200 "
        "queries of 40 documents); causes this report measures: documents are longer than the 512-token window (2.5 "
        "windows per document on average)"
    )
    not_significant = evaluation([INDEPENDENT, PLAIN], [comparison("late-chunking", "independent", -0.119, 0.3)])
    assert late_versus_baseline(not_significant, PLAIN) == (
        "late-chunking scores below independent (0.625 vs 0.744) with no measurable difference (-0.119 [-0.139, "
        "-0.099], adjusted p = 0.300, 200 queries of 40 documents; this test set detects differences of ±0.030 or more "
        "at 80% power): no loss to explain."
    )
    untested = late_versus_baseline(evaluation([INDEPENDENT, PLAIN]), PLAIN)
    assert untested.endswith("no paired test of the two was run: no loss is claimed and no cause named.")
    assert "causes" not in untested and "windows" not in untested
    # no sentence: the late run scores above its baseline, has no baseline, or is not a late-chunking run
    assert late_versus_baseline(evaluation([run("independent", 0.5), PLAIN]), PLAIN) is None
    assert late_versus_baseline(evaluation([run("bm25", 0.9), PLAIN]), PLAIN) is None
    assert late_versus_baseline(significant, INDEPENDENT) is None


def test_cause_long_documents() -> None:
    e = evaluation([INDEPENDENT, PLAIN])
    named, _ = cause_long_documents(e, PLAIN)
    assert named.startswith("documents are longer than the 512-token window (2.5 windows per document")
    one_window = run("insent", 0.7, context="late", max_length=8192, windows=40)
    assert cause_long_documents(e, one_window) == (
        "every document fit in one 8,192-token window, so document length is not the cause",
        None,
    )
    assert cause_long_documents(e, run("late-chunking", 0.6, context="late")) == (
        None,
        "long documents (windows per document were not recorded)",
    )


def test_cause_plain_windows_needs_a_significant_anchored_gain_in_the_same_report() -> None:
    shown = evaluation(
        [INDEPENDENT, PLAIN, ANCHORED], [comparison("late-chunking-anchored", "late-chunking", 0.075, 1e-4)]
    )
    assert cause_plain_windows(shown, PLAIN) == (
        "plain windows lose the document's head after the first window: late-chunking-anchored scores above it "
        "(+0.075 [+0.055, +0.095], adjusted p = 1.0e-04, 200 queries of 40 documents)",
        None,
    )
    # the same comparison written the other way round counts the same
    reversed_order = evaluation(
        [PLAIN, ANCHORED], [comparison("late-chunking", "late-chunking-anchored", -0.075, 1e-4)]
    )
    assert cause_plain_windows(reversed_order, PLAIN)[0] is not None
    not_significant = evaluation([PLAIN, ANCHORED], [comparison("late-chunking-anchored", "late-chunking", 0.01, 0.4)])
    assert cause_plain_windows(not_significant, PLAIN) == (
        None,
        "plain windows (late-chunking-anchored vs late-chunking: no measurable difference (+0.010 [-0.010, +0.030], "
        "adjusted p = 0.400, 200 queries of 40 documents; this test set detects differences of ±0.030 or more at 80% "
        "power))",
    )
    anchored_lower = evaluation([PLAIN, ANCHORED], [comparison("late-chunking-anchored", "late-chunking", -0.02, 0.01)])
    assert cause_plain_windows(anchored_lower, PLAIN) == (
        None,
        "plain windows (late-chunking-anchored vs late-chunking -0.020 [-0.040, +0.000], adjusted p = 0.010, 200 "
        "queries of 40 documents: significantly lower)",
    )
    assert cause_plain_windows(evaluation([PLAIN, ANCHORED]), PLAIN) == (
        None,
        "plain windows (no paired comparison of an anchored run with it)",
    )
    assert cause_plain_windows(shown, ANCHORED) == (None, None)  # an anchored run: the rule does not apply


def test_cause_untrained_needs_a_significant_training_gain_in_the_same_report() -> None:
    shown = evaluation([PLAIN, TRAINED], [comparison("insent", "late-chunking", 0.064, 1e-4)])
    assert cause_untrained(shown, PLAIN) == (
        "the model is not trained for late chunking (no InSeNT): insent scores above it (+0.064 [+0.044, +0.084], "
        "adjusted p = 1.0e-04, 200 queries of 40 documents)",
        None,
    )
    not_significant = evaluation([PLAIN, TRAINED], [comparison("insent", "late-chunking", 0.01, 0.5)])
    assert cause_untrained(not_significant, PLAIN)[0] is None
    assert "no measurable difference" in cause_untrained(not_significant, PLAIN)[1]
    assert cause_untrained(evaluation([PLAIN, TRAINED]), PLAIN) == (
        None,
        "the untrained model (no paired comparison of a trained late-chunking model with it)",
    )
    assert cause_untrained(shown, TRAINED) == (None, None)  # a trained model
    assert cause_untrained(shown, run("late-chunking", 0.6, context="late")) == (None, None)  # not recorded


def test_a_loss_names_the_measured_causes_and_lists_the_others() -> None:
    e = evaluation(
        [INDEPENDENT, PLAIN, ANCHORED, TRAINED],
        [
            comparison("late-chunking", "independent", -0.119, 1e-5),
            comparison("late-chunking-anchored", "late-chunking", 0.075, 1e-4),
            comparison("insent", "late-chunking", 0.01, 0.5),
        ],
    )
    loss = late_versus_baseline(e, PLAIN)
    measured, _, not_shown = loss.partition("; not shown by this report: ")
    assert "longer than the 512-token window" in measured and "plain windows lose the document's head" in measured
    assert "not trained" not in measured and not_shown.startswith("the untrained model (insent vs late-chunking")
    nothing = evaluation([INDEPENDENT, PLAIN], [comparison("late-chunking", "independent", -0.119, 1e-5)])
    assert "plain windows (no paired comparison of an anchored run with it)" in late_versus_baseline(nothing, PLAIN)


# --- the overall reading ---------------------------------------------------------------------------------------------


def _two_tasks() -> list[TaskEvaluation]:
    first = evaluation(
        [run("independent", 0.744, 0.628), run("late-chunking", 0.625, 0.529, context="late", **UNTRAINED_LONG)],
        [comparison("late-chunking", "independent", -0.119, 1e-5)],
    )
    second = evaluation(
        [run("independent", 0.415), run("late-chunking", 0.353, context="late"), run("bm25", 0.9)],
        [comparison("late-chunking", "independent", -0.062, 0.08)],
        needs=None,
    )
    second.task = "covid"
    for c in second.comparisons:
        c.task = "covid"
    return [first, second]


def test_overall_reading() -> None:
    first, second = _two_tasks()
    assert overall_lead([first, second]) == (
        "Highest mean nDCG@10 over the 2 task(s): independent 0.580, highest on 1 of 2 task(s); next late-chunking "
        "0.489 (a mean over tasks has no paired test: each task's reading tests its systems)."
    )  # bm25 ran on one task only: not in the mean
    assert overall_comparisons([first, second]) == (
        "Of 2 paired comparisons on all queries (the first system against the second; Holm-adjusted p < 0.05, one "
        "family per task): 0 significantly better, 1 significantly worse, 1 with no measurable difference."
    )
    assert overall_comparisons([evaluation([run("bm25", 0.5)])]) == "No paired comparison was run."
    assert overall_necessity([first, second]).startswith(
        "50 of 200 labelled queries (25%) need context (t 50/200); unlabelled: covid (no needs_context column"
    )
    assert "none labelled in t" in overall_necessity([evaluation([run("bm25", 0.5)], needs=0)])
    assert overall_necessity([second]).startswith("No task carries context-necessity labels (no needs_context column")
    assert overall_subset([first, second]).endswith("t: independent 0.628.")
    assert overall_subset([second]) is None
    sentences = overall_reading([first, second])
    assert sentences[:4] == [
        overall_lead([first, second]),
        overall_comparisons([first, second]),
        overall_necessity([first, second]),
        overall_subset([first, second]),
    ]
    assert sentences[4:6] == [  # every comparison of every task, one line each, naming its task
        "Other pairs: t: late-chunking vs independent -0.119 [-0.139, -0.099] (adjusted p = 1.0e-05, 200 queries of 40 "
        "documents): significantly worse.",
        "Other pairs: covid: late-chunking vs independent -0.062 [-0.082, -0.042] (adjusted p = 0.080, 200 queries of "
        "40 documents): no measurable difference (this test set detects differences of ±0.030 or more at 80% power).",
    ]
    assert sentences[6].startswith("t: late-chunking loses to independent (0.625 vs 0.744")
    assert sentences[7].startswith(
        "covid: late-chunking scores below independent (0.353 vs 0.415) with no measurable difference"
    )
    assert overall_reading([]) == ["No task was evaluated: nothing to read."]
    no_common = evaluation([run("bm25", 0.5)])
    other = evaluation([run("independent", 0.5)])
    assert overall_lead([no_common, other]) == "No system ran on every task, so no mean over tasks is compared."
