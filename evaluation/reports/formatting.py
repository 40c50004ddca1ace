"""How every evaluation text shows a number: the reports, the Dagster metadata and the reading.

Contract: each function takes a number that may be missing (``None``, or NaN: a JSON null read back, see
:func:`evaluation.results.is_missing`) and returns a string; a missing number is always :data:`DASH`. Metrics
have 3 decimals (:func:`format_metric`, the value in ``results.json`` rounded), so every place that shows one
shows the same digits. Nothing here knows about documents or renderers.
"""

from __future__ import annotations

from evaluation.results import Summary, is_missing

DASH = "—"
"""What a missing number is shown as."""

METRIC_FAMILIES = ("ndcg", "map", "recall", "p", "mrr")
"""The order of the metric families in the tables (then the cut-off, ascending)."""


def format_metric(value: float | None) -> str:
    """A metric as shown everywhere: 3 decimals (``0.743``); ``—`` when missing or NaN."""
    return DASH if is_missing(value) else f"{value:.3f}"


def format_ci(value: float | None, low: float | None, high: float | None) -> str:
    """``0.743 [0.731, 0.755]`` (the interval left out when unknown)."""
    if is_missing(value):
        return DASH
    if is_missing(low) or is_missing(high):
        return format_metric(value)
    return f"{format_metric(value)} [{format_metric(low)}, {format_metric(high)}]"


def format_summary(summary: Summary | None) -> str:
    """A :class:`Summary` as ``value [ci_low, ci_high]``."""
    return DASH if summary is None else format_ci(summary.value, summary.ci_low, summary.ci_high)


def format_p(p: float | None, bound: bool = False) -> str:
    """A p-value: 3 decimals, scientific below 0.001; ``bound``: the value is only an upper bound (a Monte-Carlo
    test's floor, :func:`evaluation.reports.significance.at_floor`), written ``≤ 1.0e-04``."""
    if p is None or is_missing(p):
        return DASH
    shown = f"{p:.1e}" if p < 0.001 else f"{p:.3f}"
    return f"≤ {shown}" if bound else shown


def format_signed(value: float | None) -> str:
    """A difference: 3 decimals with its sign (``+0.012``)."""
    return DASH if is_missing(value) else f"{value:+.3f}"


def format_seconds(value: float | None) -> str:
    """A duration in seconds: 2 decimals."""
    return DASH if is_missing(value) else f"{value:.2f}"


def format_rate(value: float | None) -> str:
    """A rate (documents per second): 1 decimal."""
    return DASH if is_missing(value) else f"{value:.1f}"


def format_usd(value: float | None) -> str:
    """Dollars: 4 decimals below 1, else 2."""
    if value is None or is_missing(value):
        return DASH
    return f"{value:.4f}" if value < 1 else f"{value:.2f}"


def format_tokens(value: int | None) -> str:
    """A token count with thousands separators."""
    return DASH if value is None else f"{value:,}"


def metric_sort_key(name: str) -> tuple[int, int, str]:
    """Table order of metric names: by family (:data:`METRIC_FAMILIES`), then cut-off; unknown names last."""
    family, _, cutoff = name.partition("@")
    if family in METRIC_FAMILIES and cutoff.isdigit():
        return METRIC_FAMILIES.index(family), int(cutoff), name
    return len(METRIC_FAMILIES), 0, name
