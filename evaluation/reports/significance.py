"""How every report says a paired test: its verdict in words, its p-values, its sizes, the difference it detects.

Contract: the one owner of that wording for the reports, the reading, the reproduce report and the command line.
A paired test (:class:`PairedFigures`: a :class:`~evaluation.results.Comparison`, a
:class:`~evaluation.reports.target.Margin`) is read as follows (the statistics: :mod:`evaluation.metrics.stats`):

* the unit is the **document**: the interval of the difference is the cluster bootstrap over documents, the p-value
  the paired test that flips (or resamples) whole documents, and every count of queries comes with its documents
  (:func:`sizes_text`, :func:`sizes_cell`);
* the **Holm-adjusted** p (over the report's family of comparisons) is *the* p: every verdict and count reads it
  (:func:`evaluation.results.is_significant`); the unadjusted document-level p may be shown beside it, and the
  query-level p (each query its own unit, which overstates the evidence) only in a column labelled secondary
  (:data:`QUERY_LEVEL_P`);
* the verdict is a direction in words (:func:`evaluation.results.direction_words`), never a bare yes or no, and
  "no measurable difference" always comes with the smallest difference the test set detects (:func:`verdict_text`,
  :func:`detectable_text`): at 80% power and 0.05, from the document-level variance, or that there are too few
  documents for any difference to reach 0.05;
* a p-value at a Monte-Carlo test's floor (no resampled statistic as extreme as the observed one: ``1 / (resamples +
  1)``, :func:`at_floor`) is only an upper bound and is written ``≤ 1.0e-04`` (the adjusted p derived from it too).
"""

from __future__ import annotations

import math
from typing import Protocol

from evaluation.reports.formatting import DASH, format_p, format_signed
from evaluation.results import NO_MEASURABLE_DIFFERENCE, SIGNIFICANCE_LEVEL, direction_words, is_missing

POWER_WORDS = "80% power"
QUERY_LEVEL_P = "query-level p (queries as units, secondary)"
"""The label of the query-level p-value wherever it is shown: it treats the queries of one document as independent."""
P_ADJUSTED = "p (Holm-adjusted)"
P_UNADJUSTED = "p (documents, unadjusted)"
"""The headers of the adjusted p (the p every verdict reads) and of the document-level p before the adjustment."""
NOT_ADJUSTED = "not tested by documents (an evaluation written before document-level tests: evaluate again)"


class PairedFigures(Protocol):
    """What a paired test carries (read-only): ``a`` − ``b`` and its interval, the p-values, the minimum detectable
    difference, the sizes and the resamples of its test."""

    @property
    def difference(self) -> float: ...
    @property
    def ci_low(self) -> float: ...
    @property
    def ci_high(self) -> float: ...
    @property
    def p_value(self) -> float: ...
    @property
    def p_adjusted(self) -> float: ...
    @property
    def p_query(self) -> float: ...
    @property
    def mdd(self) -> float: ...
    @property
    def n_queries(self) -> int: ...
    @property
    def n_documents(self) -> int | None: ...
    @property
    def resamples(self) -> int: ...


def at_floor(p: float | None, resamples: int) -> bool:
    """True when ``p`` is a Monte-Carlo test's smallest value, ``1 / (resamples + 1)`` (an exact sign-flip test over
    ``m`` documents runs only when ``2**m <= resamples``, so its smallest p, ``2 / 2**m``, is above that floor)."""
    return p is not None and not is_missing(p) and resamples > 0 and p <= (1.0 + 1e-9) / (resamples + 1)


def p_adjusted_text(t: PairedFigures) -> str:
    """The Holm-adjusted p of ``t``, a bound (``≤``) when its unadjusted p is at the floor."""
    return format_p(t.p_adjusted, at_floor(t.p_value, t.resamples))


def p_is(label: str, shown: str) -> str:
    """``label = 0.360``, or ``label ≤ 1.0e-04`` for a bound (:func:`evaluation.reports.formatting.format_p`)."""
    return f"{label} {shown}" if shown.startswith("≤") else f"{label} = {shown}"


def adjusted_p_words(t: PairedFigures) -> str:
    """``adjusted p = 0.360`` (``adjusted p ≤ 4.0e-04`` at the floor)."""
    return p_is("adjusted p", p_adjusted_text(t))


def p_unadjusted_text(t: PairedFigures) -> str:
    """The document-level p of ``t`` before the adjustment."""
    return format_p(t.p_value, at_floor(t.p_value, t.resamples))


def p_query_text(t: PairedFigures) -> str:
    """The query-level p of ``t`` (secondary: :data:`QUERY_LEVEL_P`)."""
    return format_p(t.p_query, at_floor(t.p_query, t.resamples))


def sizes_text(n_queries: int, n_documents: int | None) -> str:
    """``85 queries of 13 documents`` (``85 queries`` when the documents were not counted: an older file)."""
    return f"{n_queries:,} queries" + ("" if n_documents is None else f" of {n_documents:,} documents")


def sizes_cell(n_queries: int, n_documents: int | None) -> str:
    """``85 (13)``: queries and, in brackets, their documents (``85 (—)`` when not counted)."""
    return f"{n_queries:,} ({DASH if n_documents is None else f'{n_documents:,}'})"


def format_mdd(mdd: float | None, n_documents: int | None, scale: float = 1.0, digits: int = 3) -> str:
    """A minimum detectable difference for a table cell: ``±0.031``; ``none (5 documents)`` when no difference can
    reach 0.05 (``inf``); ``—`` when unknown. ``scale``/``digits``: ``100, 1`` for nDCG@10 points."""
    if mdd is None or is_missing(mdd):
        return DASH
    if math.isinf(mdd):
        return "none" + ("" if n_documents is None else f" ({n_documents:,} documents)")
    return f"±{mdd * scale:.{digits}f}"


def detectable_text(mdd: float | None, n_documents: int | None, scale: float = 1.0, digits: int = 3) -> str:
    """The resolution of a test set in words: ``this test set detects differences of ±0.031 or more at 80% power``;
    ``5 documents: too few for any difference to reach p < 0.05``; or why it is unknown."""
    if mdd is not None and not is_missing(mdd) and math.isinf(mdd):
        where = "too few documents" if n_documents is None else f"{n_documents:,} documents: too few"
        return f"{where} for any difference to reach p < {SIGNIFICANCE_LEVEL}"
    if mdd is None or is_missing(mdd):
        if n_documents is not None and n_documents < 2:
            return f"{n_documents} document: a paired test needs two or more"
        return "the detectable difference was not computed (an older evaluation: evaluate again)"
    unit = "" if scale == 1.0 else " points"
    return f"this test set detects differences of ±{mdd * scale:.{digits}f}{unit} or more at {POWER_WORDS}"


def verdict_text(t: PairedFigures, scale: float = 1.0, digits: int = 3) -> str:
    """The verdict of ``t`` in words from its adjusted p: ``significantly better``, ``significantly worse``, or ``no
    measurable difference (this test set detects ...)``; an older file without the adjusted p says so."""
    if is_missing(t.p_adjusted) and not is_missing(t.p_value):
        return NOT_ADJUSTED
    words = direction_words(t.p_adjusted, t.difference)
    if words == NO_MEASURABLE_DIFFERENCE:  # always with its size
        return f"{words} ({detectable_text(t.mdd, t.n_documents, scale, digits)})"
    return words


def verdict_cell(t: PairedFigures) -> str:
    """The verdict of ``t`` for a table cell (:func:`verdict_text`; the detectable difference has its own column)."""
    if is_missing(t.p_adjusted) and not is_missing(t.p_value):
        return "not adjusted (older file)"
    return direction_words(t.p_adjusted, t.difference)


def interval_text(t: PairedFigures, flip: bool = False) -> str:
    """``+0.012 [-0.010, +0.034]``: the difference with its document-bootstrap interval (``flip``: seen from ``b``)."""
    sign = -1.0 if flip else 1.0
    low, high = (-t.ci_high, -t.ci_low) if flip else (t.ci_low, t.ci_high)
    if is_missing(low) or is_missing(high):
        return format_signed(sign * t.difference)
    return f"{format_signed(sign * t.difference)} [{format_signed(low)}, {format_signed(high)}]"


def figures_text(t: PairedFigures, flip: bool = False) -> str:
    """The figures of ``t`` in a sentence: ``+0.012 [-0.010, +0.034], adjusted p = 0.360, 85 queries of 13
    documents`` (``flip``: the difference seen from ``b``)."""
    return f"{interval_text(t, flip)}, {adjusted_p_words(t)}, {sizes_text(t.n_queries, t.n_documents)}"
