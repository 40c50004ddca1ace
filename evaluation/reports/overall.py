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
    provenance_blocks,
    reason_text,
    status_text,
    tests_note,
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
from evaluation.reports.ranking import (
    chunk_size_systems,
    headline,
    overall_scores,
    ranked_systems,
    task_scores,
)
from evaluation.reports.reading import overall_reading_parts
from evaluation.results import HEADLINE, TaskEvaluation


def overall_document(
    evaluations: list[TaskEvaluation],
    images: dict[str, str],
    task_links: dict[str, str] | None = None,
    figures: dict[str, str] | None = None,
) -> Document:
    """The report over every task; ``images`` maps ``overview`` / ``chunk_sizes`` to a src,
    ``task_links`` (optional) each task to its own report and ``figures`` (optional, the HTML page) the same keys
    to inline SVG shown instead of the image.

    One section per step, in the report's order."""
    blocks: list[Block] = [
        *overall_answer_blocks(evaluations),  # the recommended pipeline of each task, first
        *report_subsets.reading_blocks(overall_reading_parts(evaluations)),
        *results_blocks(evaluations),
        *not_run_blocks(evaluations),
        *provenance_blocks((e.task, r) for e in evaluations for r in e.runs),
        *comparison_blocks(evaluations),
        *report_subsets.overall_subset_blocks(evaluations),
        *overview_blocks(images, figures or {}),
        *chunk_size_blocks(evaluations, images, figures or {}),
        *per_task_plot_blocks(evaluations, images, figures or {}),
        *task_list_blocks(evaluations, task_links or {}),
    ]
    return Document("ConTEB evaluation", tuple(blocks))


def _systems(evaluations: list[TaskEvaluation]) -> list[str]:
    """Every system, best mean nDCG@10 first, those that ran nowhere last (:mod:`evaluation.reports.ranking`)."""
    return ranked_systems(overall_scores(evaluations))


def _about_results(evaluations: list[TaskEvaluation]) -> Paragraph:
    """How many tasks and systems, and how the figures of the results table read."""
    return Paragraph(
        (
            Span(
                f"{len(evaluations)} task(s), {len(_systems(evaluations))} system(s), best mean first (systems that "
                "did not run last, with why). nDCG@10 with its 95% confidence interval from a bootstrap over "
                "documents (each drawn document brings all its queries); the best system of each task in bold. The "
                "mean is over the tasks a system ran on (compare systems that ran on every task)."
            ),
        )
    )


def _why_not_run(evaluations: list[TaskEvaluation], system: str) -> str:
    """Why ``system`` did not run, per task where it did not (``task: reason``), or a dash."""
    reasons = [
        (e.task, f"{status_text(r.status)}: {reason_text(r)}")
        for e in evaluations
        if (r := e.run(system)) is not None and r.status != "ok"
    ]
    if not reasons:
        return DASH
    if len(evaluations) == 1 or len({why for _, why in reasons}) == 1:
        return reasons[0][1] + ("" if len(evaluations) == 1 else f" (on {', '.join(t for t, _ in reasons)})")
    return "; ".join(f"{task}: {why}" for task, why in reasons)


def results_blocks(evaluations: list[TaskEvaluation]) -> list[Block]:
    """nDCG@10 per task and system (the best of each task bold), the mean over the tasks each system ran on, and
    why a system did not run; rows best mean first, systems that ran nowhere last."""
    systems = _systems(evaluations)
    scores = overall_scores(evaluations)
    best = {e.task: best_formatted(v for v in task_scores(e).values()) for e in evaluations}
    counts = {s: sum(1 for e in evaluations if headline(e.run(s)) is not None) for s in systems}
    best_mean = best_formatted(scores[s] for s in systems if counts[s] == len(evaluations))
    any_not_run = any(r.status != "ok" for e in evaluations for r in e.runs)
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
        mean, complete = scores[system], counts[system] == len(evaluations)
        cells.append(number(format_metric(mean), bold=complete and format_metric(mean) == best_mean))
        cells.append(number(f"{counts[system]}/{len(evaluations)}"))
        if any_not_run:
            cells.append(text(_why_not_run(evaluations, system)))
        rows.append(tuple(cells))
    header = ("System", *(e.task for e in evaluations), "Mean over tasks", "Tasks")
    header += ("Not run: why",) if any_not_run else ()
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
                    "Each tested system against the best cheap baseline of its task, then the configured pairs (late "
                    "chunking vs independent, InSeNT vs late chunking first). "
                    + tests_note("each task's comparisons (one family per task)")
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


OVERVIEW_CAPTION = (
    "nDCG@10 [95% CI over documents] per task (columns) and system (rows, best mean first), coloured by family; the "
    "dashed line is each task's best cheap baseline (its name in bold)."
)


def overview_blocks(images: dict[str, str], figures: dict[str, str]) -> list[Block]:
    """The overview plot, when the caller drew it."""
    if "overview" not in images:
        return []
    return [
        Heading("Overview"),
        Paragraph((Span(OVERVIEW_CAPTION),)),
        Image("nDCG@10 per task and system", images["overview"], "overview", figures.get("overview", "")),
    ]


CHUNK_SIZE_CAPTION = (
    "The figure: one panel per system family (shared axes), each line named at its end; the best cheap baseline "
    "dashed in every panel. The table above holds every number."
)


def chunk_size_blocks(
    evaluations: list[TaskEvaluation], images: dict[str, str], figures: dict[str, str]
) -> list[Block]:
    """nDCG@10 per task and system with the task re-chunked at each size, the plot, and the studies' notes."""
    studied = [e for e in evaluations if e.chunk_sizes]
    blocks: list[Block] = [Heading("Chunk-size robustness")]
    if studied:
        sizes = sorted({c.chunk_size for e in studied for c in e.chunk_sizes}, reverse=True)
        rows = []
        for e in studied:
            for system in chunk_size_systems(e):
                cells = [text(e.task), text(system)]
                for size in sizes:
                    p = next((c for c in e.chunk_sizes if c.system == system and c.chunk_size == size), None)
                    cells.append(number(DASH if p is None else format_metric(p.value)))
                rows.append(tuple(cells))
        blocks.append(Paragraph((Span("nDCG@10 with the task re-chunked at each size (characters)."),)))
        blocks.append(Table("chunk-sizes", ("Task", "System", *(f"{s:,}" for s in sizes)), tuple(rows)))
        if "chunk_sizes" in images:
            blocks.append(Paragraph((Span(CHUNK_SIZE_CAPTION),)))
            svg = figures.get("chunk_sizes", "")
            blocks.append(Image("nDCG@10 vs chunk size", images["chunk_sizes"], "chunk-sizes-figure", svg))
    notes = [f"{e.task}: {e.chunk_size_note}" for e in evaluations if e.chunk_size_note]
    if notes:
        blocks.append(BulletList(tuple((Span(n),) for n in notes)))
    elif not studied:
        blocks.append(Paragraph((Span("No chunk-size study ran."),)))
    return blocks


def per_task_plot_blocks(
    evaluations: list[TaskEvaluation], images: dict[str, str], figures: dict[str, str]
) -> list[Block]:
    """Each task's plots by gold-chunk position and by corpus size, when the caller drew them."""
    per_task = [e for e in evaluations if f"positions/{e.task}" in images or f"scaling/{e.task}" in images]
    if not per_task:
        return []
    blocks: list[Block] = [Heading("nDCG@10 by gold-chunk position and by corpus size")]
    for e in per_task:
        blocks.append(Heading(e.task, 3))
        for kind, alt in (("positions", "by gold-chunk position"), ("scaling", "vs corpus size")):
            key = f"{kind}/{e.task}"
            if key in images:
                blocks.append(Image(f"{e.task}: nDCG@10 {alt}", images[key], f"{kind}-{e.task}", figures.get(key, "")))
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
