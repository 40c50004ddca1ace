"""The report's plots as PNG bytes or inline SVG (matplotlib, no pyplot: every figure is a private ``Figure``).

Readable at a glance: a reader names every point without a legend hunt. The overview is a dot plot with the system
names on the y axis, best mean nDCG@10 on top (:func:`evaluation.reports.ranking.overall_scores`, the order of the
results table), one column per task sharing that axis, 95% CIs as horizontal whiskers, and each task's best cheap
baseline marked by a dashed line at its score (its name bold on the axis). The curves (by gold-chunk position, by
corpus size, by chunk size) are small multiples: one panel per system family (shared axes), each line named at its
end, the best cheap baseline drawn dashed in every panel for reference. Colour carries the family only
(:data:`~evaluation.reports.ranking.FAMILY_COLORS`); within a family, series differ by marker and line style. The
metric axis is fitted to the data (:func:`fitted_limits`, within 0..1). Each plot has a ``*_figure`` function (the
``Figure``, for tests) and a ``plot_*`` one (PNG bytes); :func:`svg_text` writes a figure as inline SVG whose
labels are real ``<text>`` (``svg.fonttype: none``) for the HTML page. ``dpi`` sets the PNG size in pixels.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullLocator

from evaluation.reports.ranking import (
    FAMILIES,
    FAMILY_COLORS,
    Family,
    best_cheap_baseline,
    chunk_size_systems,
    headline,
    overall_scores,
    ranked_runs,
    ranked_systems,
    run_family,
)
from evaluation.results import HEADLINE, TaskEvaluation, is_missing

DEFAULT_DPI = 100
WIDTH = 10.0  # inches: 1000 px in the file reports, 800 px in the Dagster UI (80 dpi)
MIN_SPAN = 0.1  # the fitted metric axis shows at least this much nDCG
_MARGIN = 0.08  # share of the data's span added on each side of it
_TOP = 1.02  # highest limit: a little above nDCG's maximum
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h", "<", ">")
_LINESTYLES = ("-", "--", "-.", ":")
_DODGE = 0.08  # horizontal distance between the series of one panel at one x (linear axis units)
_LOG_DODGE = 0.015  # the same on a log x axis, in decades
_BASELINE_STYLE = {"color": "#222222", "linestyle": (0, (4, 3)), "linewidth": 1.2}
_MUTED = "#5f6670"


def fitted_limits(lows: Iterable[float], highs: Iterable[float]) -> tuple[float, float]:
    """A range holding every finite value of ``lows``..``highs`` plus a margin, within 0..1 (up to
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


def png_bytes(figure: Figure, dpi: int) -> bytes:
    """``figure`` as PNG bytes at ``dpi``, without the Software metadata (the same figure, the same bytes)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()


_SVG_START = re.compile(r"<svg\b")


def svg_text(figure: Figure) -> str:
    """``figure`` as an inline ``<svg>`` element (no XML prolog, no date): text stays ``<text>`` (the page's font),
    ids are stable (a fixed hash salt), so a browser and a reader's search find every label."""
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "conteb-report"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    start = _SVG_START.search(text)
    return text[start.start() :] if start else text


def _empty(message: str) -> Figure:
    figure = Figure(figsize=(WIDTH, 1.6))
    figure.text(0.5, 0.5, message, ha="center", va="center", color=_MUTED)
    return figure


def _plain(text: str) -> str:
    """``text`` shown as it is by matplotlib (a ``$`` would start math)."""
    return text.replace("$", r"\$")


def _family_legend(figure: Figure, families: Iterable[Family]) -> None:
    """One legend entry per family present (colour only), above the panels."""
    present = [f for f in FAMILIES if f in set(families)]
    handles = [
        Line2D([], [], color=FAMILY_COLORS[f], marker="o", linestyle="none", markersize=7, label=f) for f in present
    ]
    if handles:
        figure.legend(handles=handles, loc="outside upper center", ncol=len(handles), fontsize=9, frameon=False)


# --------------------------------------------------------------------------------------------- overview


def overview_figure(evaluations: list[TaskEvaluation]) -> Figure:
    """nDCG@10 [95% CI] per system (rows, best mean first) and task (columns sharing the system axis), coloured by
    family, each task's best cheap baseline marked (dashed line at its score, its name bold on the axis)."""
    scores = overall_scores(evaluations)
    systems = ranked_systems(scores)
    if not any(headline(r) is not None for e in evaluations for r in e.runs):
        return _empty("no nDCG@10 results")
    summaries = [r.metrics[HEADLINE] for e in evaluations for r in e.runs if headline(r) is not None]
    limits = fitted_limits([s.ci_low for s in summaries] + [s.value for s in summaries], [s.ci_high for s in summaries])
    n_tasks = len(evaluations)
    label_width = 0.3 + 0.075 * max(len(s) for s in systems)
    width = min(16.0, max(WIDTH, label_width + 2.6 * n_tasks))
    figure = Figure(figsize=(width, max(3.6, 1.3 + 0.32 * len(systems))), layout="constrained")
    panels = figure.subplots(1, n_tasks, sharey=True, squeeze=False)[0]
    rows = {system: i for i, system in enumerate(systems)}
    baselines = {best_cheap_baseline(e) for e in evaluations} - {None}
    families: set[Family] = set()
    for axis, evaluation in zip(panels, evaluations, strict=True):
        for run in evaluation.runs:
            value = headline(run)
            if value is None:
                axis.text(
                    limits[0],
                    rows[run.system],
                    f" {run.status.replace('_', ' ')}",
                    va="center",
                    fontsize=8,
                    color=_MUTED,
                    style="italic",
                )
                continue
            s, family = run.metrics[HEADLINE], run_family(run)
            families.add(family)
            low = value - s.ci_low if not is_missing(s.ci_low) else 0.0
            high = s.ci_high - value if not is_missing(s.ci_high) else 0.0
            axis.errorbar(
                [value],
                [rows[run.system]],
                xerr=[[max(low, 0.0)], [max(high, 0.0)]],
                marker="o",
                markersize=7,
                color=FAMILY_COLORS[family],
                elinewidth=1.4,
                capsize=3,
                linestyle="none",
                label=run.system,
            )
        baseline = best_cheap_baseline(evaluation)
        if baseline is not None and (score := headline(evaluation.run(baseline))) is not None:
            axis.axvline(score, **_BASELINE_STYLE, zorder=0)
            axis.annotate(
                f"best cheap baseline: {_plain(baseline)}",
                (score, 1.0),
                xycoords=("data", "axes fraction"),
                xytext=(-3 if score > sum(limits) / 2 else 3, -2),  # on the side with room
                textcoords="offset points",
                fontsize=8,
                va="top",
                ha="right" if score > sum(limits) / 2 else "left",
                color="#222222",
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0, "alpha": 0.85},
            )
        axis.set_title(_plain(evaluation.task), fontsize=10)
        axis.set_xlim(*limits)
        axis.set_xlabel("nDCG@10 (95% CI over documents)", fontsize=9)
        axis.grid(axis="both", alpha=0.25)
        axis.tick_params(axis="y", length=0)
    first = panels[0]
    first.set_yticks(range(len(systems)), [_plain(s) for s in systems], fontsize=10)
    for label, system in zip(first.get_yticklabels(), systems, strict=True):
        if system in baselines:
            label.set_fontweight("bold")
    first.set_ylim(len(systems) - 0.5, -0.5)  # best on top
    _family_legend(figure, families)
    return figure


def plot_overview(evaluations: list[TaskEvaluation], dpi: int = DEFAULT_DPI) -> bytes:
    """:func:`overview_figure` as PNG."""
    return png_bytes(overview_figure(evaluations), dpi)


# --------------------------------------------------------------------------------------------- small multiples


@dataclass(frozen=True)
class Series:
    """One system's curve: x values, metric values and the whisker ends (NaN: none)."""

    system: str
    family: Family
    xs: tuple[float, ...]
    values: tuple[float, ...]
    lows: tuple[float, ...]
    highs: tuple[float, ...]


_Label = tuple[float, float, str, str]  # x, y of a line's last point, its name, its colour


def _draw(axis: Axes, series: Series, index: int, shift: float, log_x: bool, *, reference: bool = False) -> _Label:
    """``series`` as markers joined by a line with whiskers, set ``shift`` apart from the others of its panel (in
    decades on a log axis); returns its name label (``reference``: the best cheap baseline, dashed and dark)."""
    xs = [x * 10**shift if log_x else x + shift for x in series.xs]
    below = [max(0.0, v - lo) if not is_missing(lo) else 0.0 for v, lo in zip(series.values, series.lows, strict=True)]
    above = [max(0.0, h - v) if not is_missing(h) else 0.0 for v, h in zip(series.values, series.highs, strict=True)]
    color = "#222222" if reference else FAMILY_COLORS[series.family]
    style = _BASELINE_STYLE["linestyle"] if reference else _LINESTYLES[index // len(_MARKERS) % len(_LINESTYLES)]
    axis.errorbar(
        xs,
        list(series.values),
        yerr=[below, above],
        label=series.system,
        color=color,
        marker="" if reference else _MARKERS[index % len(_MARKERS)],
        markersize=5,
        linestyle=style,
        linewidth=1.1 if reference else 1.5,
        elinewidth=0.9,
        capsize=2,
        alpha=0.8 if reference else 0.95,
        zorder=1 if reference else 2,
    )
    name = f"{_plain(series.system)} (baseline)" if reference else _plain(series.system)
    return xs[-1], series.values[-1], name, color


def _place_labels(axis: Axes, labels: list[_Label]) -> None:
    """Each line's name just right of its last point, pushed apart vertically so no two overlap."""
    bottom, top = axis.get_ylim()
    gap = (top - bottom) * 0.07
    placed: list[float] = []
    for x, y, name, color in sorted(labels, key=lambda label: label[1]):
        y_text = max(y, placed[-1] + gap) if placed else y
        placed.append(y_text)
        axis.annotate(
            name,
            (x, y_text),
            xytext=(5, 0),
            textcoords="offset points",
            fontsize=8,
            va="center",
            color=color,
            annotation_clip=False,
        )


def _family_grid(
    rows: Sequence[tuple[str, Sequence[Series], Series | None]], *, log_x: bool
) -> tuple[Figure, list[list[Axes]]]:
    """A grid of panels: one row per ``(title, series, reference)``, one column per family present (shared axes),
    each family's series in its column (set slightly apart so whiskers do not cover each other, each named at its
    last point), the reference (the best cheap baseline) dashed in every panel of its row."""
    families = [f for f in FAMILIES if any(s.family == f for _, series, _ in rows for s in series)]
    columns = max(1, len(families))
    width = min(16.0, max(WIDTH, 3.4 * columns))
    figure = Figure(figsize=(width, 0.8 + 3.0 * len(rows)), layout="constrained")
    grid = figure.subplots(len(rows), columns, sharex=True, sharey=True, squeeze=False)
    everything = [s for _, series, ref in rows for s in [*series, *([ref] if ref else [])]]
    lows = [v for s in everything for v in (*s.lows, *s.values)]
    limits = fitted_limits(lows, [v for s in everything for v in (*s.highs, *s.values)])
    step = _LOG_DODGE if log_x else _DODGE
    labels: dict[tuple[int, int], list[_Label]] = {}
    for r, (title, series, reference) in enumerate(rows):
        for c, family in enumerate(families):
            axis, found = grid[r][c], labels.setdefault((r, c), [])
            if reference is not None:
                label = _draw(axis, reference, 0, 0.0, log_x, reference=True)
                if c == 0:  # named once per row; the caption says what the dashed line is
                    found.append(label)
            members = [s for s in series if s.family == family and s != reference]
            for i, (shift, s) in enumerate(zip(_offsets(len(members), step), members, strict=True)):
                found.append(_draw(axis, s, i, shift, log_x))
            axis.set_title(f"{_plain(title)}: {family}" if title else family, fontsize=10, color=FAMILY_COLORS[family])
            axis.grid(alpha=0.3, which="both")
            if log_x:
                axis.set_xscale("log")
        grid[r][0].set_ylim(*limits)
    for (r, c), found in labels.items():
        _place_labels(grid[r][c], found)
    return figure, [list(row) for row in grid]


def _offsets(n: int, step: float) -> list[float]:
    """``n`` offsets ``step`` apart, centred on 0 (one per series of a panel)."""
    return [(i - (n - 1) / 2) * step for i in range(n)]


def _reference(series: Sequence[Series], evaluation: TaskEvaluation) -> Series | None:
    baseline = best_cheap_baseline(evaluation)
    return next((s for s in series if s.system == baseline), None)


def _right_room(axes: Sequence[Axes], log_x: bool) -> None:
    """Widen the shared x range on the right so the names at the lines' ends fit (set once: the axes share x)."""
    low, high = axes[0].get_xlim()
    axes[0].set_xlim(low, high * (high / low) ** 0.45 if log_x and low > 0 else high + (high - low) * 0.45)


def positions_figure(evaluation: TaskEvaluation) -> Figure:
    """nDCG@10 [95% CI] per gold-chunk position, one panel per system family, best cheap baseline dashed in each."""
    runs = [r for r in ranked_runs(evaluation) if r.status == "ok" and r.by_position]
    if not runs:
        return _empty(f"{evaluation.task}: no per-position results")
    series = []
    for run in runs:
        points = sorted(run.by_position, key=lambda p: p.position)
        series.append(
            Series(
                run.system,
                run_family(run),
                tuple(float(p.position) for p in points),
                tuple(p.value for p in points),
                tuple(p.ci_low for p in points),
                tuple(p.ci_high for p in points),
            )
        )
    figure, grid = _family_grid([("", series, _reference(series, evaluation))], log_x=False)
    _right_room(grid[0], log_x=False)
    grid[0][0].set_ylabel("nDCG@10 (95% CI over documents)")
    for axis in grid[0]:
        axis.set_xlabel("gold-chunk position (0 = first)", fontsize=9)
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    figure.suptitle(f"{_plain(evaluation.task)}: nDCG@10 by gold-chunk position", fontsize=11)
    return figure


def plot_positions(evaluation: TaskEvaluation, dpi: int = DEFAULT_DPI) -> bytes:
    """:func:`positions_figure` as PNG."""
    return png_bytes(positions_figure(evaluation), dpi)


def scaling_figure(evaluation: TaskEvaluation) -> Figure:
    """nDCG@10 (mean ± std over random subsets) against the documents in the corpus (log x), one panel per family."""
    runs = [r for r in ranked_runs(evaluation) if r.status == "ok" and r.scaling]
    if not runs:
        return _empty(f"{evaluation.task}: no scaling results")
    series = []
    for run in runs:
        points = sorted(run.scaling, key=lambda p: p.n_documents)
        stds = [p.std if not is_missing(p.std) else 0.0 for p in points]
        series.append(
            Series(
                run.system,
                run_family(run),
                tuple(float(p.n_documents) for p in points),
                tuple(p.value for p in points),
                tuple(p.value - s for p, s in zip(points, stds, strict=True)),
                tuple(p.value + s for p, s in zip(points, stds, strict=True)),
            )
        )
    figure, grid = _family_grid([("", series, _reference(series, evaluation))], log_x=True)
    _right_room(grid[0], log_x=True)
    grid[0][0].set_ylabel("nDCG@10 (mean ± std)")
    for axis in grid[0]:
        axis.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axis.set_xlabel("documents in the corpus (log)", fontsize=9)
    figure.suptitle(f"{_plain(evaluation.task)}: nDCG@10 vs corpus size", fontsize=11)
    return figure


def plot_scaling(evaluation: TaskEvaluation, dpi: int = DEFAULT_DPI) -> bytes:
    """:func:`scaling_figure` as PNG."""
    return png_bytes(scaling_figure(evaluation), dpi)


def chunk_sizes_figure(evaluations: list[TaskEvaluation]) -> Figure | None:
    """nDCG@10 [95% CI] against chunk size (log x, largest on the left): one row per task, one panel per family,
    the task's best cheap baseline dashed in each; None without data."""
    tasks = [e for e in evaluations if e.chunk_sizes]
    if not tasks:
        return None
    rows = []
    sizes = sorted({p.chunk_size for e in tasks for p in e.chunk_sizes}, reverse=True)
    for evaluation in tasks:
        families = {r.system: run_family(r) for r in evaluation.runs}
        series = []
        for system in chunk_size_systems(evaluation):
            points = sorted((p for p in evaluation.chunk_sizes if p.system == system), key=lambda p: -p.chunk_size)
            series.append(
                Series(
                    system,
                    families.get(system, "dense"),
                    tuple(float(p.chunk_size) for p in points),
                    tuple(p.value for p in points),
                    tuple(p.ci_low for p in points),
                    tuple(p.ci_high for p in points),
                )
            )
        rows.append((evaluation.task if len(tasks) > 1 else "", series, _reference(series, evaluation)))
    figure, grid = _family_grid(rows, log_x=True)
    for row in grid:
        row[0].set_ylabel("nDCG@10 (95% CI over documents)")
        for axis in row:
            axis.set_xticks(sizes, [str(s) for s in sizes], fontsize=8)
            axis.xaxis.set_minor_locator(NullLocator())
            if len(sizes) > 1:
                axis.set_xlim(max(sizes) * 1.25, min(sizes) / 4.0)  # largest chunks on the left, room for names
    for axis in grid[-1]:
        axis.set_xlabel("chunk size (characters)", fontsize=9)
    if len(tasks) == 1:
        figure.suptitle(f"{_plain(tasks[0].task)}: nDCG@10 vs chunk size", fontsize=11)
    return figure


def plot_chunk_sizes(evaluations: list[TaskEvaluation], dpi: int = DEFAULT_DPI) -> bytes | None:
    """:func:`chunk_sizes_figure` as PNG; None without data."""
    figure = chunk_sizes_figure(evaluations)
    return png_bytes(figure, dpi) if figure is not None else None
