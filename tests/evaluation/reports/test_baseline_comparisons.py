"""The comparisons with the best cheap baseline in every report: the task and overall reports (Markdown and HTML),
the needs_context section, the reproduce report, the reading, the Dagster metadata."""

from __future__ import annotations

import pytest

from evaluation.comparisons import BASELINE, TESTED
from evaluation.metrics.stats import adjust_family
from evaluation.reports.html import render_html
from evaluation.reports.markdown import render_markdown
from evaluation.reports.overall import overall_document
from evaluation.reports.paper import PaperComparison
from evaluation.reports.reading import task_reading
from evaluation.reports.reproduce import reproduce_document
from evaluation.reports.task import task_document
from evaluation.results import BEST_BASELINE, NEEDS_CONTEXT, Comparison, Summary, SystemRun, TaskEvaluation
from tests.evaluation.reports.test_report import html_tables

TEST = ("randomization", 10000)
FLOOR = 1 / 10001  # the smallest p of 10,000 random sign vectors: nothing as extreme


def measured(c: Comparison) -> Comparison:
    """``c`` with what the runner measures beside its p: documents (half the queries), the interval and the
    detectable difference."""
    c.n_documents, c.ci_low, c.ci_high, c.mdd, c.p_query = (
        c.n_queries // 2,
        c.difference - 0.03,
        c.difference + 0.03,
        0.05,
        c.p_value,
    )
    return c


def run(system: str, role: str, value: float | None, kind: str = "dense") -> SystemRun:
    if value is None:
        return SystemRun("t", system, kind, "not_run", reason="training asset insent_model missing", role=role)
    summary = Summary(value, value - 0.02, value + 0.02, 50)
    return SystemRun(
        "t", system, kind, "ok", metrics={"ndcg@10": summary}, subset_metrics={NEEDS_CONTEXT: {"ndcg@10": summary}},
        role=role,
    )  # fmt: skip


def evaluation() -> TaskEvaluation:
    runs = [
        run("bm25", BASELINE, 0.84, "bm25"),
        run("title-prefix", BASELINE, 0.75),
        run("hybrid", BASELINE, 0.86, "hybrid"),
        run("late-chunking", TESTED, 0.63),
        run("late-chunking-title", TESTED, 0.88),
        run("insent", TESTED, None),
    ]
    candidates = {"bm25": 0.84, "title-prefix": 0.75, "hybrid": 0.86}
    on_subset = {"bm25": 0.69, "title-prefix": 0.72, "hybrid": 0.70}
    best = dict(plan=BEST_BASELINE, baselines=candidates)
    comparisons = [
        measured(Comparison("t", "late-chunking", "hybrid", "ndcg@10", 0.63, 0.86, -0.23, FLOOR, 50, *TEST, **best)),
        measured(
            Comparison("t", "late-chunking-title", "hybrid", "ndcg@10", 0.88, 0.86, 0.02, 0.4321, 50, *TEST, **best)
        ),
        measured(Comparison("t", "late-chunking", "independent", "ndcg@10", 0.63, 0.74, -0.11, 0.001, 50, *TEST)),
    ]
    subset = [
        measured(Comparison("t", "late-chunking", "title-prefix", "ndcg@10", 0.49, 0.72, -0.23, 2e-4, 20, *TEST,
                          subset=NEEDS_CONTEXT, plan=BEST_BASELINE, baselines=on_subset)),
    ]  # fmt: skip
    adjust_family(comparisons + subset)  # Holm over the 4: 4e-04, 0.002, 0.4321 (all queries); 6e-04 (subset)
    return TaskEvaluation(
        task="t", source="s", split="test", n_documents=5, n_chunks=50, n_queries=50, runs=runs,
        comparisons=comparisons, subset_comparisons=subset, n_needs_context=20,
    )  # fmt: skip


def test_task_report_shows_each_tested_system_against_the_best_baseline():
    e = evaluation()
    document = task_document(e, {})
    markdown, html = render_markdown(document), render_html(document)
    for page in (markdown, html):
        assert "best by ndcg@10 on the same queries it is tested on" in page
        assert "can only make the comparison harder for the tested system" in page
        assert "insent vs the best cheap baseline: not tested (not run)" in page
    tables = html_tables(html)
    rows = tables["baseline-comparisons"][1:]
    assert [(r[0][0], r[1]) for r in rows] == [  # the best tested system first
        ("late-chunking-title", ("hybrid", True)),
        ("late-chunking", ("hybrid", True)),
    ]
    header = [cell for cell, _ in tables["baseline-comparisons"][0]]
    assert header[3:10] == [
        "Mean (tested / baseline)",
        "Δ (tested − baseline) [95% CI over documents]", "p (Holm-adjusted)", "p (documents, unadjusted)",
        "Queries (documents)", "Detectable Δ (80% power)", "Verdict (adjusted p < 0.05)",
    ]  # fmt: skip
    assert header[-1] == "Query-level p (queries as units, secondary)"
    # a negative difference with a small adjusted p reads "significantly worse", never a bare "yes"
    assert rows[1][3:10] == [
        ("0.630 / 0.860", False),
        ("-0.230 [-0.260, -0.200]", False), ("≤ 4.0e-04", True), ("≤ 1.0e-04", False), ("50 (25)", False),
        ("±0.050", False), ("significantly worse", True),
    ]  # fmt: skip
    assert rows[0][9] == ("no measurable difference", False)
    assert not any(cell in {"yes", "no", "yes, worse", "yes, better"} for row in rows for cell, _ in row)
    assert rows[1][10][0] == "bm25 0.840, title-prefix 0.750, hybrid 0.860"
    # The configured pairs stay in their own table, without the best-baseline rows.
    assert [(r[0][0], r[1][0]) for r in tables["comparisons"][1:]] == [("late-chunking", "independent")]
    # On the queries that need context: the best baseline of those queries.
    subset_rows = tables["baseline-comparisons-needs_context"][1:]
    assert [(r[0][0], r[1][0], r[7][0]) for r in subset_rows] == [("late-chunking", "title-prefix", "20 (10)")]
    assert "bm25 0.690, title-prefix 0.720, hybrid 0.700" in markdown


def test_overall_and_reproduce_reports_and_the_reading():
    e = evaluation()
    overall = render_html(overall_document([e], {}))
    rows = html_tables(overall)["baseline-comparisons"][1:]
    assert [(r[0][0], r[1][0], r[2][0]) for r in rows] == [
        ("t", "late-chunking-title", "hybrid"),
        ("t", "late-chunking", "hybrid"),
    ]
    assert "t: insent vs the best cheap baseline: not tested (not run)" in overall
    reproduce = render_markdown(
        reproduce_document(PaperComparison("t", "test", subsets={NEEDS_CONTEXT: 20}), e, [], {})
    )
    assert "## Against the best cheap baseline" in reproduce and "On the 20 queries that need context" in reproduce
    assert "| late-chunking | **title-prefix** |" in reproduce
    reading = " ".join(task_reading(e))
    assert (
        "Contextual systems vs the cheap baselines: late-chunking vs the best cheap baseline (hybrid) -0.230 "
        "[-0.260, -0.200] (adjusted p ≤ 4.0e-04, 50 queries of 25 documents): significantly worse." in task_reading(e)
    )
    task_md = render_markdown(task_document(e, {}))
    assert (
        "| late-chunking vs the best cheap baseline (hybrid) | -0.230 [-0.260, -0.200] | **≤ 4.0e-04** | 50 (25) | "
        "±0.050 | **significantly worse** |" in task_md
    )
    assert "late-chunking vs independent -0.110" in reading


def test_untested_when_no_baseline_ran():
    e = evaluation()
    for r in e.runs:
        if r.role == BASELINE:
            r.status, r.reason = "failed", "boom"
    e.comparisons = [c for c in e.comparisons if c.plan != BEST_BASELINE]
    markdown = render_markdown(task_document(e, {}))
    assert "late-chunking vs the best cheap baseline: not tested (no cheap baseline ran)" in markdown


def test_dagster_metadata_keys():
    from assets.evaluation import run_metadata

    metadata = run_metadata(evaluation())
    assert metadata["p_value/late-chunking_vs_best_baseline"].value == pytest.approx(FLOOR)  # unadjusted
    assert metadata["p_adjusted/late-chunking_vs_best_baseline"].value == pytest.approx(4 * FLOOR)  # what counts
    assert metadata["verdict/late-chunking_vs_best_baseline"].value == "significantly worse"
    assert metadata["verdict/late-chunking-title_vs_best_baseline"].value == "no measurable difference"
    assert metadata["difference/late-chunking-title_vs_best_baseline"].value == pytest.approx(0.02)
    assert metadata["best_baseline"].value == "hybrid"
    assert metadata["p_value/late-chunking_vs_best_baseline/needs_context"].value == pytest.approx(2e-4)
    assert metadata["best_baseline/needs_context"].value == "title-prefix"
    assert metadata["p_value/late-chunking_vs_independent"].value == pytest.approx(0.001)  # configured, as before
