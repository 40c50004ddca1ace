"""The product chooses its pipeline on the validation split: fusion weights fitted there, the candidate chosen there,
both from the validation corpus alone (test labels are never an input here).

Scores: nDCG@10 per validation query; the criterion (:func:`evaluation.weights.criterion`) is the mean over the queries
labelled ``needs_context`` (``curation/necessity.py``), then the mean over all as the tie-break; a corpus without
labels compares all queries only. Fitting (:mod:`evaluation.weights`): the grid's best point, shrunk toward equal
weights by the one-standard-error rule over documents, and the cross-validated (out-of-fold) score of that fit over
folds of whole documents. Choosing (:mod:`evaluation.choice`): the simplest candidate unless a more complex one leads
by a margin the document bootstrap supports, fitted fusions compared by their out-of-fold scores.

Why a small grid fits the weights: a fusion has one to three free parameters (convex weights of two to four
systems); nDCG@10 is piecewise constant in them (it changes only where two chunks swap places in some query's
ranking), so it has no useful gradient and gradient methods do not apply; and a coarse grid (steps of 0.1 for two
systems, 0.2 for three, 0.25 for four: 11, 21 and 35 points) is a small family of models, which limits how much the
fit can adapt to the noise of a small validation split.

Reuse: every system is prepared once on the validation corpus (the ``prepare`` callback: the runner keeps prepared
systems), each component's full score matrix is computed once, and a fusion's grid reuses its components' normalised
scores (:func:`evaluation.systems.fusion.component_features`); only the weighted sum and the gold rank are computed
per grid point, once: cross-validation reads rows of the grid's per-query values.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from evaluation.choice import Candidate, choose, complexity
from evaluation.config import EvaluationConfig, FusionSystem, SystemConfig
from evaluation.corpus import EvalCorpus
from evaluation.indexed import IndexedSystem, NotRunnable, ScoresNaN, failure_reason, needs_failed
from evaluation.metrics.retrieval import metrics_from_gold_rank
from evaluation.results import ALL, EARLIER_RULE, HEADLINE, NEEDS_CONTEXT, Selection
from evaluation.systems.fusion import component_features, fuse_features
from evaluation.systems.ranking import tie_order
from evaluation.weights import FOLDS, Fit, criterion, document_folds, fit_weights

GRID_DIVISIONS = {2: 10, 3: 5, 4: 4}
"""Grid steps per number of fused systems: weights in multiples of 1/divisions (module docstring)."""


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


class Failed(Exception):
    """``system`` failed on validation for ``reason`` (an error, NaN scores): what needs it does not run."""

    def __init__(self, system: str, reason: str):
        super().__init__(f"{system} failed: {reason}")
        self.system, self.reason = system, reason

    def words(self, name: str) -> str:
        """Why ``name`` has no validation score: it failed, or it needs the system that did."""
        if name == self.system:
            return f"failed on validation: {self.reason}"
        return f"not run on validation: {needs_failed(self.system, self.reason)}"


class _Validation:
    """The validation corpus with its labels, and the per-system score matrices computed once."""

    def __init__(self, corpus: EvalCorpus, prepare: Callable[[SystemConfig], IndexedSystem], config: EvaluationConfig):
        self.corpus, self.prepare, self.config = corpus, prepare, config
        self.key = tie_order(corpus.chunk_ids)
        mask = corpus.needs_context
        self.needs_context = mask if mask is not None and mask.any() else None
        self.documents = np.asarray(corpus.query_documents)
        self.scores: dict[str, np.ndarray] = {}
        self.failed: dict[str, str] = {}  # system -> why it failed on validation

    def system_scores(self, system: SystemConfig) -> np.ndarray:
        """float32 ``[Q, C]`` of ``system`` on every validation query (raises :class:`NotRunnable`, and
        :class:`Failed` for a system that failed or scored NaN, or a fused system that did, once and for all)."""
        for name in (system.name, *(part.name for part in self.config.components(system))):
            if name in self.failed:
                raise Failed(name, self.failed[name])
        if system.name not in self.scores:
            try:
                indexed = self.prepare(system)
                rows = np.arange(self.corpus.n_queries)
                scores = np.asarray(indexed.score_block(rows), dtype=np.float32)
                bad = np.isnan(scores).any(axis=1)
                if bad.any():
                    raise ScoresNaN(np.flatnonzero(bad), len(rows), of=len(rows))
            except NotRunnable:
                raise
            except Exception as error:
                culprit = system.name
                if isinstance(error, ScoresNaN):  # every validation query is scored at once
                    culprit, error.of = error.component or system.name, self.corpus.n_queries
                self.failed[culprit] = failure_reason(error)
                raise Failed(culprit, self.failed[culprit]) from error
            self.scores[system.name] = scores
        return self.scores[system.name]

    def per_query(self, scores: np.ndarray) -> np.ndarray:
        """float64 ``[Q]``: nDCG@10 of each validation query under ``scores`` (float32 ``[Q, C]``)."""
        ranks = gold_ranks(scores, np.asarray(self.corpus.gold), self.key)
        return metrics_from_gold_rank(ranks, (10,))[HEADLINE]

    def features(self, fusion: FusionSystem) -> list[np.ndarray]:
        depth = fusion.depth or self.config.top_k
        return [
            component_features(self.system_scores(part), self.key, fusion, depth)
            for part in self.config.components(fusion)
        ]

    def fit(self, fusion: FusionSystem) -> Fit:
        """``fusion``'s weights fitted on validation, shrunk, and cross-validated (:mod:`evaluation.weights`)."""
        features = self.features(fusion)
        grid = weight_grid(len(features))
        values = np.stack([self.per_query(fuse_features(features, weights)) for weights in grid])
        return fit_weights(grid, values, self.needs_context, self.documents, self.config.bootstrap.seed)

    def candidate(self, system: SystemConfig, fits: Mapping[str, Fit]) -> Candidate:
        """``system`` as a candidate of the choice (a fusion with its given or fitted weights; raises
        :class:`NotRunnable`)."""
        tier, parts = complexity(system, self.config)
        fit = fits.get(system.name)
        if fit is not None:
            return Candidate(system.name, tier, parts, fit.out_of_fold, fit.in_sample, fit.values[fit.best])
        if isinstance(system, FusionSystem):
            if system.weights is None:
                raise NotRunnable("its weights were not fitted")
            values = self.per_query(fuse_features(self.features(system), system.weights))
        else:
            values = self.per_query(self.system_scores(system))
        return Candidate(system.name, tier, parts, values, values, values)


def _means(values: np.ndarray, needs_context: np.ndarray | None) -> dict[str, float]:
    value = criterion(values, needs_context)
    return {NEEDS_CONTEXT: value[0], ALL: value[1]} if needs_context is not None else {ALL: value[1]}


def _weights(fusion: SystemConfig, weights: tuple[float, ...]) -> dict[str, float]:
    return dict(zip(fusion.systems, weights, strict=True))  # type: ignore[union-attr]


def fit_and_select(
    config: EvaluationConfig,
    corpus: EvalCorpus,
    prepare: Callable[[SystemConfig], IndexedSystem],
    fusions: Sequence[FusionSystem],
    *,
    log: Callable[[str], None] = lambda message: None,
    unfitted: dict[str, str] | None = None,
) -> tuple[dict[str, tuple[float, ...]], Selection | None]:
    """Fit the weights of ``fusions`` (those with ``fit: validation``) and choose among ``config.select`` on the
    validation ``corpus``: ``({fusion: weights used on test}, selection)`` (selection None when nothing is to be
    chosen).

    ``prepare`` returns a system prepared on ``corpus`` (raises :class:`NotRunnable`); a candidate or fusion whose
    systems cannot run, or one that fails (raises, scores NaN) or fuses one that does, is left out with the reason in
    ``Selection.notes`` and the log; the others are fitted and chosen among. ``unfitted`` (when given) receives
    ``{fusion: why its weights were not fitted}``. Reads ``corpus`` only.
    """
    validation = _Validation(corpus, prepare, config)
    fits: dict[str, Fit] = {}
    fit_notes: dict[str, str] = {}
    for fusion in fusions:
        try:
            fits[fusion.name] = fit = validation.fit(fusion)
        except (NotRunnable, Failed) as error:
            why = needs_failed(error.system, error.reason) if isinstance(error, Failed) else str(error)
            fit_notes[fusion.name] = f"{fusion.name}: weights not fitted: {why}"
            if unfitted is not None:
                unfitted[fusion.name] = why
            log(fit_notes[fusion.name])
            continue
        log(_fit_line(fusion, fit, validation.needs_context))
    fitted = {name: fit.weights for name, fit in fits.items()}
    if not config.select:
        return fitted, None
    selection = Selection(
        split=corpus.split,
        candidates=list(config.select),
        n_documents=corpus.n_documents,
        n_queries=corpus.n_queries,
        n_needs_context=corpus.n_needs_context,
        fitted_weights={name: _weights(config.system(name), fit.weights) for name, fit in fits.items()},
        grid_best={name: _weights(config.system(name), fit.best_weights) for name, fit in fits.items()},
        folds=int(document_folds(validation.documents, FOLDS, config.bootstrap.seed).max(initial=0)) + 1,
    )
    candidates = []
    for name in config.select:
        try:
            candidate = validation.candidate(config.system(name), fits)
        except NotRunnable as reason:
            selection.notes.append(fit_notes.get(name) or f"{name}: not run on validation: {reason}")
            continue
        except Failed as failure:
            selection.notes.append(f"{name}: {failure.words(name)}")
            log(f"{corpus.name}: {selection.notes[-1]}")
            continue
        candidates.append(candidate)
        selection.tiers[name] = candidate.tier
        if candidate.values is None:
            selection.notes.append(f"{name}: no cross-validated score (fewer than two validation documents)")
        else:
            selection.validation[name] = _means(candidate.values, validation.needs_context)
        if name in fits:
            selection.in_sample[name] = _means(candidate.in_sample, validation.needs_context)
    choice = choose(
        candidates,
        validation.needs_context,
        validation.documents,
        resamples=config.bootstrap.resamples,
        seed=config.bootstrap.seed,
    )
    selection.chosen, selection.decision, selection.by_rule = choice.chosen, choice.decision, choice.by_rule
    selection.notes += choice.notes
    log(f"{corpus.name}: chose {selection.chosen} on {corpus.split} ({corpus.n_documents} documents, "
        f"{corpus.n_queries} queries): {selection.decision}")  # fmt: skip
    for note in choice.notes:
        log(f"{corpus.name}: {note}")
    if selection.changed_by():
        log(f"{corpus.name}: the earlier rule would have chosen {selection.by_rule[EARLIER_RULE]}; changed by "
            f"{', '.join(selection.changed_by())}")  # fmt: skip
    return fitted, selection


def _fit_line(fusion: FusionSystem, fit: Fit, needs_context: np.ndarray | None) -> str:
    """The log line of one fitted fusion: its weights (and the grid's best, when shrunk), in-sample and
    cross-validated."""
    shrunk = "" if fit.chosen == fit.best else f" (shrunk from {_weights(fusion, fit.best_weights)})"
    inside = criterion(fit.in_sample, needs_context)
    outside = (
        ""
        if fit.out_of_fold is None
        else ", cross-validated {:.3f} / {:.3f}".format(*criterion(fit.out_of_fold, needs_context))
    )
    return (
        f"{fusion.name}: weights {_weights(fusion, fit.weights)}{shrunk} fitted on validation, nDCG@10 in-sample "
        f"{inside[0]:.3f} / {inside[1]:.3f}{outside} (needs_context / all)"
    )


def with_weights(system: SystemConfig, config: EvaluationConfig, fitted: Mapping[str, tuple[float, ...]]):
    """``system`` as the test run prepares it: a fusion with its fitted weights filled in (when fitted) and its
    retrieved-list depth resolved to ``config.top_k`` when unset; any other system unchanged."""
    if not isinstance(system, FusionSystem):
        return system
    update: dict[str, object] = {"depth": system.depth or config.top_k}
    if system.fitted:
        update["weights"] = fitted.get(system.name)
    return system.model_copy(update=update)
