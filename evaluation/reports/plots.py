"""The report's plots as PNG bytes (matplotlib, no pyplot: every figure is a private ``Figure``).

Readable at a glance: figures are :data:`WIDTH` inches wide (1000 px at the default dpi); the y axis is fitted to
the data (:func:`fitted_limits`, within 0..1) rather than fixed at 0..1, so the differences between systems fill
it; confidence intervals are whiskers (error bars), never overlapping bands; each system keeps one colour and one
marker across all plots (fixed for the default systems, a stable hash otherwise), and the series of one x value are
set slightly apart (:func:`_offsets`) so their whiskers do not cover each other. Each plot has a ``*_figure``
function (the ``Figure``, for tests) and a ``plot_*`` one (PNG bytes). ``dpi`` sets the size in pixels: the file
reports use the default, the Dagster UI a smaller one.
"""

from __future__ import annotations

import io
import math
import zlib
from collections.abc import Iterable, Sequence

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullLocator

from conteb.names import SystemName
from evaluation.results import HEADLINE, SystemRun, TaskEvaluation, is_missing

DEFAULT_DPI = 100
WIDTH = 10.0  # inches: 1000 px in the file reports, 800 px in the Dagster UI (80 dpi)
MIN_SPAN = 0.1  # the fitted y axis shows at least this much nDCG
_MARGIN = 0.08  # share of the data's span added above and below it
_TOP = 1.02  # highest y limit: a little above nDCG's maximum
_DODGE = 0.12  # horizontal distance between the series at one categorical x (in category units)
_LOG_DODGE = 0.02  # the same on a log x axis, in decades
_KNOWN_STYLES: dict[str, tuple[str, str]] = {
    SystemName.BM25: ("#7f7f7f", "s"),
    SystemName.BM25_SUBWORD: ("#bcbd22", "D"),
    SystemName.INDEPENDENT: ("#1f77b4", "o"),
    SystemName.LATE_CHUNKING: ("#ff7f0e", "^"),
    SystemName.LATE_CHUNKING_ANCHORED: ("#8c564b", "v"),
    SystemName.TITLE_PREFIX: ("#17becf", "P"),
    SystemName.INSENT: ("#d62728", "*"),
    SystemName.FINETUNE_CONTROL: ("#9467bd", "X"),
    SystemName.CONTEXTUAL: ("#2ca02c", "h"),
    SystemName.BM25_TITLE: ("#4d4d4d", "p"),
    SystemName.HYBRID: ("#98df8a", "d"),
    SystemName.HYBRID_TITLE: ("#006d2c", "8"),
    SystemName.LATE_CHUNKING_TITLE: ("#ffbb78", "H"),
    SystemName.LATE_CHUNKING_ANCHORED_TITLE: ("#c49c94", ">"),
    "late-interaction": ("#e377c2", "<"),  # not a default system: the name conteb.yaml gives its example
}
_PALETTE = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1")
_MARKERS = (">", "p", "d", "H", "8")


def _hash(system: str) -> int:
    return zlib.crc32(system.encode("utf-8"))


def system_color(system: str) -> str:
    """The colour of ``system`` in every plot."""
    known = _KNOWN_STYLES.get(system)
    return known[0] if known else _PALETTE[_hash(system) % len(_PALETTE)]


def system_marker(system: str) -> str:
    """The marker of ``system`` in every plot (so that series differ by more than colour)."""
    known = _KNOWN_STYLES.get(system)
    return known[1] if known else _MARKERS[(_hash(system) // len(_PALETTE)) % len(_MARKERS)]


def fitted_limits(lows: Iterable[float], highs: Iterable[float]) -> tuple[float, float]:
    """A y range holding every finite value of ``lows``..``highs`` plus a margin, within 0..1 (up to
    :data:`_TOP` so that markers at 1.0 stay whole) and at least :data:`MIN_SPAN` wide; ``(0, 1)`` without data."""
    finite_lows = [v for v in lows if not is_missing(v)]
    finite_highs = [v for v in highs if not is_missing(v)]
    if not finite_lows or not finite_highs:
        return 0.0, 1.0
    low, high = min(finite_lows), max(finite_highs)
    margin = max(high - low, MIN_SPAN) * _MARGIN
    bottom, top = max(0.0, low - margin), min(_TOP, high + margin)
    if top - bottom < MIN_SPAN:
        bottom = max(0.0, min((low + high) / 2 - MIN_SPAN / 2, _TOP - MIN_SPAN))
        top = min(_TOP, bottom + MIN_SPAN)
    return bottom, top


def _offsets(n: int, step: float) -> list[float]:
    """``n`` offsets ``step`` apart, centred on 0 (one per series)."""
    return [(i - (n - 1) / 2) * step for i in range(n)]


def png_bytes(figure: Figure, dpi: int) -> bytes:
    """``figure`` as PNG bytes at ``dpi``, without the Software metadata (the same figure, the same bytes)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()


def _empty(message: str) -> Figure:
    figure = Figure(figsize=(WIDTH, 1.6))
    figure.text(0.5, 0.5, message, ha="center", va="center", color="#5f6670")
    return figure


def _ok_runs(evaluation: TaskEvaluation) -> list[SystemRun]:
    return [r for r in evaluation.runs if r.status == "ok"]


def _ordered_systems(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _whiskers(
    axis: Axes,
    system: str,
    xs: Sequence[float],
    values: Sequence[float],
    lows: Sequence[float],
    highs: Sequence[float],
    *,
    connect: bool = True,
) -> None:
    """One series: markers (joined by a line when ``connect``) with whiskers from ``lows`` to ``highs``."""
    below = [max(0.0, v - lo) if not is_missing(lo) else 0.0 for v, lo in zip(values, lows, strict=True)]
    above = [max(0.0, hi - v) if not is_missing(hi) else 0.0 for v, hi in zip(values, highs, strict=True)]
    axis.errorbar(
        xs, values, yerr=[below, above], label=system, color=system_color(system), marker=system_marker(system),
        markersize=6, linestyle="-" if connect else "none", linewidth=1.3, elinewidth=1.1, capsize=3, alpha=0.9,
    )  # fmt: skip


def _legend(figure: Figure, axes: Iterable[Axes]) -> None:
    handles: dict[str, Artist] = {}
    for axis in axes:
        for handle, label in zip(*axis.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    if handles:
        figure.legend(
            list(handles.values()), list(handles), loc="outside upper center", ncol=min(len(handles), 5), fontsize=9
        )


def overview_figure(evaluations: list[TaskEvaluation]) -> Figure:
    """nDCG@10 per task (groups) and system (markers set apart), 95% CI as whiskers; ok runs only."""
    systems = _ordered_systems(r.system for e in evaluations for r in _ok_runs(e) if HEADLINE in r.metrics)
    if not systems:
        return _empty("no nDCG@10 results")
    n_tasks = len(evaluations)
    step = min(_DODGE, 0.8 / len(systems))
    figure = Figure(figsize=(min(16.0, max(WIDTH, 2.0 + n_tasks * 1.2)), 4.6), layout="constrained")
    axis = figure.add_subplot()
    lows, highs = [], []
    for offset, system in zip(_offsets(len(systems), step), systems, strict=True):
        xs, values, low, high = [], [], [], []
        for t, evaluation in enumerate(evaluations):
            run = evaluation.run(system)
            summary = run.metrics.get(HEADLINE) if run is not None and run.status == "ok" else None
            if summary is None or is_missing(summary.value):
                continue
            xs.append(t + offset)
            values.append(summary.value)
            low.append(summary.ci_low if not is_missing(summary.ci_low) else summary.value)
            high.append(summary.ci_high if not is_missing(summary.ci_high) else summary.value)
        _whiskers(axis, system, xs, values, low, high, connect=False)
        lows += low
        highs += high
    axis.set_xticks(range(n_tasks), [e.task for e in evaluations], rotation=20 if n_tasks > 4 else 0)
    if n_tasks > 4:
        for label in axis.get_xticklabels():
            label.set_horizontalalignment("right")
    for boundary in range(1, n_tasks):
        axis.axvline(boundary - 0.5, color="#d0d4da", linewidth=0.8)
    axis.set_xlim(-0.5, n_tasks - 0.5)
    axis.set_ylabel("nDCG@10 (95% CI)")
    axis.set_ylim(*fitted_limits(lows, highs))
    axis.grid(axis="y", alpha=0.3)
    _legend(figure, [axis])
    return figure


def plot_overview(evaluations: list[TaskEvaluation], dpi: int = DEFAULT_DPI) -> bytes:
    """:func:`overview_figure` as PNG."""
    return png_bytes(overview_figure(evaluations), dpi)


def positions_figure(evaluation: TaskEvaluation) -> Figure:
    """nDCG@10 per gold-chunk position, one line per system with CI whiskers; below, queries per position."""
    runs = [r for r in _ok_runs(evaluation) if r.by_position]
    if not runs:
        return _empty(f"{evaluation.task}: no per-position results")
    figure = Figure(figsize=(WIDTH, 5.2), layout="constrained")
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    support: dict[int, int] = {}
    lows, highs = [], []
    for offset, run in zip(_offsets(len(runs), min(_DODGE, 0.8 / len(runs))), runs, strict=True):
        points = sorted(run.by_position, key=lambda p: p.position)
        low, high = [p.ci_low for p in points], [p.ci_high for p in points]
        _whiskers(top, run.system, [p.position + offset for p in points], [p.value for p in points], low, high)
        lows += low
        highs += high
        for p in points:
            support[p.position] = max(support.get(p.position, 0), p.n_queries)
    top.set_ylabel("nDCG@10 (95% CI)")
    top.set_ylim(*fitted_limits(lows, highs))
    top.grid(alpha=0.3)
    top.set_title(f"{evaluation.task}: nDCG@10 by gold-chunk position", fontsize=10)
    positions = sorted(support)
    bottom.bar(positions, [support[p] for p in positions], color="#9e9e9e", width=0.8)
    bottom.set_ylabel("queries")
    bottom.set_xlabel("position of the gold chunk in its document (0 = first)")
    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    bottom.grid(axis="y", alpha=0.3)
    _legend(figure, [top])
    return figure


def plot_positions(evaluation: TaskEvaluation, dpi: int = DEFAULT_DPI) -> bytes:
    """:func:`positions_figure` as PNG."""
    return png_bytes(positions_figure(evaluation), dpi)


def scaling_figure(evaluation: TaskEvaluation) -> Figure:
    """nDCG@10 against the number of documents in the corpus (log x): mean with ± std whiskers over random subsets."""
    runs = [r for r in _ok_runs(evaluation) if r.scaling]
    if not runs:
        return _empty(f"{evaluation.task}: no scaling results")
    figure = Figure(figsize=(WIDTH, 4.4), layout="constrained")
    axis = figure.add_subplot()
    lows, highs = [], []
    for offset, run in zip(_offsets(len(runs), _LOG_DODGE), runs, strict=True):
        points = sorted(run.scaling, key=lambda p: p.n_documents)
        means = [p.value for p in points]
        stds = [p.std if not is_missing(p.std) else 0.0 for p in points]
        low = [m - s for m, s in zip(means, stds, strict=True)]
        high = [m + s for m, s in zip(means, stds, strict=True)]
        _whiskers(axis, run.system, [p.n_documents * 10**offset for p in points], means, low, high)
        lows += low
        highs += high
    axis.set_xscale("log")
    axis.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_xlabel("documents in the corpus (random subsets, log scale)")
    axis.set_ylabel("nDCG@10 (mean ± std)")
    axis.set_ylim(*fitted_limits(lows, highs))
    axis.grid(alpha=0.3, which="both")
    axis.set_title(f"{evaluation.task}: nDCG@10 vs corpus size", fontsize=10)
    _legend(figure, [axis])
    return figure


def plot_scaling(evaluation: TaskEvaluation, dpi: int = DEFAULT_DPI) -> bytes:
    """:func:`scaling_figure` as PNG."""
    return png_bytes(scaling_figure(evaluation), dpi)


def chunk_sizes_figure(evaluations: list[TaskEvaluation]) -> Figure | None:
    """nDCG@10 against chunk size (log x, largest first), one subplot per task, CI whiskers; None without data."""
    tasks = [e for e in evaluations if e.chunk_sizes]
    if not tasks:
        return None
    columns = min(3, len(tasks))
    rows = math.ceil(len(tasks) / columns)
    figure = Figure(figsize=(min(16.0, max(WIDTH, 5.0 * columns)), 4.0 * rows + 0.6), layout="constrained")
    grid = figure.subplots(rows, columns, sharey=True, squeeze=False)
    all_points = [p for e in tasks for p in e.chunk_sizes]
    limits = fitted_limits([p.ci_low for p in all_points], [p.ci_high for p in all_points])
    for axis, evaluation in zip(grid.flat, tasks, strict=False):
        sizes = sorted({p.chunk_size for p in evaluation.chunk_sizes}, reverse=True)
        systems = _ordered_systems(p.system for p in evaluation.chunk_sizes)
        for offset, system in zip(_offsets(len(systems), _LOG_DODGE), systems, strict=True):
            points = sorted((p for p in evaluation.chunk_sizes if p.system == system), key=lambda p: -p.chunk_size)
            xs = [p.chunk_size * 10**offset for p in points]
            _whiskers(
                axis, system, xs, [p.value for p in points], [p.ci_low for p in points], [p.ci_high for p in points]
            )
        axis.set_xscale("log")
        axis.set_xticks(sizes, [str(s) for s in sizes], fontsize=8)
        axis.xaxis.set_minor_locator(NullLocator())
        if len(sizes) > 1:
            axis.set_xlim(max(sizes) * 1.25, min(sizes) / 1.25)  # largest chunks on the left
        axis.set_title(evaluation.task, fontsize=10)
        axis.set_xlabel("chunk size (characters)", fontsize=9)
        axis.set_ylim(*limits)
        axis.grid(alpha=0.3)
    for axis in grid.flat[len(tasks) :]:
        axis.set_visible(False)
    for axis in grid[:, 0]:
        axis.set_ylabel("nDCG@10 (95% CI)")
    _legend(figure, grid.flat)
    return figure


def plot_chunk_sizes(evaluations: list[TaskEvaluation], dpi: int = DEFAULT_DPI) -> bytes | None:
    """:func:`chunk_sizes_figure` as PNG; None without data."""
    figure = chunk_sizes_figure(evaluations)
    return png_bytes(figure, dpi) if figure is not None else None
