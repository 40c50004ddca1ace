"""Evaluation reports: machine-readable records, Markdown, HTML and the Dagster UI's Markdown.

Every report is first built as one :class:`Document` (headings, paragraphs, lists, tables, images),
then written out by :func:`render_markdown` or :func:`render_html`: the file report, the HTML page and
the Dagster metadata show the same numbers, all formatted by :func:`format_metric` (3 decimals, the
value in ``results.json`` rounded). Images are references chosen by the caller: relative paths for the
files on disk, ``data:`` URIs for the Dagster UI.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from conteb.storage import atomic_path, write_text_atomic
from evaluation import plots
from evaluation.reading import overall_reading, task_reading
from evaluation.results import ALL, Comparison, Summary, SystemRun, TaskEvaluation, to_json

HEADLINE = "ndcg@10"
SIGNIFICANCE_LEVEL = 0.05
KEY_COMPARISONS: tuple[tuple[str, str], ...] = (("late-chunking", "independent"), ("insent", "late-chunking"))
DAGSTER_DPI = 80
DASH = "—"
_METRIC_FAMILIES = ("ndcg", "map", "recall", "p", "mrr")
_STATUS_TEXT = {"ok": "ok", "not_run": "not run", "failed": "failed"}
_REASON_LIMIT = 600  # characters of a reason shown in the reports (report.json keeps all of it)


# --------------------------------------------------------------------------------------------- numbers


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def format_metric(value: float | None) -> str:
    """A metric as shown everywhere: 3 decimals (``0.743``); ``—`` when missing or NaN."""
    return DASH if _missing(value) else f"{value:.3f}"


def format_ci(value: float | None, low: float | None, high: float | None) -> str:
    """``0.743 [0.731, 0.755]`` (the interval left out when unknown)."""
    if _missing(value):
        return DASH
    if _missing(low) or _missing(high):
        return format_metric(value)
    return f"{format_metric(value)} [{format_metric(low)}, {format_metric(high)}]"


def format_summary(summary: Summary | None) -> str:
    """A :class:`Summary` as ``value [ci_low, ci_high]``."""
    return DASH if summary is None else format_ci(summary.value, summary.ci_low, summary.ci_high)


def format_p(p: float | None) -> str:
    """A p-value: 3 decimals, scientific below 0.001."""
    if _missing(p):
        return DASH
    return f"{p:.1e}" if p < 0.001 else f"{p:.3f}"


def _signed(value: float | None) -> str:
    return DASH if _missing(value) else f"{value:+.3f}"


def _seconds(value: float | None) -> str:
    return DASH if _missing(value) else f"{value:.2f}"


def _rate(value: float | None) -> str:
    return DASH if _missing(value) else f"{value:.1f}"


def _usd(value: float | None) -> str:
    if _missing(value):
        return DASH
    return f"{value:.4f}" if value < 1 else f"{value:.2f}"


def _tokens(value: int | None) -> str:
    return DASH if value is None else f"{value:,}"


def _metric_key(name: str) -> tuple[int, int, str]:
    family, _, cutoff = name.partition("@")
    if family in _METRIC_FAMILIES and cutoff.isdigit():
        return _METRIC_FAMILIES.index(family), int(cutoff), name
    return len(_METRIC_FAMILIES), 0, name


def _significant(comparison: Comparison) -> bool:
    return not _missing(comparison.p_value) and comparison.p_value < SIGNIFICANCE_LEVEL


# --------------------------------------------------------------------------------------------- records


def _none_if_nan(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


def results_records(evaluations: list[TaskEvaluation]) -> list[dict[str, Any]]:
    """The fixed machine-readable layout: one record per (task, system, metric).

    Keys: ``task``, ``system``, ``metric``, ``value``, ``ci_low``, ``ci_high``, ``n_queries`` (NaN ->
    null) and ``subset``: ``"all"`` (every query) or ``"needs_context"`` (the queries labelled so,
    ``curation/necessity.py``: every metric of the run again, when the task is labelled and the subset
    non-empty). Metrics: every metric of every ok run (``ndcg@10``, ``map@5``, ...), then

    * ``doc_ndcg@10``: document-level nDCG@10 (with its CI);
    * ``ndcg@10@position=<p>``: queries whose gold chunk is at position ``p`` (with CI);
    * ``ndcg@10@n_docs=<n>``: random corpora of ``n`` documents; here ``ci_low`` / ``ci_high`` are
      mean - std / mean + std over the subsets (not a confidence interval) and ``n_queries`` the mean
      number of queries per subset (may be fractional);
    * ``ndcg@10@chunk_size=<s>``: the task re-chunked at ``s`` characters (every chunk-size point);
    * ``documents_per_second``, ``index_seconds``, ``llm_usd``, ``llm_tokens``: when known; ``ci_low``,
      ``ci_high`` and ``n_queries`` null.
    """
    records: list[dict[str, Any]] = []

    def add(
        task: str,
        system: str,
        metric: str,
        value: Any,
        low: Any = None,
        high: Any = None,
        n: Any = None,
        subset: str = ALL,
    ):
        records.append(
            {
                "task": task,
                "system": system,
                "metric": metric,
                "value": _none_if_nan(value),
                "ci_low": _none_if_nan(low),
                "ci_high": _none_if_nan(high),
                "n_queries": _none_if_nan(n),
                "subset": subset,
            }
        )

    for evaluation in evaluations:
        task = evaluation.task
        for run in evaluation.runs:
            if run.status != "ok":
                continue
            for metric, s in run.metrics.items():
                add(task, run.system, metric, s.value, s.ci_low, s.ci_high, s.n_queries)
            for subset, metrics in run.subset_metrics.items():
                for metric, s in metrics.items():
                    add(task, run.system, metric, s.value, s.ci_low, s.ci_high, s.n_queries, subset)
            if run.document_ndcg10 is not None:
                s = run.document_ndcg10
                add(task, run.system, "doc_ndcg@10", s.value, s.ci_low, s.ci_high, s.n_queries)
            for p in sorted(run.by_position, key=lambda p: p.position):
                add(task, run.system, f"ndcg@10@position={p.position}", p.value, p.ci_low, p.ci_high, p.n_queries)
            for p in sorted(run.scaling, key=lambda p: p.n_documents):
                low, high = (p.value - p.std, p.value + p.std) if not _missing(p.std) else (None, None)
                add(task, run.system, f"ndcg@10@n_docs={p.n_documents}", p.value, low, high, p.n_queries)
            for name in ("documents_per_second", "index_seconds", "llm_usd", "llm_tokens"):
                value = getattr(run, name)
                if value is not None:
                    add(task, run.system, name, value)
        for c in evaluation.chunk_sizes:
            add(task, c.system, f"ndcg@10@chunk_size={c.chunk_size}", c.value, c.ci_low, c.ci_high, c.n_queries)
    return records


# --------------------------------------------------------------------------------------------- document


@dataclass(frozen=True)
class Span:
    """A run of inline text. ``verbatim``: our own formatting (numbers), written to Markdown unescaped."""

    text: str
    bold: bool = False
    href: str | None = None
    verbatim: bool = False


Inline = tuple[Span, ...]


@dataclass(frozen=True)
class Cell:
    spans: Inline
    numeric: bool = False


@dataclass(frozen=True)
class Heading:
    kind: ClassVar[str] = "heading"
    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    kind: ClassVar[str] = "paragraph"
    spans: Inline


@dataclass(frozen=True)
class BulletList:
    kind: ClassVar[str] = "list"
    items: tuple[Inline, ...]


@dataclass(frozen=True)
class Table:
    """``name`` becomes the HTML table's id (unique within a document)."""

    kind: ClassVar[str] = "table"
    name: str
    header: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]

    @property
    def numeric_columns(self) -> tuple[bool, ...]:
        return tuple(
            bool(self.rows) and all(row[i].numeric or _cell_text(row[i]) == DASH for row in self.rows)
            for i in range(len(self.header))
        )


@dataclass(frozen=True)
class Image:
    kind: ClassVar[str] = "image"
    alt: str
    src: str


Block = Heading | Paragraph | BulletList | Table | Image


@dataclass(frozen=True)
class Document:
    title: str
    blocks: tuple[Block, ...]


def _cell_text(cell: Cell) -> str:
    return "".join(s.text for s in cell.spans)


def text(value: str, bold: bool = False, href: str | None = None) -> Cell:
    """A table cell of user text (escaped on output)."""
    return Cell((Span(value, bold=bold, href=href),))


def number(value: str, bold: bool = False) -> Cell:
    """A table cell of a formatted number (right-aligned)."""
    return Cell((Span(value, bold=bold and value != DASH, verbatim=True),), numeric=True)


def _span(value: str) -> Span:
    return Span(value, verbatim=True)


def _reason(run: SystemRun) -> str:
    reason = " ".join((run.reason or "no reason given").split())
    return reason if len(reason) <= _REASON_LIMIT else reason[: _REASON_LIMIT - 1] + "…"


def _best(values: Iterable[float | None]) -> str | None:
    """The formatted best value (cells that format to it are bold), None when there is none."""
    finite = [v for v in values if not _missing(v)]
    return format_metric(max(finite)) if finite else None


def _ordered(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _comparison_rows(comparisons: Sequence[Comparison], with_task: bool) -> tuple[tuple[Cell, ...], ...]:
    rows = []
    for c in comparisons:
        significant = _significant(c)
        cells = [
            text(c.system_a),
            text(c.system_b),
            text(c.metric),
            number(format_metric(c.mean_a)),
            number(format_metric(c.mean_b)),
            number(_signed(c.difference)),
            number(format_p(c.p_value), bold=significant),
            number(str(c.n_queries)),
            text(f"{c.method} ({c.resamples:,})"),
            text("yes" if significant else "no", bold=significant),
        ]
        rows.append(tuple([text(c.task), *cells] if with_task else cells))
    return tuple(rows)


_COMPARISON_HEADER = (
    "System A",
    "System B",
    "Metric",
    "Mean A",
    "Mean B",
    "Δ (A − B)",
    "p-value",
    "Queries",
    "Test",
    f"Significant (p < {SIGNIFICANCE_LEVEL})",
)


def _key_first(comparisons: Sequence[Comparison]) -> list[Comparison]:
    def key(c: Comparison) -> int:
        pair = {c.system_a, c.system_b}
        return next((i for i, k in enumerate(KEY_COMPARISONS) if set(k) == pair), len(KEY_COMPARISONS))

    return sorted(comparisons, key=key)


def _untested(evaluation: TaskEvaluation) -> list[str]:
    """The key comparisons missing on ``evaluation``, with why (when a system did not run)."""
    missing = []
    for a, b in KEY_COMPARISONS:
        if any({c.system_a, c.system_b} == {a, b} for c in evaluation.comparisons):
            continue
        why = []
        for system in (a, b):
            run = evaluation.run(system)
            if run is None:
                why.append(f"{system} not configured")
            elif run.status != "ok":
                why.append(f"{system} {_STATUS_TEXT[run.status]}")
        missing.append(f"{a} vs {b}: not tested" + (f" ({', '.join(why)})" if why else ""))
    return missing


def task_document(evaluation: TaskEvaluation, images: dict[str, str]) -> Document:
    """The report of one task; ``images`` maps ``positions`` / ``scaling`` / ``chunk_sizes`` to a src."""
    from evaluation import report_subsets  # builds on this module's blocks

    e = evaluation
    ok = [r for r in e.runs if r.status == "ok"]
    blocks: list[Block] = report_subsets.reading_blocks(task_reading(e))
    meta = f"Source: {e.source} · split: {e.split}" + (f" · evaluated {e.created_at}" if e.created_at else "")
    blocks.append(Paragraph((Span(meta),)))
    blocks.append(
        Table(
            "counts",
            ("Documents", "Chunks", "Queries", "Queries that need context"),
            (
                (
                    number(f"{e.n_documents:,}"),
                    number(f"{e.n_chunks:,}"),
                    number(f"{e.n_queries:,}"),
                    number(report_subsets.needs_context_count(e)),
                ),
            ),
        )
    )

    # Systems: headline, document level, cost.
    blocks.append(Heading("Systems"))
    blocks.append(Paragraph((Span("nDCG@10 with its 95% bootstrap confidence interval; the best in bold."),)))
    best = _best(r.metrics[HEADLINE].value for r in ok if HEADLINE in r.metrics)
    best_doc = _best(r.document_ndcg10.value for r in ok if r.document_ndcg10 is not None)
    rows = []
    for r in e.runs:
        headline = r.metrics.get(HEADLINE) if r.status == "ok" else None
        doc = r.document_ndcg10 if r.status == "ok" else None
        rows.append(
            (
                text(r.system),
                text(r.kind),
                text(_STATUS_TEXT.get(r.status, r.status)),
                number(format_summary(headline), bold=headline is not None and format_metric(headline.value) == best),
                number(format_summary(doc), bold=doc is not None and format_metric(doc.value) == best_doc),
                number(_seconds(r.index_seconds)),
                number(_rate(r.documents_per_second)),
                number(_seconds(r.query_seconds)),
                number(_tokens(r.llm_tokens)),
                number(_usd(r.llm_usd)),
                text(r.description),
            )
        )
    header = (
        "System",
        "Kind",
        "Status",
        "nDCG@10 [95% CI]",
        "Document nDCG@10 [95% CI]",
        "Index (s)",
        "Documents/s",
        "Queries (s)",
        "LLM tokens",
        "LLM cost (USD)",
        "Description",
    )
    blocks.append(Table("systems", header, tuple(rows)))
    not_ok = [r for r in e.runs if r.status != "ok"]
    if not_ok:
        blocks.append(Heading("Systems not run", 3))
        blocks.append(
            BulletList(
                tuple(
                    (Span(r.system, bold=True), Span(f" ({_STATUS_TEXT.get(r.status, r.status)}): {_reason(r)}"))
                    for r in not_ok
                )
            )
        )

    # Every metric.
    blocks.append(Heading("All metrics"))
    if ok:
        metrics = sorted({m for r in ok for m in r.metrics}, key=_metric_key)
        metric_rows = []
        for metric in metrics:
            top = _best(r.metrics[metric].value for r in ok if metric in r.metrics)
            cells = [text(metric)]
            for r in ok:
                s = r.metrics.get(metric)
                cells.append(number(format_summary(s), bold=s is not None and format_metric(s.value) == top))
            metric_rows.append(tuple(cells))
        blocks.append(Table("metrics", ("Metric", *(r.system for r in ok)), tuple(metric_rows)))
    else:
        blocks.append(Paragraph((Span("No system ran on this task."),)))

    # Comparisons.
    blocks.append(Heading("Comparisons"))
    blocks.append(
        Paragraph(
            (Span(f"Paired two-sided tests on the same queries; significant when p < {SIGNIFICANCE_LEVEL} (in bold)."),)
        )
    )
    if e.comparisons:
        blocks.append(Table("comparisons", _COMPARISON_HEADER, _comparison_rows(_key_first(e.comparisons), False)))
    untested = _untested(e)
    if untested:
        blocks.append(BulletList(tuple((Span(line),) for line in untested)))
    blocks += report_subsets.task_subset_blocks(e)

    # By position.
    blocks.append(Heading("nDCG@10 by gold-chunk position"))
    positioned = [r for r in ok if r.by_position]
    if positioned:
        blocks.append(
            Paragraph((Span("Queries grouped by the position of their gold chunk in its document (0 = first chunk)."),))
        )
        support: dict[int, set[int]] = {}
        for r in positioned:
            for p in r.by_position:
                support.setdefault(p.position, set()).add(p.n_queries)
        rows = []
        for position in sorted(support):
            counts = support[position]
            points = [next((p for p in r.by_position if p.position == position), None) for r in positioned]
            top = _best(p.value for p in points if p is not None)
            cells = [number(str(position)), number(str(max(counts)))]
            for p in points:
                if p is None:
                    cells.append(number(DASH))
                    continue
                shown = format_ci(p.value, p.ci_low, p.ci_high) + (f" (n={p.n_queries})" if len(counts) > 1 else "")
                cells.append(number(shown, bold=format_metric(p.value) == top))
            rows.append(tuple(cells))
        blocks.append(Table("positions", ("Position", "Queries", *(r.system for r in positioned)), tuple(rows)))
        if "positions" in images:
            blocks.append(Image("nDCG@10 by gold-chunk position", images["positions"]))
    else:
        blocks.append(Paragraph((Span("No per-position results."),)))

    # Scaling.
    blocks.append(Heading("nDCG@10 vs corpus size"))
    scaled = [r for r in ok if r.scaling]
    if scaled:
        blocks.append(
            Paragraph((Span("Random subsets of n documents (with their queries): mean ± std over the subsets."),))
        )
        sizes = sorted({p.n_documents for r in scaled for p in r.scaling})
        rows = []
        for n in sizes:
            cells = [number(f"{n:,}")]
            for r in scaled:
                p = next((p for p in r.scaling if p.n_documents == n), None)
                if p is None:
                    cells.append(number(DASH))
                else:
                    std = "" if _missing(p.std) else f" ± {format_metric(p.std)}"
                    cells.append(number(format_metric(p.value) + std))
            rows.append(tuple(cells))
        blocks.append(Table("scaling", ("Documents", *(r.system for r in scaled)), tuple(rows)))
        if "scaling" in images:
            blocks.append(Image("nDCG@10 vs corpus size", images["scaling"]))
    else:
        blocks.append(Paragraph((Span("No scaling results."),)))

    # Chunk sizes.
    blocks.append(Heading("Chunk-size robustness"))
    if e.chunk_sizes:
        blocks.append(Paragraph((Span("The task re-chunked at each size (characters); nDCG@10 [95% CI]."),)))
        systems = _ordered(c.system for c in e.chunk_sizes)
        rows = []
        for size in sorted({c.chunk_size for c in e.chunk_sizes}, reverse=True):
            points = [next((c for c in e.chunk_sizes if c.system == s and c.chunk_size == size), None) for s in systems]
            present = [p for p in points if p is not None]
            top = _best(p.value for p in present)
            cells = [number(f"{size:,}"), number(f"{present[0].n_chunks:,}")]
            for p in points:
                cells.append(
                    number(DASH)
                    if p is None
                    else number(format_ci(p.value, p.ci_low, p.ci_high), bold=format_metric(p.value) == top)
                )
            rows.append(tuple(cells))
        blocks.append(Table("chunk-sizes", ("Chunk size", "Chunks", *systems), tuple(rows)))
        if "chunk_sizes" in images:
            blocks.append(Image("nDCG@10 vs chunk size", images["chunk_sizes"]))
    if e.chunk_size_note:
        blocks.append(Paragraph((Span(e.chunk_size_note),)))
    elif not e.chunk_sizes:
        blocks.append(Paragraph((Span("No chunk-size study on this task."),)))

    if e.notes:
        blocks.append(Heading("Notes"))
        blocks.append(BulletList(tuple((Span(note),) for note in e.notes)))
    return Document(f"ConTEB evaluation: {e.task}", tuple(blocks))


def overall_document(
    evaluations: list[TaskEvaluation], images: dict[str, str], task_links: dict[str, str] | None = None
) -> Document:
    """The report over every task; ``images`` maps ``overview`` / ``chunk_sizes`` to a src and
    ``task_links`` (optional) each task to its own report."""
    from evaluation import report_subsets  # builds on this module's blocks

    task_links = task_links or {}
    blocks: list[Block] = report_subsets.reading_blocks(overall_reading(evaluations))
    systems = _ordered(r.system for e in evaluations for r in e.runs)
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
        best[e.task] = _best(r.metrics[HEADLINE].value for r in e.runs if r.status == "ok" and HEADLINE in r.metrics)
    means: dict[str, tuple[float | None, int]] = {}
    for system in systems:
        values = []
        for e in evaluations:
            run = e.run(system)
            if run is not None and run.status == "ok" and HEADLINE in run.metrics:
                values.append(run.metrics[HEADLINE].value)
        finite = [v for v in values if not _missing(v)]
        means[system] = (sum(finite) / len(finite) if finite else None, len(values))
    best_mean = _best(m for m, n in means.values() if n == len(evaluations))
    rows = []
    for system in systems:
        cells = [text(system)]
        for e in evaluations:
            run = e.run(system)
            if run is None:
                cells.append(number(DASH))
            elif run.status != "ok":
                cells.append(text(_STATUS_TEXT.get(run.status, run.status)))
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
                        Span(f" on {task} ({_STATUS_TEXT.get(r.status, r.status)}): {_reason(r)}"),
                    )
                    for task, r in not_ok
                )
            )
        )

    blocks.append(Heading("Key comparisons"))
    blocks.append(
        Paragraph(
            (
                Span(
                    "Paired two-sided tests on the same queries (late chunking vs independent, InSeNT vs late "
                    f"chunking first, then every other configured pair); significant when p < {SIGNIFICANCE_LEVEL}."
                ),
            )
        )
    )
    comparisons = [c for e in evaluations for c in _key_first(e.comparisons)]
    if comparisons:
        blocks.append(Table("comparisons", ("Task", *_COMPARISON_HEADER), _comparison_rows(comparisons, True)))
    untested = [f"{e.task}: {line}" for e in evaluations for line in _untested(e)]
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
            for system in _ordered(c.system for c in e.chunk_sizes):
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


# --------------------------------------------------------------------------------------------- Markdown

_MD_SPECIAL = re.compile(r"[\\`*<>|]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def markdown_escape(value: str) -> str:
    """User text safe in Markdown (and in a table cell): whitespace runs -> one space, markup escaped.

    Backslash-escapes ``\\ ` * < > |``, underscores at word edges (``insent_model`` stays as is) and the
    ``](`` of an inline link; a leading ``#``, ``+``, ``-`` or ``=`` (block markup).
    """
    escaped = _MD_SPECIAL.sub(lambda m: "\\" + m.group(0), re.sub(r"\s+", " ", value)).replace("](", "]\\(")
    return "\\" + escaped if escaped.startswith(("#", "+", "-", "=")) else escaped


def _md_inline(spans: Inline) -> str:
    parts = []
    for span in spans:
        content = span.text if span.verbatim else markdown_escape(span.text)
        if span.bold and content:
            content = f"**{content}**"
        if span.href:
            content = f"[{content}](<{span.href}>)"
        parts.append(content)
    return "".join(parts)


def render_markdown(document: Document) -> str:
    """``document`` as GitHub-flavoured Markdown."""
    out = [f"# {markdown_escape(document.title)}"]
    for block in document.blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {markdown_escape(block.text)}")
        elif isinstance(block, Paragraph):
            out.append(_md_inline(block.spans))
        elif isinstance(block, BulletList):
            out.append("\n".join(f"- {_md_inline(item)}" for item in block.items))
        elif isinstance(block, Image):
            out.append(f"![{markdown_escape(block.alt)}]({block.src})")
        elif isinstance(block, Table):
            align = ["---:" if numeric else "---" for numeric in block.numeric_columns]
            lines = [
                "| " + " | ".join(markdown_escape(h) for h in block.header) + " |",
                "| " + " | ".join(align) + " |",
            ]
            lines += ["| " + " | ".join(_md_inline(c.spans) for c in row) + " |" for row in block.rows]
            out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------- HTML


@lru_cache(maxsize=1)
def _environment():
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    return Environment(
        loader=FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_html(document: Document) -> str:
    """``document`` as a self-contained HTML page (tables as ``<table>``, images as ``<img src>``)."""
    return _environment().get_template("report.html.j2").render(document=document)


# --------------------------------------------------------------------------------------------- public renderers


def render_task_markdown(evaluation: TaskEvaluation, images: dict[str, str]) -> str:
    """The Markdown report of one task (``images``: plot name -> relative path or ``data:`` URI)."""
    return render_markdown(task_document(evaluation, images))


def render_overall_markdown(
    evaluations: list[TaskEvaluation], images: dict[str, str], task_links: dict[str, str] | None = None
) -> str:
    """The Markdown report over every task."""
    return render_markdown(overall_document(evaluations, images, task_links))


def render_task_html(evaluation: TaskEvaluation, images: dict[str, str]) -> str:
    """The HTML report of one task."""
    return render_html(task_document(evaluation, images))


def render_overall_html(
    evaluations: list[TaskEvaluation], images: dict[str, str], task_links: dict[str, str] | None = None
) -> str:
    """The HTML report over every task."""
    return render_html(overall_document(evaluations, images, task_links))


def data_uri(png: bytes) -> str:
    """A PNG as a ``data:`` URI (for Markdown shown by the Dagster UI)."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def dagster_markdown_overall(evaluations: list[TaskEvaluation]) -> str:
    """The overall Markdown with its plots inlined as small ``data:`` URIs (``MetadataValue.md``)."""
    images = {"overview": data_uri(plots.plot_overview(evaluations, dpi=DAGSTER_DPI))}
    for evaluation in evaluations:
        images[f"positions/{evaluation.task}"] = data_uri(plots.plot_positions(evaluation, dpi=DAGSTER_DPI))
        images[f"scaling/{evaluation.task}"] = data_uri(plots.plot_scaling(evaluation, dpi=DAGSTER_DPI))
    chunk_sizes = plots.plot_chunk_sizes(evaluations, dpi=DAGSTER_DPI)
    if chunk_sizes is not None:
        images["chunk_sizes"] = data_uri(chunk_sizes)
    return render_overall_markdown(evaluations, images)


def dagster_markdown_task(evaluation: TaskEvaluation) -> str:
    """The Markdown of one task with its plots inlined as small ``data:`` URIs (``MetadataValue.md``)."""
    images = {
        "positions": data_uri(plots.plot_positions(evaluation, dpi=DAGSTER_DPI)),
        "scaling": data_uri(plots.plot_scaling(evaluation, dpi=DAGSTER_DPI)),
    }
    chunk_sizes = plots.plot_chunk_sizes([evaluation], dpi=DAGSTER_DPI)
    if chunk_sizes is not None:
        images["chunk_sizes"] = data_uri(chunk_sizes)
    return render_task_markdown(evaluation, images)


# --------------------------------------------------------------------------------------------- files

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")


def task_folder_name(task: str) -> str:
    """The folder of ``task`` under ``reports/tasks`` (characters outside ``[A-Za-z0-9._-]`` -> ``_``)."""
    name = _UNSAFE_NAME.sub("_", task)
    return "_" + name if name in ("", ".", "..") else name


def _write_bytes(data: bytes, target: Path) -> Path:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)
    return target


def write_task_report(evaluation: TaskEvaluation, reports_dir: Path) -> dict[str, Path]:
    """``tasks/<task>/report.md``, ``report.html``, ``positions.png``, ``scaling.png`` and, when the task has
    chunk-size points, ``chunk_sizes.png``; returns relative name -> path."""
    base = f"tasks/{task_folder_name(evaluation.task)}"
    reports_dir = Path(reports_dir)
    written: dict[str, Path] = {}
    images = {"positions": "positions.png", "scaling": "scaling.png"}
    written[f"{base}/positions.png"] = _write_bytes(
        plots.plot_positions(evaluation), reports_dir / base / "positions.png"
    )
    written[f"{base}/scaling.png"] = _write_bytes(plots.plot_scaling(evaluation), reports_dir / base / "scaling.png")
    chunk_sizes = plots.plot_chunk_sizes([evaluation]) if evaluation.chunk_sizes else None
    if chunk_sizes is not None:
        written[f"{base}/chunk_sizes.png"] = _write_bytes(chunk_sizes, reports_dir / base / "chunk_sizes.png")
        images["chunk_sizes"] = "chunk_sizes.png"
    document = task_document(evaluation, images)
    written[f"{base}/report.md"] = write_text_atomic(render_markdown(document), reports_dir / base / "report.md")
    written[f"{base}/report.html"] = write_text_atomic(render_html(document), reports_dir / base / "report.html")
    return written


def write_reports(evaluations: list[TaskEvaluation], reports_dir: Path) -> dict[str, Path]:
    """Write every report under ``reports_dir`` (atomically, file by file); returns relative name -> path.

    ``results.json`` (:func:`results_records`), ``report.json`` (every :class:`TaskEvaluation`),
    ``report.md``, ``report.html``, ``overview.png``, ``chunk_sizes.png`` (when a task has chunk-size
    points) and, per task, ``tasks/<task>/report.md``, ``report.html``, ``positions.png``, ``scaling.png``.
    """
    folders = [task_folder_name(e.task) for e in evaluations]
    if len(set(folders)) != len(folders):
        raise ValueError(f"two tasks share a report folder: {[e.task for e in evaluations]}")
    reports_dir = Path(reports_dir)
    written: dict[str, Path] = {}

    def put(name: str, write: Callable[[Path], Path]) -> None:
        written[name] = write(reports_dir / name)

    put("results.json", lambda p: write_text_atomic(json.dumps(results_records(evaluations), indent=2) + "\n", p))
    full = [json.loads(to_json(e)) for e in evaluations]
    put("report.json", lambda p: write_text_atomic(json.dumps(full, indent=2, allow_nan=False) + "\n", p))
    put("overview.png", lambda p: _write_bytes(plots.plot_overview(evaluations), p))
    overall_images = {"overview": "overview.png"}
    chunk_sizes = plots.plot_chunk_sizes(evaluations)
    if chunk_sizes is not None:
        put("chunk_sizes.png", lambda p: _write_bytes(chunk_sizes, p))
        overall_images["chunk_sizes"] = "chunk_sizes.png"

    for evaluation in evaluations:
        written.update(write_task_report(evaluation, reports_dir))

    tasks = {e.task: f"tasks/{folder}" for e, folder in zip(evaluations, folders, strict=True)}
    for task, base in tasks.items():
        overall_images[f"positions/{task}"] = f"{base}/positions.png"
        overall_images[f"scaling/{task}"] = f"{base}/scaling.png"
    md_links = {task: f"{base}/report.md" for task, base in tasks.items()}
    html_links = {task: f"{base}/report.html" for task, base in tasks.items()}
    put("report.md", lambda p: write_text_atomic(render_overall_markdown(evaluations, overall_images, md_links), p))
    put("report.html", lambda p: write_text_atomic(render_overall_html(evaluations, overall_images, html_links), p))
    return written
