"""Report sections for the reading (``evaluation/reports/reading.py``) and the queries that need context.

Contract: builders of blocks of the document model (:mod:`evaluation.reports.document`), called by the
task and overall builders (:mod:`evaluation.reports.task`, :mod:`evaluation.reports.overall`) while
they assemble a :class:`~evaluation.reports.document.Document`, so the Markdown, the HTML page and the
Dagster metadata show the same numbers, formatted by :mod:`evaluation.reports.formatting`. Subset figures
come from ``SystemRun.subset_metrics["needs_context"]`` and ``TaskEvaluation.subset_comparisons``;
an unlabelled task (``n_needs_context is None``) says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from evaluation.reports.blocks import (
    COMPARISON_HEADER,
    TEST_COLUMNS,
    VERDICT_COLUMN,
    baseline_blocks,
    best_formatted,
    comparison_rows,
    configured,
    ordered,
)
from evaluation.reports.document import Block, BulletList, Heading, Paragraph, Span, Table, number, text
from evaluation.reports.formatting import (
    DASH,
    format_metric,
    format_signed,
    format_summary,
    metric_sort_key,
)
from evaluation.reports.ranking import by_score
from evaluation.reports.reading import Reading
from evaluation.reports.reading_groups import ComparisonGroup, against_text
from evaluation.reports.significance import (
    P_ADJUSTED,
    format_mdd,
    interval_text,
    p_adjusted_text,
    sizes_cell,
    sizes_text,
    verdict_cell,
)
from evaluation.results import HEADLINE, NEEDS_CONTEXT, Summary, TaskEvaluation, is_missing

SUBSET_TITLE = "Queries that need context"
RULE = (
    "A query needs context when it names its document's theme while its gold chunk as embedded does not, "
    "or when an LLM judged that the gold chunk alone cannot answer it (the dataset card states the rule)."
)


LATE_TITLE = "Late chunking against its independent-chunk baseline"
READING_HEADER = (
    "Comparison",
    "Δ (A − B) [95% CI over documents]",
    P_ADJUSTED,
    *TEST_COLUMNS[2:],  # queries (documents), detectable difference
    VERDICT_COLUMN,
)
"""The columns of a reading's comparison table; the Δ column names nDCG@10 when every row is on it."""


def _bullets(sentences: Sequence[str]) -> BulletList:
    return BulletList(tuple((Span(sentence),) for sentence in sentences))


def _group_table(group: ComparisonGroup, name: str) -> Table:
    """One row per comparison of ``group`` (a first ``Task`` column over several tasks)."""
    rows = []
    for c in group.comparisons:
        cells = [
            text(against_text(c) + ("" if c.metric == HEADLINE else f" ({c.metric})")),
            number(interval_text(c)),
            number(p_adjusted_text(c), bold=c.significant()),
            number(sizes_cell(c.n_queries, c.n_documents)),
            number(format_mdd(c.mdd, c.n_documents)),
            text(verdict_cell(c), bold=c.significant()),
        ]
        rows.append(tuple([text(c.task), *cells] if group.with_task else cells))
    header = list(READING_HEADER)
    if all(c.metric == HEADLINE for c in group.comparisons):
        header[1] = "Δ nDCG@10 (A − B) [95% CI over documents]"
    return Table(name, ("Task", *header) if group.with_task else tuple(header), tuple(rows))


def reading_blocks(reading: Reading) -> list[Block]:
    """The reading as the opening section of a report: its opening sentences, one small table per group of paired
    comparisons (under its own heading) and the late-chunking sentences."""
    blocks: list[Block] = [Heading("Reading"), _bullets(reading.opening)]
    for number_, group in enumerate(reading.groups, 1):
        blocks += [Heading(group.title, 3), _group_table(group, f"reading-comparisons-{number_}")]
    if reading.late:
        blocks += [Heading(LATE_TITLE, 3), _bullets(reading.late)]
    return blocks


def _value(summary: Summary | None) -> float | None:
    return None if summary is None else summary.value


def subset_documents(evaluation: TaskEvaluation) -> int | None:
    """How many documents the needs_context queries come from (their summaries count them; None: not counted)."""
    return next(
        (
            s.n_documents
            for r in evaluation.runs
            if r.status == "ok" and (s := r.summary(HEADLINE, NEEDS_CONTEXT)) is not None and s.n_documents is not None
        ),
        None,
    )


def needs_context_count(evaluation: TaskEvaluation) -> str:
    """``"1,234"``, or ``"unlabelled"`` when the task's queries carry no labels."""
    return "unlabelled" if evaluation.n_needs_context is None else f"{evaluation.n_needs_context:,}"


def _unlabelled_text(evaluation: TaskEvaluation) -> str | None:
    if evaluation.n_needs_context is None:
        return "The queries carry no context-necessity labels (no needs_context column): the subset is not reported."
    if evaluation.n_needs_context == 0:
        return "No query is labelled as needing context: the subset is not reported."
    return None


def task_subset_blocks(evaluation: TaskEvaluation) -> list[Block]:
    """nDCG@10 on all queries and on the needs_context subset per system, every metric on the subset,
    and the paired tests on the subset."""
    e = evaluation
    blocks: list[Block] = [Heading(SUBSET_TITLE)]
    missing = _unlabelled_text(e)
    if missing:
        return [*blocks, Paragraph((Span(missing),))]
    ok = by_score(  # best on the subset first (the table's own score column)
        (r for r in e.runs if r.status == "ok" and r.subset_metrics.get(NEEDS_CONTEXT)),
        lambda r: _value(r.summary(HEADLINE, NEEDS_CONTEXT)),
    )
    documents = subset_documents(e)
    of_documents = "" if documents is None else f" (from {documents:,} of the {e.n_documents:,} documents)"
    blocks.append(
        Paragraph((Span(f"{e.n_needs_context:,} of {e.n_queries:,} queries{of_documents} need context. {RULE}"),))
    )
    if not ok:
        return [*blocks, Paragraph((Span("No system has results on the subset (evaluate again)."),))]
    best = best_formatted(
        r.subset_metrics[NEEDS_CONTEXT][HEADLINE].value for r in ok if HEADLINE in r.subset_metrics[NEEDS_CONTEXT]
    )
    rows = []
    for r in ok:
        overall, subset = r.metrics.get(HEADLINE), r.subset_metrics[NEEDS_CONTEXT].get(HEADLINE)
        delta = DASH
        if (
            overall is not None
            and subset is not None
            and not is_missing(overall.value)
            and not is_missing(subset.value)
        ):
            delta = format_signed(subset.value - overall.value)
        bold = subset is not None and format_metric(subset.value) == best
        rows.append(
            (text(r.system), number(format_summary(overall)), number(format_summary(subset), bold), number(delta))
        )
    header = (
        "System",
        "nDCG@10, all queries [95% CI over documents]",
        "nDCG@10, need context [95% CI over documents]",
        "Δ (need context − all)",
    )
    blocks.append(Table("needs-context", header, tuple(rows)))

    metrics = sorted({m for r in ok for m in r.subset_metrics[NEEDS_CONTEXT]}, key=metric_sort_key)
    metric_rows = []
    for metric in metrics:
        top = best_formatted(
            r.subset_metrics[NEEDS_CONTEXT][metric].value for r in ok if metric in r.subset_metrics[NEEDS_CONTEXT]
        )
        cells = [text(metric)]
        for r in ok:
            s = r.subset_metrics[NEEDS_CONTEXT].get(metric)
            cells.append(number(format_summary(s), bold=s is not None and format_metric(s.value) == top))
        metric_rows.append(tuple(cells))
    blocks.append(Heading("All metrics on the queries that need context", 3))
    blocks.append(Table("needs-context-metrics", ("Metric", *(r.system for r in ok)), tuple(metric_rows)))
    if e.subset_comparisons:
        blocks.append(Heading("Comparisons on the queries that need context", 3))
        blocks.append(Heading("Against the best cheap baseline on these queries", 4))
        blocks += baseline_blocks([e], NEEDS_CONTEXT)
        pairs = configured(e.subset_comparisons)
        if pairs:
            blocks.append(Heading("Configured pairs on these queries", 4))
            blocks.append(Table("needs-context-comparisons", COMPARISON_HEADER, comparison_rows(pairs, False)))
    return blocks


def overall_subset_blocks(evaluations: Sequence[TaskEvaluation]) -> list[Block]:
    """nDCG@10 on the needs_context subset per task and system, and the mean over tasks."""
    blocks: list[Block] = [Heading(SUBSET_TITLE)]
    labelled = [e for e in evaluations if _unlabelled_text(e) is None]
    if not labelled:
        return [*blocks, Paragraph((Span("No task has queries labelled as needing context."),))]
    blocks.append(
        Paragraph(
            (
                Span(
                    "nDCG@10 [95% CI over documents] on the queries that need context (queries and their documents "
                    f"in each header). {RULE}"
                ),
            )
        )
    )
    systems = ordered(r.system for e in labelled for r in e.runs)
    rows = []
    for system in systems:
        cells = [text(system)]
        values = []
        for e in labelled:
            run = e.run(system)
            s = run.summary(HEADLINE, NEEDS_CONTEXT) if run is not None and run.status == "ok" else None
            top = best_formatted(
                summary.value
                for summary in (r.summary(HEADLINE, NEEDS_CONTEXT) for r in e.runs if r.status == "ok")
                if summary is not None
            )
            cells.append(number(format_summary(s), bold=s is not None and format_metric(s.value) == top))
            if s is not None and not is_missing(s.value):
                values.append(s.value)
        mean = sum(values) / len(values) if values else None
        cells.append(number(format_metric(mean) if values else DASH))
        cells.append(number(f"{len(values)}/{len(labelled)}"))
        rows.append((mean, tuple(cells)))
    header = (
        "System",
        *(f"{e.task} ({sizes_text(e.n_needs_context or 0, subset_documents(e))})" for e in labelled),
        "Mean over tasks",
        "Tasks",
    )
    ranked = tuple(cells for _, cells in by_score(rows, lambda row: row[0]))  # best mean on the subset first
    blocks.append(Table("needs-context", header, ranked))
    unlabelled = [e.task for e in evaluations if e.n_needs_context is None]
    if unlabelled:
        blocks.append(BulletList(((Span(f"Unlabelled (subset not reported): {', '.join(unlabelled)}"),),)))
    return blocks
