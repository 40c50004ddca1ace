"""The report's plots as PNG bytes (matplotlib, no pyplot: every figure is a private ``Figure``).

Each system keeps one colour across all plots (fixed for the default systems, a stable hash otherwise).
``dpi`` sets the size in pixels: the file reports use the default, the Dagster UI a smaller one.
"""

from __future__ import annotations

import io
import math
import zlib
from collections.abc import Iterable

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullLocator

from evaluation.results import SystemRun, TaskEvaluation

DEFAULT_DPI = 100
_KNOWN_COLORS = {
    "bm25": "#7f7f7f",
    "bm25-subword": "#bcbd22",
    "independent": "#1f77b4",
    "late-chunking": "#ff7f0e",
    "insent": "#d62728",
    "finetune-control": "#9467bd",
    "contextual": "#2ca02c",
}
_PALETTE = (
    "#17becf", "#8c564b", "#e377c2", "#393b79", "#637939", "#8c6d31",
    "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1",
)  # fmt: skip


def system_color(system: str) -> str:
    """The colour of ``system`` in every plot."""
    return _KNOWN_COLORS.get(system) or _PALETTE[zlib.crc32(system.encode("utf-8")) % len(_PALETTE)]


def _png(figure: Figure, dpi: int) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()


def _empty(message: str, dpi: int) -> bytes:
    figure = Figure(figsize=(5, 1.6))
    figure.text(0.5, 0.5, message, ha="center", va="center", color="#5f6670")
    return _png(figure, dpi)


def _finite(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


def _ok_runs(evaluation: TaskEvaluation) -> list[SystemRun]:
    return [r for r in evaluation.runs if r.status == "ok"]


def _ordered_systems(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _legend(figure: Figure, axes: Iterable[Axes]) -> None:
    handles: dict[str, object] = {}
    for axis in axes:
        for handle, label in zip(*axis.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    if handles:
        figure.legend(
            list(handles.values()), list(handles), loc="outside upper center", ncol=min(len(handles), 4), fontsize=8
        )


def plot_overview(evaluations: list[TaskEvaluation], dpi: int = DEFAULT_DPI) -> bytes:
    """Grouped bars: nDCG@10 per task (groups) and system (bars), 95% CI as error bars; ok runs only."""
    systems = _ordered_systems(r.system for e in evaluations for r in _ok_runs(e) if "ndcg@10" in r.metrics)
    if not systems:
        return _empty("no nDCG@10 results", dpi)
    n_tasks, n_systems = len(evaluations), len(systems)
    width = 0.8 / n_systems
    figure = Figure(figsize=(min(16.0, max(6.0, 1.5 + n_tasks * (0.3 * n_systems + 0.5))), 4.2), layout="constrained")
    axis = figure.add_subplot()
    for i, system in enumerate(systems):
        xs, heights, below, above = [], [], [], []
        for t, evaluation in enumerate(evaluations):
            run = evaluation.run(system)
            summary = run.metrics.get("ndcg@10") if run is not None and run.status == "ok" else None
            if summary is None or not _finite(summary.value):
                continue
            xs.append(t + (i - (n_systems - 1) / 2) * width)
            heights.append(summary.value)
            below.append(max(0.0, summary.value - summary.ci_low) if _finite(summary.ci_low) else 0.0)
            above.append(max(0.0, summary.ci_high - summary.value) if _finite(summary.ci_high) else 0.0)
        axis.bar(xs, heights, width * 0.95, yerr=[below, above], capsize=2, label=system, color=system_color(system))
    axis.set_xticks(range(n_tasks), [e.task for e in evaluations], rotation=20 if n_tasks > 4 else 0, ha="right")
    if n_tasks <= 4:
        for label in axis.get_xticklabels():
            label.set_horizontalalignment("center")
    axis.set_ylabel("nDCG@10 (95% CI)")
    axis.set_ylim(0, 1.02)
    axis.grid(axis="y", alpha=0.3)
    _legend(figure, [axis])
    return _png(figure, dpi)


def plot_positions(evaluation: TaskEvaluation, dpi: int = DEFAULT_DPI) -> bytes:
    """nDCG@10 per gold-chunk position, one line per system with its CI band; below, queries per position."""
    runs = [r for r in _ok_runs(evaluation) if r.by_position]
    if not runs:
        return _empty(f"{evaluation.task}: no per-position results", dpi)
    figure = Figure(figsize=(7.0, 4.6), layout="constrained")
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    support: dict[int, int] = {}
    for run in runs:
        points = sorted(run.by_position, key=lambda p: p.position)
        xs = [p.position for p in points]
        color = system_color(run.system)
        top.plot(xs, [p.value for p in points], marker="o", markersize=3, label=run.system, color=color)
        top.fill_between(xs, [p.ci_low for p in points], [p.ci_high for p in points], alpha=0.15, color=color)
        for p in points:
            support[p.position] = max(support.get(p.position, 0), p.n_queries)
    top.set_ylabel("nDCG@10 (95% CI)")
    top.set_ylim(0, 1.02)
    top.grid(alpha=0.3)
    top.set_title(f"{evaluation.task}: nDCG@10 by gold-chunk position", fontsize=10)
    positions = sorted(support)
    bottom.bar(positions, [support[p] for p in positions], color="#9e9e9e", width=0.8)
    bottom.set_ylabel("queries")
    bottom.set_xlabel("position of the gold chunk in its document (0 = first)")
    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    bottom.grid(axis="y", alpha=0.3)
    _legend(figure, [top])
    return _png(figure, dpi)


def plot_scaling(evaluation: TaskEvaluation, dpi: int = DEFAULT_DPI) -> bytes:
    """nDCG@10 against the number of documents in the corpus (log x): mean ± std over random subsets."""
    runs = [r for r in _ok_runs(evaluation) if r.scaling]
    if not runs:
        return _empty(f"{evaluation.task}: no scaling results", dpi)
    figure = Figure(figsize=(7.0, 3.8), layout="constrained")
    axis = figure.add_subplot()
    for run in runs:
        points = sorted(run.scaling, key=lambda p: p.n_documents)
        xs = [p.n_documents for p in points]
        means = [p.value for p in points]
        stds = [p.std if _finite(p.std) else 0.0 for p in points]
        color = system_color(run.system)
        axis.plot(xs, means, marker="o", markersize=3, label=run.system, color=color)
        axis.fill_between(
            xs, [m - s for m, s in zip(means, stds, strict=True)], [m + s for m, s in zip(means, stds, strict=True)],
            alpha=0.15, color=color,
        )  # fmt: skip
    axis.set_xscale("log")
    axis.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_xlabel("documents in the corpus (random subsets, log scale)")
    axis.set_ylabel("nDCG@10 (mean ± std)")
    axis.set_ylim(0, 1.02)
    axis.grid(alpha=0.3, which="both")
    axis.set_title(f"{evaluation.task}: nDCG@10 vs corpus size", fontsize=10)
    _legend(figure, [axis])
    return _png(figure, dpi)


def plot_chunk_sizes(evaluations: list[TaskEvaluation], dpi: int = DEFAULT_DPI) -> bytes | None:
    """nDCG@10 against chunk size (log x, largest first), one subplot per task, CI bands; None without data."""
    tasks = [e for e in evaluations if e.chunk_sizes]
    if not tasks:
        return None
    columns = min(3, len(tasks))
    rows = math.ceil(len(tasks) / columns)
    figure = Figure(figsize=(4.2 * columns, 3.0 * rows + 0.5), layout="constrained")
    grid = figure.subplots(rows, columns, sharey=True, squeeze=False)
    for axis, evaluation in zip(grid.flat, tasks, strict=False):
        sizes = sorted({p.chunk_size for p in evaluation.chunk_sizes}, reverse=True)
        for system in _ordered_systems(p.system for p in evaluation.chunk_sizes):
            points = sorted((p for p in evaluation.chunk_sizes if p.system == system), key=lambda p: -p.chunk_size)
            xs = [p.chunk_size for p in points]
            color = system_color(system)
            axis.plot(xs, [p.value for p in points], marker="o", markersize=3, label=system, color=color)
            axis.fill_between(xs, [p.ci_low for p in points], [p.ci_high for p in points], alpha=0.15, color=color)
        axis.set_xscale("log")
        axis.set_xticks(sizes, [str(s) for s in sizes], fontsize=7)
        axis.xaxis.set_minor_locator(NullLocator())
        if len(sizes) > 1:
            axis.set_xlim(max(sizes) * 1.25, min(sizes) / 1.25)  # largest chunks on the left
        axis.set_title(evaluation.task, fontsize=9)
        axis.set_xlabel("chunk size (characters)", fontsize=8)
        axis.set_ylim(0, 1.02)
        axis.grid(alpha=0.3)
    for axis in grid.flat[len(tasks) :]:
        axis.set_visible(False)
    for axis in grid[:, 0]:
        axis.set_ylabel("nDCG@10 (95% CI)")
    _legend(figure, grid.flat)
    return _png(figure, dpi)
