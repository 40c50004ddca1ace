"""The authors' headline effects beside ours: which reproduce, which do not, with the test behind each verdict.

Sources of the figures, each cited beside the effect it belongs to (:class:`PaperEffect.source`):

* the paper, Conti et al. (2025), "Context is Gold to find the Gold Passage: Evaluating and Training Contextual
  Document Embeddings" (``PAPER``): with ModernBERT, InSeNT is +14.6 nDCG@10 above untrained late chunking; InSeNT
  beats the "+Training" control (the same base model fine-tuned on the same data without context); late chunking,
  with or without InSeNT, degrades less than independent chunks as chunks get smaller (a flatter chunk-size curve);
* the authors' release post (``RELEASE_POST``; M. Faysse's announcement of the paper, June 2025): late chunking alone
  +9.0 nDCG@10 on ConTEB, late chunking + InSeNT +23.6 on average — figures the post gives, cited as the post's.

Anchored windows (every window after the first starts with the document's head) are this project's own rule: the
authors measured none, so no figure stands beside an anchored effect (``source`` None) and its verdict is about our
numbers alone.

Our side of each effect is measured on one task (the experiment's test split), on all queries and on the queries
labelled ``needs_context``:

* paired effects (``system_a`` − ``system_b``): mean difference of per-query nDCG@10 in points (× 100), with whole
  documents as the units (:func:`evaluation.metrics.stats.paired`): its 95% CI from a bootstrap over documents, the
  two-sided paired randomization p-value flipping whole documents, the query-level p (secondary) and the smallest
  difference the test set detects with 80% power (points); the effects of one task (every effect on every subset)
  are one family, their p-values Holm-adjusted together (:func:`compare_with_paper`);
* the chunk-size effect: each system's *retention*, nDCG@10 at the smallest studied size over nDCG@10 at 1000
  characters (the default size); "flatter" means a larger retention than independent chunks (no test: the points
  come from re-chunked corpora, not paired queries).

Verdict of a paired effect the authors measured (every one is an improvement), from the Holm-adjusted p:
``reproduces`` when our difference is positive with adjusted p < ``ALPHA``; ``opposite`` when negative with adjusted
p < ``ALPHA``; ``inconclusive`` otherwise (said with the difference the test set detects). Of an effect only we
measure: ``gain``, ``loss`` or ``inconclusive`` by the same test. ``not measured`` when a system did not run (with
why). The size of the effect is shown beside the authors', not judged: one small model on one task is not
their ConTEB average.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from conteb.names import SystemName
from evaluation.metrics.stats import holm, paired
from evaluation.reports.formatting import format_p
from evaluation.reports.significance import at_floor, detectable_text, p_is, sizes_text
from evaluation.results import ALL, NEEDS_CONTEXT, ChunkSizePoint, TaskEvaluation

ALPHA = 0.05
REFERENCE_CHUNK_SIZE = 1000


PAPER = "paper"
RELEASE_POST = "release post"
SOURCES = {
    PAPER: 'Conti et al. (2025), "Context is Gold to find the Gold Passage"',
    RELEASE_POST: "the authors' release post of the paper (M. Faysse, June 2025)",
}
"""Where a figure comes from: the short label shown beside it -> the citation (module docstring)."""


@dataclass(frozen=True)
class PaperEffect:
    """One headline effect: ``system_a`` above ``system_b``. ``source``: who measured it (``PAPER`` or
    ``RELEASE_POST``; None: only we do, no figure); ``paper_points``: their figure (None: a direction only, or none)."""

    name: str
    claim: str
    system_a: str
    system_b: str
    paper_points: float | None
    source: str | None

    def __post_init__(self) -> None:
        if self.source is not None and self.source not in SOURCES:
            raise ValueError(f"effect {self.name}: unknown source {self.source!r} (one of {sorted(SOURCES)})")
        if self.source is None and self.paper_points is not None:
            raise ValueError(f"effect {self.name}: a figure ({self.paper_points}) needs its source")


PAPER_EFFECTS: tuple[PaperEffect, ...] = (
    PaperEffect(
        "late_chunking",
        "late chunking beats independent chunks",
        SystemName.LATE_CHUNKING,
        SystemName.INDEPENDENT,
        9.0,
        RELEASE_POST,
    ),
    PaperEffect(
        "late_chunking_anchored",
        "late chunking (anchored windows, ours) beats independent chunks",
        SystemName.LATE_CHUNKING_ANCHORED,
        SystemName.INDEPENDENT,
        None,
        None,
    ),
    PaperEffect(
        "insent",
        "late chunking + InSeNT beats independent chunks",
        SystemName.INSENT,
        SystemName.INDEPENDENT,
        23.6,
        RELEASE_POST,
    ),
    PaperEffect(
        "insent_anchored",
        "late chunking + InSeNT (anchored windows, ours) beats independent chunks",
        SystemName.INSENT_ANCHORED,
        SystemName.INDEPENDENT,
        None,
        None,
    ),
    PaperEffect(
        "insent_vs_control",
        "InSeNT beats the +Training control",
        SystemName.INSENT,
        SystemName.FINETUNE_CONTROL,
        None,
        PAPER,
    ),
    PaperEffect(
        "insent_anchored_vs_control",
        "InSeNT (anchored windows, ours) beats the +Training control",
        SystemName.INSENT_ANCHORED,
        SystemName.FINETUNE_CONTROL,
        None,
        None,
    ),
    PaperEffect(
        "insent_vs_late",
        "InSeNT training improves late chunking",
        SystemName.INSENT,
        SystemName.LATE_CHUNKING,
        14.6,
        PAPER,
    ),
)
"""The paired effects, each with the figure of whoever measured it (module docstring)."""

FLATTER_SYSTEMS = (
    SystemName.LATE_CHUNKING,
    SystemName.LATE_CHUNKING_ANCHORED,
    SystemName.INSENT,
    SystemName.INSENT_ANCHORED,
)


@dataclass
class EffectResult:
    """One paired effect on one query subset."""

    effect: str
    claim: str
    subset: str  # "all" | "needs_context"
    system_a: str
    system_b: str
    paper_points: float | None
    verdict: str  # reproduces | opposite | inconclusive (the authors' effects) | gain | loss | inconclusive (ours)
    # | not measured
    points: float | None = None  # mean(a - b) x 100
    ci_low: float | None = None  # the 95% CI over documents, points
    ci_high: float | None = None
    p_value: float | None = None  # the paired test with documents as units
    mean_a: float | None = None
    mean_b: float | None = None
    n_queries: int = 0
    reason: str | None = None  # why not measured
    paper_source: str | None = None  # PAPER | RELEASE_POST; None: the authors did not measure the effect
    p_adjusted: float | None = None  # Holm over the task's effects: what the verdict reads
    p_query: float | None = None  # each query its own unit (secondary)
    mdd_points: float | None = None  # the smallest difference the test set detects at 80% power, points (inf: none)
    n_documents: int = 0
    resamples: int = 0  # of the paired test

    def p_text(self, p: float | None) -> str:
        """``p`` (one of this effect's p-values) formatted, a bound (``≤``) at the Monte-Carlo floor."""
        return format_p(p, at_floor(self.p_value, self.resamples))

    def detectable(self) -> str:
        """The smallest difference this effect's test set detects, in words (points)."""
        mdd = None if self.mdd_points is None else self.mdd_points / 100.0
        return detectable_text(mdd, self.n_documents, scale=100.0, digits=1)


@dataclass
class RetentionResult:
    """The chunk-size effect for one system: nDCG@10 at the smallest size / at 1000 characters."""

    system: str
    smallest_size: int
    at_reference: float
    at_smallest: float
    retention: float
    independent_retention: float | None
    verdict: str  # flatter | steeper | not measured


@dataclass
class PaperComparison:
    """Every effect, on every subset, and the plain-words summary."""

    task: str
    split: str
    effects: list[EffectResult] = field(default_factory=list)
    retention: list[RetentionResult] = field(default_factory=list)
    subsets: dict[str, int] = field(default_factory=dict)  # subset -> queries
    documents: dict[str, int] = field(default_factory=dict)  # subset -> the documents of its queries
    summary: list[str] = field(default_factory=list)


def verdict_of(points: float, p_value: float, alpha: float = ALPHA, *, authors_measured: bool = True) -> str:
    """``reproduces`` / ``opposite`` / ``inconclusive`` for an effect the authors report as an improvement; for one
    only we measure (``authors_measured`` false), ``gain`` / ``loss`` / ``inconclusive``. ``p_value``: the effect's
    Holm-adjusted p (:func:`adjust_effects`; alone, its own)."""
    if not np.isfinite(p_value) or p_value >= alpha or points == 0:
        return "inconclusive"
    if authors_measured:
        return "reproduces" if points > 0 else "opposite"
    return "gain" if points > 0 else "loss"


def paired_effect(
    effect: PaperEffect,
    subset: str,
    per_query: Mapping[str, Mapping[str, float]],
    query_ids: Sequence[str],
    documents: Mapping[str, str],
    not_run: Mapping[str, str],
    *,
    resamples: int = 10000,
    seed: int = 0,
) -> EffectResult:
    """``effect`` measured on ``query_ids`` from per-query nDCG@10 (``per_query[system][query_id]``), whole documents
    (``documents``: query id -> its document) the units; alone, its adjusted p is its own (a family of one:
    :func:`compare_with_paper` adjusts the task's effects together)."""
    result = EffectResult(
        effect.name,
        effect.claim,
        subset,
        effect.system_a,
        effect.system_b,
        effect.paper_points,
        "not measured",
        paper_source=effect.source,
    )
    missing = [s for s in (effect.system_a, effect.system_b) if s not in per_query]
    if missing:
        result.reason = "; ".join(f"{s}: {not_run.get(s, 'not evaluated')}" for s in missing)
        return result
    if not query_ids:
        result.reason = f"no queries in subset {subset!r}"
        return result
    a = np.array([per_query[effect.system_a][q] for q in query_ids], dtype=np.float64)
    b = np.array([per_query[effect.system_b][q] for q in query_ids], dtype=np.float64)
    test = paired(a, b, [documents[q] for q in query_ids], "randomization", resamples, 2000, 0.95, seed)
    result.points, result.ci_low, result.ci_high = 100.0 * test.difference, 100.0 * test.ci_low, 100.0 * test.ci_high
    result.p_value, result.p_adjusted, result.p_query = test.p_value, test.p_value, test.p_query
    result.mdd_points = 100.0 * test.mdd
    result.mean_a, result.mean_b = float(a.mean()), float(b.mean())
    result.n_queries, result.n_documents, result.resamples = test.n_queries, test.n_documents, resamples
    result.verdict = verdict_of(result.points, test.p_value, authors_measured=effect.source is not None)
    return result


def adjust_effects(effects: Sequence[EffectResult]) -> None:
    """Holm's adjustment over the measured ``effects`` (one family: a task's effect table); each verdict read
    again from its adjusted p."""
    measured = [r for r in effects if r.verdict != "not measured" and r.p_value is not None]
    for result, p in zip(measured, holm([float(r.p_value) for r in measured if r.p_value is not None]), strict=True):
        result.p_adjusted = p
        points = result.points if result.points is not None else 0.0
        result.verdict = verdict_of(points, p, authors_measured=result.paper_source is not None)


def retention(points: Sequence[ChunkSizePoint], systems: Sequence[str] = FLATTER_SYSTEMS) -> list[RetentionResult]:
    """The chunk-size effect of each of ``systems`` against ``independent`` (see the module docstring)."""

    def curve(system: str) -> dict[int, float]:
        return {p.chunk_size: p.value for p in points if p.system == system}

    base = curve(SystemName.INDEPENDENT)
    sizes = sorted(base)
    if REFERENCE_CHUNK_SIZE not in base or len(sizes) < 2:
        return []
    smallest = sizes[0]
    independent = base[smallest] / base[REFERENCE_CHUNK_SIZE] if base[REFERENCE_CHUNK_SIZE] > 0 else None
    results = []
    for system in systems:
        values = curve(system)
        if REFERENCE_CHUNK_SIZE not in values or smallest not in values or values[REFERENCE_CHUNK_SIZE] <= 0:
            continue
        kept = values[smallest] / values[REFERENCE_CHUNK_SIZE]
        verdict = "not measured" if independent is None else ("flatter" if kept > independent else "steeper")
        results.append(
            RetentionResult(
                system, smallest, values[REFERENCE_CHUNK_SIZE], values[smallest], kept, independent, verdict
            )
        )
    return results


def authors_figure(result: EffectResult) -> str:
    """What the authors measured for ``result``'s effect, with its source: ``+9.0 (release post)``,
    ``positive (paper)``, or ``—`` when they did not measure it (an anchored effect)."""
    if result.paper_source is None:
        return "—"
    figure = "positive" if result.paper_points is None else f"{result.paper_points:+.1f}"
    return f"{figure} ({result.paper_source})"


def _authors_words(result: EffectResult) -> str:
    if result.paper_source is None:
        return "the authors measured no anchored windows"
    figure = f"reports {result.paper_points:+.1f}" if result.paper_points is not None else "reports a gain"
    return f"the {result.paper_source} {figure}"


VERDICT_WORDS = {
    "reproduces": "reproduces",
    "opposite": "does not reproduce: the difference goes the other way",
    "gain": "a significant gain here",
    "loss": "a significant loss here",
    "inconclusive": "inconclusive: no measurable difference",
}


def _figures(result: EffectResult) -> str:
    """``+10.0 points [+8.1, +11.9] over documents, adjusted p = 1.0e-04, 400 queries of 20 documents``, and the
    difference the test set detects when the verdict is inconclusive."""
    figures = (
        f"{result.points:+.1f} points [{result.ci_low:+.1f}, {result.ci_high:+.1f}] over documents, "
        f"{p_is('adjusted p', result.p_text(result.p_adjusted))}, {sizes_text(result.n_queries, result.n_documents)}"
    )
    return figures + (f"; {result.detectable()}" if result.verdict == "inconclusive" else "")


def _sentence(result: EffectResult) -> str:
    if result.verdict == "not measured":
        return f"{result.claim}: not measured ({result.reason})."
    return f"{result.claim} — {VERDICT_WORDS[result.verdict]} ({_figures(result)}; {_authors_words(result)})."


def summarize_comparison(comparison: PaperComparison) -> list[str]:
    """Plain-words lines: per effect on all queries (and on needs_context when it differs), then the curve."""
    lines = []
    by_key = {(r.effect, r.subset): r for r in comparison.effects}
    for effect in PAPER_EFFECTS:
        overall = by_key.get((effect.name, ALL))
        if overall is None:
            continue
        line = _sentence(overall)
        subset = by_key.get((effect.name, NEEDS_CONTEXT))
        if subset is not None and subset.verdict != "not measured":
            line += f" On the queries that need context: {_figures(subset)} ({subset.verdict})."
        lines.append(line)
    for kept in comparison.retention:
        if kept.independent_retention is None:
            continue
        lines.append(
            f"Chunk-size curve of {kept.system}: keeps {kept.retention:.0%} of its nDCG@10 from "
            f"{REFERENCE_CHUNK_SIZE} to {kept.smallest_size} characters against {kept.independent_retention:.0%} "
            f"for independent chunks — {'flatter, as in the paper' if kept.verdict == 'flatter' else 'not flatter'}."
        )
    return lines


def compare_with_paper(
    evaluation: TaskEvaluation,
    per_query: Mapping[str, Mapping[str, float]],
    needs_context: Mapping[str, bool] | None,
    documents: Mapping[str, str],
    *,
    resamples: int = 10000,
    seed: int = 0,
) -> PaperComparison:
    """Every paired effect on all queries and on the ``needs_context`` subset (one Holm family,
    :func:`adjust_effects`), the chunk-size effect, the summary.

    ``per_query``: system -> query id -> nDCG@10 of the systems that ran; ``needs_context``: query id -> label
    (None: the task is unlabelled, the subset is left out); ``documents``: query id -> its document (the units).
    """
    query_ids = sorted(next(iter(per_query.values())).keys()) if per_query else []
    subsets = {ALL: query_ids}
    if needs_context is not None:
        subsets[NEEDS_CONTEXT] = [q for q in query_ids if needs_context.get(q)]
    not_run = {run.system: run.reason or run.status for run in evaluation.runs if run.status != "ok"}
    comparison = PaperComparison(task=evaluation.task, split=evaluation.split)
    comparison.subsets = {name: len(ids) for name, ids in subsets.items()}
    comparison.documents = {name: len({documents[q] for q in ids}) for name, ids in subsets.items()}
    for effect in PAPER_EFFECTS:
        for subset, ids in subsets.items():
            comparison.effects.append(
                paired_effect(effect, subset, per_query, ids, documents, not_run, resamples=resamples, seed=seed)
            )
    adjust_effects(comparison.effects)
    comparison.retention = retention(evaluation.chunk_sizes)
    comparison.summary = summarize_comparison(comparison)
    return comparison
