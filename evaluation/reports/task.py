"""The report of one task, as a :class:`~evaluation.reports.document.Document`.

Contract: :func:`task_document` is a pure function of one :class:`~evaluation.results.TaskEvaluation`
and the image sources the caller chose (relative paths for the files, ``data:`` URIs for the Dagster
UI). One function per section, listed in order by :func:`task_document`: the header (source, split, corpus
counts), the reading, the systems (nDCG@10 and document nDCG@10
with CIs, costs, provenance), systems not run, the models' provenance, every metric, the
comparisons (each tested system against the best cheap baseline, then the configured pairs), the queries
that need context (:mod:`evaluation.reports.subsets`), nDCG@10 by gold-chunk position, vs corpus size,
the chunk-size study, the notes. Best values are bold
(:func:`evaluation.reports.blocks.best_formatted`).
"""

from __future__ import annotations

from evaluation.reports import subsets as report_subsets
from evaluation.reports.answer import answer_blocks
from evaluation.reports.blocks import (
    COMPARISON_HEADER,
    baseline_blocks,
    best_formatted,
    comparison_rows,
    configured,
    family_size,
    provenance_blocks,
    provenance_cell,
    reason_text,
    status_text,
    tests_note,
    untested_comparisons,
)
from evaluation.reports.document import (
    Block,
    BulletList,
    Cell,
    Document,
    Heading,
    Image,
    Paragraph,
    Span,
    Table,
    number,
    text,
)
from evaluation.reports.formatting import (
    DASH,
    format_ci,
    format_metric,
    format_rate,
    format_seconds,
    format_summary,
    format_tokens,
    format_usd,
    metric_sort_key,
)
from evaluation.reports.ranking import chunk_size_systems, ranked_runs
from evaluation.reports.reading import task_reading_parts
from evaluation.reports.significance import sizes_cell, sizes_text
from evaluation.results import HEADLINE, SystemRun, TaskEvaluation, is_missing


def task_document(evaluation: TaskEvaluation, images: dict[str, str]) -> Document:
    """The report of one task; ``images`` maps ``positions`` / ``scaling`` / ``chunk_sizes`` to a src.

    One section per step, in the report's order: the recommended pipeline first, then the header (source, split,
    counts)."""
    e = evaluation
    blocks: list[Block] = [
        *answer_blocks(e),  # the recommended pipeline: the report leads with the answer
        *header_blocks(e),
        *report_subsets.reading_blocks(task_reading_parts(e)),
        *systems_blocks(e),
        *not_run_blocks(e),
        *provenance_blocks((("", r) for r in e.runs), 3),
        *metrics_blocks(e),
        *comparison_blocks(e),
        *report_subsets.task_subset_blocks(e),
        *position_blocks(e, images),
        *scaling_blocks(e, images),
        *chunk_size_blocks(e, images),
        *notes_blocks(e),
    ]
    return Document(f"ConTEB evaluation: {e.task}", tuple(blocks))


def _ok(evaluation: TaskEvaluation) -> list[SystemRun]:
    """The runs that ran, best nDCG@10 first (:func:`evaluation.reports.ranking.ranked_runs`)."""
    return [r for r in ranked_runs(evaluation) if r.status == "ok"]


def header_blocks(evaluation: TaskEvaluation) -> list[Block]:
    """Where the figures come from (source, split, date) and the corpus counts."""
    e = evaluation
    meta = f"Source: {e.source} · split: {e.split}" + (f" · evaluated {e.created_at}" if e.created_at else "")
    counts = (
        number(f"{e.n_documents:,}"),
        number(f"{e.n_chunks:,}"),
        number(f"{e.n_queries:,}"),
        number(report_subsets.needs_context_count(e)),
    )
    header = ("Documents", "Chunks", "Queries", "Queries that need context")
    return [Paragraph((Span(meta),)), Table("counts", header, (counts,))]


SYSTEMS_HEADER = (
    "System",
    "Kind",
    "Status",
    "nDCG@10 [95% CI over documents]",
    "Document nDCG@10 [95% CI over documents]",
    "Description (or why it did not run)",
    "Provenance",
)
COSTS_HEADER = ("System", "Index (s)", "Documents/s", "Queries (s)", "LLM tokens", "LLM cost (USD)")


def systems_blocks(evaluation: TaskEvaluation) -> list[Block]:
    """Every system, best nDCG@10 first and those that did not run last (their reason in the description cell):
    nDCG@10 and document nDCG@10 with CIs (the best bold), description, provenance; then, in their own table (so
    neither scrolls sideways), what each system that ran cost."""
    ok = _ok(evaluation)
    best = best_formatted(r.metrics[HEADLINE].value for r in ok if HEADLINE in r.metrics)
    best_doc = best_formatted(r.document_ndcg10.value for r in ok if r.document_ndcg10 is not None)
    rows: list[tuple[Cell, ...]] = []
    for r in ranked_runs(evaluation):
        headline = r.metrics.get(HEADLINE) if r.status == "ok" else None
        doc = r.document_ndcg10 if r.status == "ok" else None
        rows.append(
            (
                text(r.system),
                text(r.kind),
                text(status_text(r.status)),
                number(format_summary(headline), bold=headline is not None and format_metric(headline.value) == best),
                number(format_summary(doc), bold=doc is not None and format_metric(doc.value) == best_doc),
                text(r.description if r.status == "ok" else f"{status_text(r.status)}: {reason_text(r)}"),
                text(provenance_cell(r)),
            )
        )
    costs = tuple(
        (
            text(r.system),
            number(format_seconds(r.index_seconds)),
            number(format_rate(r.documents_per_second)),
            number(format_seconds(r.query_seconds)),
            number(format_tokens(r.llm_tokens)),
            number(format_usd(r.llm_usd)),
        )
        for r in ok
    )
    cost_blocks: list[Block] = [Heading("Costs", 3), Table("costs", COSTS_HEADER, costs)] if costs else []
    return [
        Heading("Systems"),
        Paragraph(
            (
                Span(
                    "Best nDCG@10 first, systems that did not run last with why. nDCG@10 with its 95% confidence "
                    "interval from a bootstrap over documents (each drawn document brings all its queries); the best "
                    "in bold."
                ),
            )
        ),
        Table("systems", SYSTEMS_HEADER, tuple(rows)),
        *cost_blocks,
    ]


def not_run_blocks(evaluation: TaskEvaluation) -> list[Block]:
    """The systems that did not run, each with its status and reason; none: nothing."""
    not_ok = [r for r in evaluation.runs if r.status != "ok"]
    if not not_ok:
        return []
    items = tuple((Span(r.system, bold=True), Span(f" ({status_text(r.status)}): {reason_text(r)}")) for r in not_ok)
    return [Heading("Systems not run", 3), BulletList(items)]


def metrics_blocks(evaluation: TaskEvaluation) -> list[Block]:
    """Every metric of every ok system (the best of each metric bold)."""
    ok = _ok(evaluation)
    if not ok:
        return [Heading("All metrics"), Paragraph((Span("No system ran on this task."),))]
    metric_rows = []
    for metric in sorted({m for r in ok for m in r.metrics}, key=metric_sort_key):
        top = best_formatted(r.metrics[metric].value for r in ok if metric in r.metrics)
        cells = [text(metric)]
        for r in ok:
            s = r.metrics.get(metric)
            cells.append(number(format_summary(s), bold=s is not None and format_metric(s.value) == top))
        metric_rows.append(tuple(cells))
    return [Heading("All metrics"), Table("metrics", ("Metric", *(r.system for r in ok)), tuple(metric_rows))]


def comparison_blocks(evaluation: TaskEvaluation) -> list[Block]:
    """The paired tests: against the best cheap baseline, then the configured pairs, then those not tested."""
    blocks: list[Block] = [
        Heading("Comparisons"),
        Paragraph((Span(tests_note(f"the task's {family_size(evaluation)} comparisons")),)),
        Heading("Against the best cheap baseline", 3),
        *baseline_blocks([evaluation]),
        Heading("Configured pairs", 3),
    ]
    pairs = configured(evaluation.comparisons)
    if pairs:
        blocks.append(Table("comparisons", COMPARISON_HEADER, comparison_rows(pairs, False)))
    untested = untested_comparisons(evaluation)
    if untested:
        blocks.append(BulletList(tuple((Span(line),) for line in untested)))
    return blocks


def position_blocks(evaluation: TaskEvaluation, images: dict[str, str]) -> list[Block]:
    """nDCG@10 by the position of the gold chunk in its document (table and plot)."""
    blocks: list[Block] = [Heading("nDCG@10 by gold-chunk position")]
    positioned = [r for r in _ok(evaluation) if r.by_position]
    if not positioned:
        return [*blocks, Paragraph((Span("No per-position results."),))]
    blocks.append(
        Paragraph(
            (
                Span(
                    "Queries grouped by the position of their gold chunk in its document (0 = first chunk); nDCG@10 "
                    "[95% CI over documents]."
                ),
            )
        )
    )
    support: dict[int, set[int]] = {}
    documents: dict[int, set[int]] = {}
    for r in positioned:
        for p in r.by_position:
            support.setdefault(p.position, set()).add(p.n_queries)
            if p.n_documents is not None:
                documents.setdefault(p.position, set()).add(p.n_documents)
    rows = []
    for position in sorted(support):
        counts = support[position]
        points = [next((p for p in r.by_position if p.position == position), None) for r in positioned]
        top = best_formatted(p.value for p in points if p is not None)
        docs = max(documents[position]) if position in documents else None
        cells = [number(str(position)), number(sizes_cell(max(counts), docs))]
        for point in points:
            if point is None:
                cells.append(number(DASH))
                continue
            shown = format_ci(point.value, point.ci_low, point.ci_high) + (
                f" (n={point.n_queries})" if len(counts) > 1 else ""
            )
            cells.append(number(shown, bold=format_metric(point.value) == top))
        rows.append(tuple(cells))
    header = ("Position", "Queries (documents)", *(r.system for r in positioned))
    blocks.append(Table("positions", header, tuple(rows)))
    if "positions" in images:
        blocks.append(Image("nDCG@10 by gold-chunk position", images["positions"]))
    return blocks


def scaling_blocks(evaluation: TaskEvaluation, images: dict[str, str]) -> list[Block]:
    """nDCG@10 on random subsets of n documents (mean ± std; table and plot)."""
    blocks: list[Block] = [Heading("nDCG@10 vs corpus size")]
    scaled = [r for r in _ok(evaluation) if r.scaling]
    if not scaled:
        return [*blocks, Paragraph((Span("No scaling results."),))]
    blocks.append(
        Paragraph((Span("Random subsets of n documents (with their queries): mean ± std over the subsets."),))
    )
    rows = []
    for n in sorted({p.n_documents for r in scaled for p in r.scaling}):
        cells = [number(f"{n:,}")]
        for r in scaled:
            scaling = next((p for p in r.scaling if p.n_documents == n), None)
            if scaling is None:
                cells.append(number(DASH))
            else:
                std = "" if is_missing(scaling.std) else f" ± {format_metric(scaling.std)}"
                cells.append(number(format_metric(scaling.value) + std))
        rows.append(tuple(cells))
    blocks.append(Table("scaling", ("Documents", *(r.system for r in scaled)), tuple(rows)))
    if "scaling" in images:
        blocks.append(Image("nDCG@10 vs corpus size", images["scaling"]))
    return blocks


def chunk_size_blocks(evaluation: TaskEvaluation, images: dict[str, str]) -> list[Block]:
    """The task re-chunked at each size: nDCG@10 [95% CI] per system (table and plot), and the study's note. The
    queries and their documents: in the sentence above the table when every size has the same, else a column."""
    e = evaluation
    blocks: list[Block] = [Heading("Chunk-size robustness")]
    if e.chunk_sizes:
        counts = {(c.n_queries, c.n_documents) for c in e.chunk_sizes}
        same = f" over the same {sizes_text(*next(iter(counts)))} at every size" if len(counts) == 1 else ""
        blocks.append(
            Paragraph((Span(f"The task re-chunked at each size (characters); nDCG@10 [95% CI over documents]{same}."),))
        )
        systems = chunk_size_systems(e)
        rows = []
        for size in sorted({c.chunk_size for c in e.chunk_sizes}, reverse=True):
            at_size = [
                next((c for c in e.chunk_sizes if c.system == s and c.chunk_size == size), None) for s in systems
            ]
            present = [c for c in at_size if c is not None]
            top = best_formatted(c.value for c in present)
            first = present[0]
            cells = [number(f"{size:,}"), number(f"{first.n_chunks:,}")]
            cells += [] if same else [number(sizes_cell(first.n_queries, first.n_documents))]
            for c in at_size:
                cells.append(
                    number(DASH)
                    if c is None
                    else number(format_ci(c.value, c.ci_low, c.ci_high), bold=format_metric(c.value) == top)
                )
            rows.append(tuple(cells))
        header = ("Chunk size", "Chunks", *([] if same else ["Queries (documents)"]), *systems)
        blocks.append(Table("chunk-sizes", header, tuple(rows)))
        if "chunk_sizes" in images:
            blocks.append(Image("nDCG@10 vs chunk size", images["chunk_sizes"]))
    if e.chunk_size_note:
        blocks.append(Paragraph((Span(e.chunk_size_note),)))
    elif not e.chunk_sizes:
        blocks.append(Paragraph((Span("No chunk-size study on this task."),)))
    return blocks


def notes_blocks(evaluation: TaskEvaluation) -> list[Block]:
    """The evaluation's notes; none: nothing."""
    if not evaluation.notes:
        return []
    return [Heading("Notes"), BulletList(tuple((Span(note),) for note in evaluation.notes))]
