"""Report plots readable at a glance: wide figures, a y axis fitted to the data, CI whiskers (not bands) on
series that are told apart by colour, marker and a small horizontal offset."""

from __future__ import annotations

import struct

import pytest
from matplotlib.collections import PolyCollection
from matplotlib.container import ErrorbarContainer

from evaluation.reports import plots
from evaluation.reports.ranking import FAMILY_COLORS
from evaluation.results import ChunkSizePoint, PositionPoint, ScalingPoint, Summary, SystemRun, TaskEvaluation

SYSTEMS = ("bm25", "independent", "late-chunking", "title-prefix")


def _png_size(data: bytes) -> tuple[int, int]:
    """Width and height in pixels from the PNG header (IHDR)."""
    return struct.unpack(">II", data[16:24])


def _run(task: str, system: str, offset: float) -> SystemRun:
    value = 0.55 + offset
    return SystemRun(
        task=task,
        system=system,
        kind="dense",
        status="ok",
        metrics={"ndcg@10": Summary(value, value - 0.03, value + 0.03, 40)},
        by_position=[
            PositionPoint(p, value - 0.01 * p, value - 0.01 * p - 0.04, value - 0.01 * p + 0.04, 10) for p in range(4)
        ],
        scaling=[ScalingPoint(n, value + 0.02, 0.01, 5, n * 2.0) for n in (1, 4, 12)],
    )


def _evaluation(task: str = "squad") -> TaskEvaluation:
    evaluation = TaskEvaluation(task, "x", "test", 12, 40, 40)
    evaluation.runs = [_run(task, system, 0.02 * i) for i, system in enumerate(SYSTEMS)]
    evaluation.chunk_sizes = [
        ChunkSizePoint(task, system, size, 0.5 + 0.02 * i, 0.47 + 0.02 * i, 0.53 + 0.02 * i, 40, 40)
        for i, system in enumerate(SYSTEMS)
        for size in (1000, 300, 100)
    ]
    return evaluation


def _data_range(evaluation: TaskEvaluation, which: str) -> tuple[float, float]:
    if which == "positions":
        points = [p for r in evaluation.runs for p in r.by_position]
        return min(p.ci_low for p in points), max(p.ci_high for p in points)
    if which == "scaling":
        points = [p for r in evaluation.runs for p in r.scaling]
        return min(p.value - p.std for p in points), max(p.value + p.std for p in points)
    if which == "chunk_sizes":
        return min(p.ci_low for p in evaluation.chunk_sizes), max(p.ci_high for p in evaluation.chunk_sizes)
    summaries = [r.metrics["ndcg@10"] for r in evaluation.runs]
    return min(s.ci_low for s in summaries), max(s.ci_high for s in summaries)


FIGURES = {
    "overview": lambda e: plots.overview_figure([e]),
    "positions": plots.positions_figure,
    "scaling": plots.scaling_figure,
    "chunk_sizes": lambda e: plots.chunk_sizes_figure([e]),
}


@pytest.mark.parametrize("which", sorted(FIGURES))
def test_the_metric_axis_is_fitted_to_the_data_not_zero_to_one(which: str) -> None:
    evaluation = _evaluation()
    low, high = _data_range(evaluation, which)
    axis = FIGURES[which](evaluation).axes[0]
    bottom, top = axis.get_xlim() if which == "overview" else axis.get_ylim()  # the overview: nDCG@10 across
    assert bottom <= low and top >= high  # every whisker visible
    assert top - bottom < 2 * (high - low) + 0.1  # the differences fill the axis
    assert bottom > 0.2 and top < 0.9


def test_fitted_limits_stay_within_zero_and_one_and_keep_a_minimum_span() -> None:
    bottom, top = plots.fitted_limits([0.97], [1.0])
    assert 0.9 <= bottom < 0.97 and 1.0 <= top <= 1.02
    bottom, top = plots.fitted_limits([0.5], [0.5])
    assert bottom < 0.5 < top and top - bottom >= 0.1
    assert plots.fitted_limits([0.0, 0.2], [0.9, 1.0])[0] == 0.0
    assert plots.fitted_limits([], []) == (0.0, 1.0)


@pytest.mark.parametrize("which", ["positions", "chunk_sizes", "scaling"])
def test_curves_are_whiskers_on_told_apart_series(which: str) -> None:
    axis = FIGURES[which](_evaluation()).axes[0]  # one family (dense): one panel holds every series
    assert not [c for c in axis.collections if isinstance(c, PolyCollection)]  # no overlapping bands
    containers = [c for c in axis.containers if isinstance(c, ErrorbarContainer)]
    assert len(containers) == len(SYSTEMS)
    assert {c.lines[0].get_color() for c in containers} == {FAMILY_COLORS["dense"]}  # colour: the family only
    assert len({c.lines[0].get_marker() for c in containers}) == len(SYSTEMS)  # told apart by marker
    first_x = {float(c.lines[0].get_xdata()[0]) for c in containers}
    assert len(first_x) == len(SYSTEMS)  # dodged: whiskers at one position do not overlap
    names = {t.get_text() for t in axis.texts}
    assert set(SYSTEMS) <= names  # each line named at its end: no legend hunt


def test_the_overview_puts_each_system_on_its_own_row_best_first() -> None:
    evaluation = _evaluation()
    axis = plots.overview_figure([evaluation]).axes[0]
    assert [t.get_text() for t in axis.get_yticklabels()] == list(reversed(SYSTEMS))  # best nDCG@10 on top
    containers = [c for c in axis.containers if isinstance(c, ErrorbarContainer)]
    rows = {float(c.lines[0].get_ydata()[0]) for c in containers}
    assert len(containers) == len(rows) == len(SYSTEMS)


def test_figures_are_wide_enough_to_read() -> None:
    evaluation = _evaluation()
    for data in (
        plots.plot_overview([evaluation]),
        plots.plot_positions(evaluation),
        plots.plot_scaling(evaluation),
        plots.plot_chunk_sizes([evaluation]),
    ):
        width, height = _png_size(data)
        assert width >= 900 and height >= 350
    width, _ = _png_size(plots.plot_chunk_sizes([evaluation], dpi=80))  # the Dagster UI's size
    assert width >= 700
