"""The report over every task, as a :class:`~evaluation.reports.document.Document`.

Contract: :func:`overall_document` is a pure function of the task evaluations, the image sources the
caller chose and (optionally) a link per task to its own report. Sections, in order: the reading,
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
from evaluation.reports.reading import overall_reading
from evaluation.results import HEADLINE, SIGNIFICANCE_LEVEL, TaskEvaluation, is_missing


def overall_document(
    evaluations: list[TaskEvaluation], images: dict[str, str], task_links: dict[str, str] | None = None
) -> Document:
    """The report over every task; ``images`` maps ``overview`` / ``chunk_sizes`` to a src and
    ``task_links`` (optional) each task to its own report."""
    task_links = task_links or {}
    blocks: list[Block] = [
        *overall_answer_blocks(evaluations),
        *report_subsets.reading_blocks(overall_reading(evaluations)),
    ]
    systems = ordered(r.system for e in evaluations for r in e.runs)
    blocks.append(
        Paragraph(
            (
                Span(
                    f"{len(evaluations)} task(s), {len(systems)} system(s). nDCG@10 with its 95% bootstrap "
                    "confidence interval; the best system of each task in bold. The mean is over the tasks a "
                    "system ran on (compare systems that ran on every task)."
                ),
            )
        )
    )

    blocks.append(Heading("nDCG@10"))
    best: dict[str, str | None] = {}
    for e in evaluations:
        best[e.task] = best_formatted(
            r.metrics[HEADLINE].value for r in e.runs if r.status == "ok" and HEADLINE in r.metrics
        )
    means: dict[str, tuple[float | None, int]] = {}
    for system in systems:
        values = []
        for e in evaluations:
            run = e.run(system)
            if run is not None and run.status == "ok" and HEADLINE in run.metrics:
                values.append(run.metrics[HEADLINE].value)
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
    blocks.append(Table("results", ("System", *(e.task for e in evaluations), "Mean over tasks", "Tasks"), tuple(rows)))

    not_ok = [(e.task, r) for e in evaluations for r in e.runs if r.status != "ok"]
    if not_ok:
        blocks.append(Heading("Systems not run"))
        blocks.append(
            BulletList(
                tuple(
                    (
                        Span(r.system, bold=True),
                        Span(f" on {task} ({status_text(r.status)}): {reason_text(r)}"),
                    )
                    for task, r in not_ok
                )
            )
        )

    blocks += provenance_blocks((e.task, r) for e in evaluations for r in e.runs)

    blocks.append(Heading("Key comparisons"))
    blocks.append(
        Paragraph(
            (
                Span(
                    "Paired two-sided tests on the same queries: each tested system against the best cheap baseline "
                    "of its task, then the configured pairs (late chunking vs independent, InSeNT vs late chunking "
                    f"first); significant when p < {SIGNIFICANCE_LEVEL}."
                ),
            )
        )
    )
    blocks.append(Heading("Against the best cheap baseline", 3))
    blocks += baseline_blocks(evaluations, with_task=True)
    blocks.append(Heading("Configured pairs", 3))
    comparisons = [c for e in evaluations for c in configured(e.comparisons)]
    if comparisons:
        blocks.append(Table("comparisons", ("Task", *COMPARISON_HEADER), comparison_rows(comparisons, True)))
    untested = [f"{e.task}: {line}" for e in evaluations for line in untested_comparisons(e)]
    if untested:
        blocks.append(BulletList(tuple((Span(line),) for line in untested)))
    blocks += report_subsets.overall_subset_blocks(evaluations)

    if "overview" in images:
        blocks.append(Heading("Overview"))
        blocks.append(Image("nDCG@10 per task and system", images["overview"]))

    studied = [e for e in evaluations if e.chunk_sizes]
    blocks.append(Heading("Chunk-size robustness"))
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

    per_task = [e for e in evaluations if f"positions/{e.task}" in images or f"scaling/{e.task}" in images]
    if per_task:
        blocks.append(Heading("nDCG@10 by gold-chunk position and by corpus size"))
        for e in per_task:
            blocks.append(Heading(e.task, 3))
            for kind, alt in (("positions", "by gold-chunk position"), ("scaling", "vs corpus size")):
                if f"{kind}/{e.task}" in images:
                    blocks.append(Image(f"{e.task}: nDCG@10 {alt}", images[f"{kind}/{e.task}"]))

    blocks.append(Heading("Tasks"))
    blocks.append(
        BulletList(
            tuple(
                (
                    Span(e.task, bold=True, href=task_links.get(e.task)),
                    Span(
                        f": {e.n_documents:,} documents, {e.n_chunks:,} chunks, {e.n_queries:,} queries "
                        f"({e.source}, split {e.split})"
                    ),
                )
                for e in evaluations
            )
        )
    )
    return Document("ConTEB evaluation", tuple(blocks))
