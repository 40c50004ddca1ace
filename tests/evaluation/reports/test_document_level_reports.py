"""Issue 32 in the reports: documents beside queries, intervals over documents, the Holm-adjusted p as the p, the
difference a test set detects, verdicts in words, counts that separate wins from losses (Markdown and HTML)."""

from __future__ import annotations

import numpy as np

from evaluation.metrics.stats import adjust_family, paired, summarize
from evaluation.reports.formatting import format_summary
from evaluation.reports.html import render_html
from evaluation.reports.markdown import render_markdown
from evaluation.reports.overall import overall_document
from evaluation.reports.reading import overall_comparisons, task_reading
from evaluation.reports.significance import (
    format_mdd,
    interval_text,
    p_adjusted_text,
    p_query_text,
    p_unadjusted_text,
)
from evaluation.reports.task import task_document
from evaluation.results import Comparison, Summary, SystemRun, TaskEvaluation
from tests.evaluation.reports.test_report import html_tables

N_DOCUMENTS, PER_DOCUMENT = 12, 5
DOCUMENTS = np.repeat([f"d{j}" for j in range(N_DOCUMENTS)], PER_DOCUMENT)
VERDICT = "Verdict (adjusted p < 0.05)"


def _values(seed: int, shift: float, noise: int = 0) -> np.ndarray:
    """Per-query nDCG@10 with a per-document effect (``seed``: queries of one document move together) and query noise
    (``noise``: its own seed)."""
    by_document = np.repeat(np.random.default_rng(seed).normal(0, 0.15, N_DOCUMENTS), PER_DOCUMENT)
    return np.clip(0.5 + shift + by_document + np.random.default_rng(noise).normal(0, 0.05, len(DOCUMENTS)), 0, 1)


def _measured() -> tuple[TaskEvaluation, dict[str, np.ndarray]]:
    """Three systems on 60 queries of 12 documents, summarised and compared as the runner does: late chunking well
    above BM25 in every document (the same document effects), independent chunks with document effects of their own
    (a query-level test overstates its differences)."""
    values = {"late-chunking": _values(2, 0.2, 1), "independent": _values(1, 0.0, 2), "bm25": _values(2, 0.02, 3)}
    runs = [
        SystemRun("t", name, "dense", "ok", metrics={"ndcg@10": summarize(v, DOCUMENTS, resamples=500)})
        for name, v in values.items()
    ]
    comparisons = []
    for a, b in (("late-chunking", "independent"), ("bm25", "late-chunking"), ("independent", "bm25")):
        test = paired(values[a], values[b], DOCUMENTS, "randomization", 2000, 500)
        comparisons.append(
            Comparison(
                "t", a, b, "ndcg@10", float(values[a].mean()), float(values[b].mean()), test.difference,
                test.p_value, test.n_queries, "randomization", 2000, n_documents=test.n_documents,
                p_query=test.p_query, ci_low=test.ci_low, ci_high=test.ci_high, mdd=test.mdd,
            )
        )  # fmt: skip
    adjust_family(comparisons)
    evaluation = TaskEvaluation("t", "src", "test", N_DOCUMENTS, 40, len(DOCUMENTS), runs=runs, comparisons=comparisons)
    return evaluation, values


def test_a_task_report_shows_documents_intervals_over_documents_adjusted_p_and_the_detectable_difference() -> None:
    evaluation, values = _measured()
    document = task_document(evaluation, {})
    markdown, html = render_markdown(document), render_html(document)
    tables = html_tables(html)
    # the systems: the interval is the cluster bootstrap's, not the one that treats queries as independent
    late = evaluation.run("late-chunking").metrics["ndcg@10"]
    assert late.n_documents == N_DOCUMENTS
    by_queries = summarize(values["late-chunking"], None, resamples=500)
    assert format_summary(late) != format_summary(by_queries)
    systems = {row[0][0]: row for row in tables["systems"][1:]}
    assert tables["systems"][0][3][0] == "nDCG@10 [95% CI over documents]"
    assert systems["late-chunking"][3][0] == format_summary(late) and format_summary(late) in markdown
    # the comparisons: every figure over documents, the adjusted p as the p, the query-level p last and labelled
    header = [cell for cell, _ in tables["comparisons"][0]]
    assert header[3:9] == [
        "Mean A / B",
        "Δ (A − B) [95% CI over documents]", "p (Holm-adjusted)", "p (documents, unadjusted)", "Queries (documents)",
        "Detectable Δ (80% power)",
    ]  # fmt: skip
    assert header[-1] == "Query-level p (queries as units, secondary)"
    markdown_header = next(line for line in markdown.splitlines() if line.startswith("| System A |"))
    assert "| p (Holm-adjusted) | p (documents, unadjusted) | Queries (documents) | Detectable Δ (80% power) |" in (
        markdown_header
    )
    for c, row in zip(evaluation.comparisons, tables["comparisons"][1:], strict=True):
        cells = [cell for cell, _ in row]
        assert cells[3] == f"{c.mean_a:.3f} / {c.mean_b:.3f}"
        assert cells[4] == interval_text(c) and cells[5] == p_adjusted_text(c)
        assert cells[6] == p_unadjusted_text(c) and cells[7] == f"{len(DOCUMENTS)} ({N_DOCUMENTS})"
        assert cells[8] == format_mdd(c.mdd, c.n_documents) and cells[8].startswith("±")
        assert cells[header.index(VERDICT)] == c.direction() and cells[-1] == p_query_text(c)
        assert f"| {cells[4]} | " in markdown and f"| {cells[8]} |" in markdown
    assert "Holm-adjusted over the task's 3 comparisons" in markdown and "bootstrap over documents" in html


def test_a_significant_loss_reads_significantly_worse_never_yes() -> None:
    evaluation, _ = _measured()
    loss = next(c for c in evaluation.comparisons if c.system_a == "bm25")
    assert loss.difference < 0 and loss.significant() and loss.direction() == "significantly worse"
    html = render_html(task_document(evaluation, {}))
    row = next(r for r in html_tables(html)["comparisons"][1:] if r[0][0] == "bm25")
    header = [cell for cell, _ in html_tables(html)["comparisons"][0]]
    assert row[header.index(VERDICT)] == ("significantly worse", True)
    assert not any(cell in {"yes", "no"} for table in html_tables(html).values() for r in table for cell, _ in r)
    assert any(line.endswith(": significantly worse.") and "bm25 vs late-chunking -0." in line for line in (
        task_reading(evaluation)
    ))  # fmt: skip


def _family(ps_and_differences: list[tuple[float, float]]) -> TaskEvaluation:
    comparisons = [
        Comparison(
            "t", f"s{i}", "base", "ndcg@10", 0.5 + d, 0.5, d, p, 100, "randomization", 10000, n_documents=20,
            ci_low=d - 0.03, ci_high=d + 0.03, mdd=0.041, p_query=p / 10,
        )
        for i, (p, d) in enumerate(ps_and_differences)
    ]  # fmt: skip
    adjust_family(comparisons)
    runs = [_scored(name, 0.5) for name in ("base", *(c.system_a for c in comparisons))]
    return TaskEvaluation("t", "src", "test", 20, 80, 100, runs=runs, comparisons=comparisons)


def _scored(system: str, value: float, n: int = 100, documents: int = 20) -> SystemRun:
    return SystemRun("t", system, "dense", "ok", metrics={"ndcg@10": Summary(value, value, value, n, documents)})


def test_holm_turns_a_raw_significance_into_no_measurable_difference() -> None:
    """p = 0.03 alone is significant; in a family of four (0.001, 0.002, 0.03, 0.04) Holm makes it 0.06."""
    evaluation = _family([(0.001, 0.05), (0.002, -0.04), (0.03, 0.02), (0.04, 0.02)])
    raw = evaluation.comparisons[2]
    assert raw.p_value < 0.05 and raw.p_adjusted == 0.06 and not raw.significant()
    html = render_html(task_document(evaluation, {}))
    table = html_tables(html)["comparisons"]
    header = [cell for cell, _ in table[0]]
    row = next(r for r in table[1:] if r[0][0] == "s2")
    assert row[header.index("p (Holm-adjusted)")] == ("0.060", False)
    assert row[header.index("p (documents, unadjusted)")] == ("0.030", False)
    assert row[header.index(VERDICT)] == ("no measurable difference", False)
    line = next(line for line in task_reading(evaluation) if "s2 vs base" in line)
    assert line.endswith(
        "(adjusted p = 0.060, 100 queries of 20 documents): no measurable difference (this test set detects "
        "differences of ±0.041 or more at 80% power)."
    )


def test_the_count_separates_wins_from_losses_and_reads_the_adjusted_p() -> None:
    evaluation = _family([(0.001, 0.05), (0.002, -0.04), (0.03, 0.02), (0.04, 0.02)])
    assert overall_comparisons([evaluation]) == (
        "Of 4 paired comparisons on all queries (the first system against the second; Holm-adjusted p < 0.05, one "
        "family per task): 1 significantly better, 1 significantly worse, 2 with no measurable difference."
    )
    assert "1 significantly better, 1 significantly worse, 2 with no measurable difference" in render_markdown(
        overall_document([evaluation], {})
    )


def test_too_few_documents_is_said_instead_of_a_detectable_difference() -> None:
    """Five documents: no sign-flip p reaches 0.05 (the smallest is 2 / 32), the detectable difference is infinite."""
    few = Comparison(
        "t", "a", "b", "ndcg@10", 0.6, 0.5, 0.1, 0.0625, 25, "randomization", 10000, n_documents=5, p_adjusted=0.0625,
        ci_low=0.0, ci_high=0.2, mdd=float("inf"), p_query=0.001,
    )  # fmt: skip
    runs = [_scored("a", 0.6, 25, 5), _scored("b", 0.5, 25, 5)]
    evaluation = TaskEvaluation("t", "src", "test", 5, 20, 25, runs=runs, comparisons=[few])
    assert task_reading(evaluation)[-1].endswith(
        "no measurable difference (5 documents: too few for any difference to reach p < 0.05)."
    )
    table = html_tables(render_html(task_document(evaluation, {})))["comparisons"]
    header = [cell for cell, _ in table[0]]
    assert table[1][header.index("Detectable Δ (80% power)")][0] == "none (5 documents)"
    assert table[1][header.index("Queries (documents)")][0] == "25 (5)"
