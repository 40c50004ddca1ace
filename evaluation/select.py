"""The product chooses its pipeline on the validation split: fusion weights fitted there, the best candidate picked
there, both from the validation corpus alone (test labels are never an input here).

Criterion (the same for fitting and choosing): the mean nDCG@10 over the validation queries labelled
``needs_context`` (``curation/necessity.py``), then the mean over all validation queries as the tie-break; a corpus
without labels (or without such queries) compares all queries only. Exact ties keep the earlier option: the first
declared candidate, the grid point nearest equal weights.

Why a small grid fits the weights: a fusion has one to three free parameters (convex weights of two to four
systems); nDCG@10 is piecewise constant in them (it changes only where two chunks swap places in some query's
ranking), so it has no useful gradient and gradient methods do not apply; and a coarse grid (steps of 0.1 for two
systems, 0.2 for three, 0.25 for four: 11, 21 and 35 points) is a small family of models, which limits how much the
fit can adapt to the noise of a small validation split.

Reuse: every system is prepared once on the validation corpus (the ``prepare`` callback: the runner keeps prepared
systems), each component's full score matrix is computed once, and a fusion's grid reuses its components' normalised
scores (:func:`evaluation.systems.fusion.component_features`); only the weighted sum and the gold rank are recomputed
per grid point.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from evaluation.config import EvaluationConfig, FusionSystem, SystemConfig
from evaluation.corpus import EvalCorpus
from evaluation.indexed import IndexedSystem, NotRunnable
from evaluation.metrics.retrieval import metrics_from_gold_rank
from evaluation.results import ALL, HEADLINE, NEEDS_CONTEXT, Selection
from evaluation.systems.fusion import component_features, fuse_features
from evaluation.systems.ranking import tie_order

GRID_DIVISIONS = {2: 10, 3: 5, 4: 4}
"""Grid steps per number of fused systems: weights in multiples of 1/divisions (module docstring)."""

Criterion = tuple[float, float]
"""(mean nDCG@10 on needs_context queries, mean on all queries); the first is the second without labels."""


def weight_grid(n_systems: int) -> list[tuple[float, ...]]:
    """Every convex weight vector of ``n_systems`` on the grid of :data:`GRID_DIVISIONS`, nearest equal weights
    first (then lexicographic): the order that breaks exact ties."""
    steps = GRID_DIVISIONS.get(n_systems)
    if steps is None:
        raise ValueError(f"weights are fitted for 2 to 4 systems, not {n_systems}")
    points = [
        tuple(c / steps for c in combo)
        for combo in itertools.product(range(steps + 1), repeat=n_systems)
        if sum(combo) == steps
    ]
    equal = 1.0 / n_systems
    return sorted(points, key=lambda w: (round(sum((x - equal) ** 2 for x in w), 12), [-x for x in w]))


def gold_ranks(scores: np.ndarray, gold: np.ndarray, key: np.ndarray) -> np.ndarray:
    """int64 ``[Q]``: the 1-based trec-order rank of each query's gold chunk in ``scores`` (float32 ``[Q, C]``): chunks
    scoring higher, then chunks scoring the same with a larger tie key (:func:`~evaluation.systems.ranking.tie_order`)
    rank first."""
    scores = np.asarray(scores, dtype=np.float32)
    rows = np.arange(len(gold))
    gold_score = scores[rows, gold][:, None]
    above = scores > gold_score
    tied = (scores == gold_score) & (key[None, :] > key[gold][:, None])
    return 1 + np.count_nonzero(above | tied, axis=1)


def criterion(per_query: np.ndarray, needs_context: np.ndarray | None) -> Criterion:
    """The module docstring's criterion of per-query nDCG@10 values."""
    overall = float(np.mean(per_query)) if len(per_query) else float("nan")
    if needs_context is None or not needs_context.any():
        return overall, overall
    return float(np.mean(per_query[needs_context])), overall


def _better(a: Criterion, b: Criterion | None) -> bool:
    """``a`` strictly beats ``b`` (rounded to 12 decimals, so float noise never decides)."""
    return b is None or tuple(round(x, 12) for x in a) > tuple(round(x, 12) for x in b)


class _Validation:
    """The validation corpus with its labels, and the per-system score matrices computed once."""

    def __init__(self, corpus: EvalCorpus, prepare: Callable[[SystemConfig], IndexedSystem], config: EvaluationConfig):
        self.corpus, self.prepare, self.config = corpus, prepare, config
        self.key = tie_order(corpus.chunk_ids)
        mask = corpus.needs_context
        self.needs_context = mask if mask is not None and mask.any() else None
        self.scores: dict[str, np.ndarray] = {}

    def system_scores(self, system: SystemConfig) -> np.ndarray:
        """float32 ``[Q, C]`` of ``system`` on every validation query (raises :class:`NotRunnable`)."""
        if system.name not in self.scores:
            indexed = self.prepare(system)
            rows = np.arange(self.corpus.n_queries)
            self.scores[system.name] = np.asarray(indexed.score_block(rows), dtype=np.float32)
        return self.scores[system.name]

    def judge(self, scores: np.ndarray) -> Criterion:
        ranks = gold_ranks(scores, np.asarray(self.corpus.gold), self.key)
        return criterion(metrics_from_gold_rank(ranks, (10,))[HEADLINE], self.needs_context)

    def features(self, fusion: FusionSystem) -> list[np.ndarray]:
        depth = fusion.depth or self.config.top_k
        return [
            component_features(self.system_scores(part), self.key, fusion, depth)
            for part in self.config.components(fusion)
        ]

    def fit(self, fusion: FusionSystem) -> tuple[tuple[float, ...], Criterion]:
        """The grid point with the best criterion (module docstring) and that criterion."""
        features = self.features(fusion)
        best: tuple[tuple[float, ...], Criterion] | None = None
        for weights in weight_grid(len(features)):
            value = self.judge(fuse_features(features, weights))
            if best is None or _better(value, best[1]):
                best = (weights, value)
        assert best is not None
        return best


def _means(value: Criterion, labelled: bool) -> dict[str, float]:
    return {NEEDS_CONTEXT: value[0], ALL: value[1]} if labelled else {ALL: value[1]}


def fit_and_select(
    config: EvaluationConfig,
    corpus: EvalCorpus,
    prepare: Callable[[SystemConfig], IndexedSystem],
    fusions: Sequence[FusionSystem],
    *,
    log: Callable[[str], None] = lambda message: None,
) -> tuple[dict[str, tuple[float, ...]], Selection | None]:
    """Fit the weights of ``fusions`` (those with ``fit: validation``) and choose among ``config.select`` on the
    validation ``corpus``: ``({fusion: weights}, selection)`` (selection None when nothing is to be chosen).

    ``prepare`` returns a system prepared on ``corpus`` (raises :class:`NotRunnable`); a candidate or fusion whose
    systems cannot run is left out with the reason in ``Selection.notes`` (or the log). Reads ``corpus`` only.
    """
    validation = _Validation(corpus, prepare, config)
    labelled = validation.needs_context is not None
    fitted: dict[str, tuple[float, ...]] = {}
    fit_notes: dict[str, str] = {}
    for fusion in fusions:
        try:
            fitted[fusion.name], value = validation.fit(fusion)
        except NotRunnable as reason:
            fit_notes[fusion.name] = f"{fusion.name}: weights not fitted: {reason}"
            log(fit_notes[fusion.name])
            continue
        log(f"{fusion.name}: weights {dict(zip(fusion.systems, fitted[fusion.name], strict=True))} fitted on "
            f"validation, nDCG@10 {value[0]:.3f} / {value[1]:.3f} (needs_context / all)")  # fmt: skip
    if not config.select:
        return fitted, None
    selection = Selection(
        split=corpus.split,
        candidates=list(config.select),
        n_documents=corpus.n_documents,
        n_queries=corpus.n_queries,
        n_needs_context=corpus.n_needs_context,
        fitted_weights={
            name: dict(zip(config.system(name).systems, weights, strict=True))  # type: ignore[union-attr]
            for name, weights in fitted.items()
        },
    )
    best: Criterion | None = None
    for name in config.select:
        system = config.system(name)
        try:
            value = _judge_candidate(validation, system, fitted)
        except NotRunnable as reason:
            selection.notes.append(fit_notes.get(name) or f"{name}: not run on validation: {reason}")
            continue
        selection.validation[name] = _means(value, labelled)
        if _better(value, best):
            selection.chosen, best = name, value
    log(f"{corpus.name}: chose {selection.chosen} on {corpus.split} ({corpus.n_queries} queries)")
    return fitted, selection


def _judge_candidate(
    validation: _Validation, system: SystemConfig, fitted: Mapping[str, tuple[float, ...]]
) -> Criterion:
    """The criterion of one candidate on validation (a fusion with its given or fitted weights)."""
    if isinstance(system, FusionSystem):
        weights = system.weights if system.weights is not None else fitted.get(system.name)
        if weights is None:
            raise NotRunnable("its weights were not fitted")
        return validation.judge(fuse_features(validation.features(system), weights))
    return validation.judge(validation.system_scores(system))


def with_weights(system: SystemConfig, config: EvaluationConfig, fitted: Mapping[str, tuple[float, ...]]):
    """``system`` as the test run prepares it: a fusion with its fitted weights filled in (when fitted) and its
    retrieved-list depth resolved to ``config.top_k`` when unset; any other system unchanged."""
    if not isinstance(system, FusionSystem):
        return system
    update: dict[str, object] = {"depth": system.depth or config.top_k}
    if system.fitted:
        update["weights"] = fitted.get(system.name)
    return system.model_copy(update=update)
