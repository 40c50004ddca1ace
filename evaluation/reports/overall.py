"""The report over every task, as a :class:`~evaluation.reports.document.Document`.

Contract: :func:`overall_document` is a pure function of the task evaluations, the image sources the
caller chose and (optionally) a link per task to its own report. One function per section, listed in order by
:func:`overall_document`: the reading,
nDCG@10 per task and system with the mean over tasks, systems not run, the models' provenance, the
key comparisons (each tested system against its task's best cheap baseline, then the configured pairs),
the queries that need context (:mod:`evaluation.reports.subsets`), the overview plot, the chunk-size study,
the per-task plots, the tasks.
"""

from __future__ import annotations

from evaluation.reports import subsets as report_subsets
from evaluation.reports.answer import overall_answer_blocks
from evaluation.reports.blocks import (
    COMPARISON_HEADER,
    baseline_blocks,
    best_formatted,
    comparison_rows,
    configured,
    ordered,
    provenance_blocks,
    reason_text,
    status_text,
    untested_comparisons,
)
from evaluation.reports.document import (
    Block,
    BulletList,
    Document,
    Heading,
    Image,
    Paragraph,
    Span,
    Table,
    number,
    text,
)
from evaluation.reports.formatting import DASH, format_metric, format_summary
from evaluation.reports.reading import overall_reading_parts
from evaluation.results import HEADLINE, SIGNIFICANCE_LEVEL, TaskEvaluation, is_missing


def overall_document(
    evaluations: list[TaskEvaluation], images: dict[str, str], task_links: dict[str, str] | None = None
) -> Document:
    """The report over every task; ``images`` maps ``overview`` / ``chunk_sizes`` to a src and
    ``task_links`` (optional) each task to its own report.

    One section per step, in the report's order."""
    blocks: list[Block] = [
        *overall_answer_blocks(evaluations),  # the recommended pipeline of each task, first
        *report_subsets.reading_blocks(overall_reading_parts(evaluations)),
        *results_blocks(evaluations),
        *not_run_blocks(evaluations),
        *provenance_blocks((e.task, r) for e in evaluations for r in e.runs),
        *comparison_blocks(evaluations),
        *report_subsets.overall_subset_blocks(evaluations),
        *overview_blocks(images),
        *chunk_size_blocks(evaluations, images),
        *per_task_plot_blocks(evaluations, images),
        *task_list_blocks(evaluations, task_links or {}),
    ]
    return Document("ConTEB evaluation", tuple(blocks))


def _systems(evaluations: list[TaskEvaluation]) -> list[str]:
    return ordered(r.system for e in evaluations for r in e.runs)


def _about_results(evaluations: list[TaskEvaluation]) -> Paragraph:
    """How many tasks and systems, and how the figures of the results table read."""
    return Paragraph(
        (
            Span(
                f"{len(evaluations)} task(s), {len(_systems(evaluations))} system(s). nDCG@10 with its 95% "
                "bootstrap confidence interval; the best system of each task in bold. The mean is over the tasks "
                "a system ran on (compare systems that ran on every task)."
            ),
        )
    )


def _headline(evaluation: TaskEvaluation, system: str) -> float | None:
    """nDCG@10 of ``system``'s ok run on ``evaluation``; ``None`` when it did not run or has none."""
    run = evaluation.run(system)
    return run.metrics[HEADLINE].value if run is not None and run.status == "ok" and HEADLINE in run.metrics else None


def results_blocks(evaluations: list[TaskEvaluation]) -> list[Block]:
    """nDCG@10 per task and system (the best of each task bold) and the mean over the tasks each system ran on."""
    systems = _systems(evaluations)
    best = {
        e.task: best_formatted(r.metrics[HEADLINE].value for r in e.runs if r.status == "ok" and HEADLINE in r.metrics)
        for e in evaluations
    }
    means: dict[str, tuple[float | None, int]] = {}
    for system in systems:
        values = [v for e in evaluations if (v := _headline(e, system)) is not None]
        finite = [v for v in values if not is_missing(v)]
        means[system] = (sum(finite) / len(finite) if finite else None, len(values))
    best_mean = best_formatted(m for m, n in means.values() if n == len(evaluations))
    rows = []
    for system in systems:
        cells = [text(system)]
        for e in evaluations:
            run = e.run(system)
            if run is None:
                cells.append(number(DASH))
            elif run.status != "ok":
                cells.append(text(status_text(run.status)))
            else:
                s = run.metrics.get(HEADLINE)
                cells.append(number(format_summary(s), bold=s is not None and format_metric(s.value) == best[e.task]))
        mean, count = means[system]
        complete = count == len(evaluations)
        cells.append(number(format_metric(mean), bold=complete and format_metric(mean) == best_mean))
        cells.append(number(f"{count}/{len(evaluations)}"))
        rows.append(tuple(cells))
    header = ("System", *(e.task for e in evaluations), "Mean over tasks", "Tasks")
    return [Heading("nDCG@10"), _about_results(evaluations), Table("results", header, tuple(rows))]


def not_run_blocks(evaluations: list[TaskEvaluation]) -> list[Block]:
    """The systems that did not run, per task, with status and reason; none: nothing."""
    not_ok = [(e.task, r) for e in evaluations for r in e.runs if r.status != "ok"]
    if not not_ok:
        return []
    items = tuple(
        (Span(r.system, bold=True), Span(f" on {task} ({status_text(r.status)}): {reason_text(r)}"))
        for task, r in not_ok
    )
    return [Heading("Systems not run"), BulletList(items)]


def comparison_blocks(evaluations: list[TaskEvaluation]) -> list[Block]:
    """The key comparisons: against each task's best cheap baseline, the configured pairs, those not tested."""
    blocks: list[Block] = [
        Heading("Key comparisons"),
        Paragraph(
            (
                Span(
                    "Paired two-sided tests on the same queries: each tested system against the best cheap baseline "
                    "of its task, then the configured pairs (late chunking vs independent, InSeNT vs late chunking "
                    f"first); significant when p < {SIGNIFICANCE_LEVEL}."
                ),
            )
        ),
        Heading("Against the best cheap baseline", 3),
        *baseline_blocks(evaluations, with_task=True),
        Heading("Configured pairs", 3),
    ]
    comparisons = [c for e in evaluations for c in configured(e.comparisons)]
    if comparisons:
        blocks.append(Table("comparisons", ("Task", *COMPARISON_HEADER), comparison_rows(comparisons, True)))
    untested = [f"{e.task}: {line}" for e in evaluations for line in untested_comparisons(e)]
    if untested:
        blocks.append(BulletList(tuple((Span(line),) for line in untested)))
    return blocks


def overview_blocks(images: dict[str, str]) -> list[Block]:
    """The overview plot, when the caller drew it."""
    if "overview" not in images:
        return []
    return [Heading("Overview"), Image("nDCG@10 per task and system", images["overview"])]


def chunk_size_blocks(evaluations: list[TaskEvaluation], images: dict[str, str]) -> list[Block]:
    """nDCG@10 per task and system with the task re-chunked at each size, the plot, and the studies' notes."""
    studied = [e for e in evaluations if e.chunk_sizes]
    blocks: list[Block] = [Heading("Chunk-size robustness")]
    if studied:
        sizes = sorted({c.chunk_size for e in studied for c in e.chunk_sizes}, reverse=True)
        rows = []
        for e in studied:
            for system in ordered(c.system for c in e.chunk_sizes):
                cells = [text(e.task), text(system)]
                for size in sizes:
                    p = next((c for c in e.chunk_sizes if c.system == system and c.chunk_size == size), None)
                    cells.append(number(DASH if p is None else format_metric(p.value)))
                rows.append(tuple(cells))
        blocks.append(Paragraph((Span("nDCG@10 with the task re-chunked at each size (characters)."),)))
        blocks.append(Table("chunk-sizes", ("Task", "System", *(f"{s:,}" for s in sizes)), tuple(rows)))
        if "chunk_sizes" in images:
            blocks.append(Image("nDCG@10 vs chunk size", images["chunk_sizes"]))
    notes = [f"{e.task}: {e.chunk_size_note}" for e in evaluations if e.chunk_size_note]
    if notes:
        blocks.append(BulletList(tuple((Span(n),) for n in notes)))
    elif not studied:
        blocks.append(Paragraph((Span("No chunk-size study ran."),)))
    return blocks


def per_task_plot_blocks(evaluations: list[TaskEvaluation], images: dict[str, str]) -> list[Block]:
    """Each task's plots by gold-chunk position and by corpus size, when the caller drew them."""
    per_task = [e for e in evaluations if f"positions/{e.task}" in images or f"scaling/{e.task}" in images]
    if not per_task:
        return []
    blocks: list[Block] = [Heading("nDCG@10 by gold-chunk position and by corpus size")]
    for e in per_task:
        blocks.append(Heading(e.task, 3))
        for kind, alt in (("positions", "by gold-chunk position"), ("scaling", "vs corpus size")):
            if f"{kind}/{e.task}" in images:
                blocks.append(Image(f"{e.task}: nDCG@10 {alt}", images[f"{kind}/{e.task}"]))
    return blocks


def task_list_blocks(evaluations: list[TaskEvaluation], task_links: dict[str, str]) -> list[Block]:
    """Every task with its counts and source, linked to its own report when ``task_links`` names it."""
    items = tuple(
        (
            Span(e.task, bold=True, href=task_links.get(e.task)),
            Span(
                f": {e.n_documents:,} documents, {e.n_chunks:,} chunks, {e.n_queries:,} queries "
                f"({e.source}, split {e.split})"
            ),
        )
        for e in evaluations
    )
    return [Heading("Tasks"), BulletList(items)]
