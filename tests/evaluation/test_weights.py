"""Fusion weights on validation documents (evaluation/weights.py): the one-standard-error shrinkage toward equal
weights, and cross-validation over folds of whole documents, on per-query value matrices built by hand."""

from __future__ import annotations

import numpy as np

from evaluation.select import weight_grid
from evaluation.weights import best_point, document_folds, fit_weights, shrunk_point

GRID = weight_grid(2)  # 11 points, (0.5, 0.5) first
P = len(GRID)


def _documents(sizes: list[int]) -> np.ndarray:
    return np.array([f"d{j}" for j, size in enumerate(sizes) for _ in range(size)])


def test_a_flat_grid_within_one_document_standard_error_gives_equal_weights() -> None:
    # six documents of 20 queries; the last grid point beats the others by +0.4 on three documents and -0.2 on three:
    # mean +0.1, document-level SE 0.134 (within), query-level SE 0.028 (not within: queries are not the unit)
    documents = _documents([20] * 6)
    lead = np.repeat([0.4, 0.4, 0.4, -0.2, -0.2, -0.2], 20)
    values = np.full((P, len(documents)), 0.5)
    values[-1] += lead
    rows = np.ones(len(documents), dtype=bool)
    assert best_point(values, None, rows) == P - 1
    assert shrunk_point(values, None, documents, rows) == 0 and GRID[0] == (0.5, 0.5)
    fit = fit_weights(GRID, values, None, documents)
    assert fit.weights == (0.5, 0.5) and fit.best_weights == GRID[-1]


def test_a_point_that_clearly_wins_keeps_its_weights() -> None:
    documents = _documents([5] * 8)
    values = np.full((P, len(documents)), 0.5)
    values[7] += 0.3 + 0.01 * (np.arange(len(documents)) % 3)  # ahead on every document
    fit = fit_weights(GRID, values, None, documents)
    assert fit.chosen == fit.best == 7


def test_the_shrinkage_reads_the_needs_context_queries() -> None:
    # the last point wins clearly on the labelled queries and loses a little on the others: it is kept
    documents = _documents([4] * 8)
    needs = np.tile([True, True, False, False], 8)
    values = np.full((P, len(documents)), 0.5)
    values[-1, needs] += 0.3
    values[-1, ~needs] -= 0.05
    assert fit_weights(GRID, values, needs, documents).weights == GRID[-1]


def test_one_document_cannot_move_the_weights_from_equal() -> None:
    values = np.full((P, 3), 0.2)
    values[4] = 1.0
    fit = fit_weights(GRID, values, None, ["d0"] * 3)
    assert fit.best == 4 and fit.weights == (0.5, 0.5) and fit.out_of_fold is None


def test_folds_never_split_a_document() -> None:
    rng = np.random.default_rng(3)
    documents = rng.choice([f"doc{j}" for j in range(13)], size=200)
    folds = document_folds(documents, 5, seed=1)
    for document in set(documents.tolist()):
        assert len(set(folds[documents == document].tolist())) == 1
    per_fold = [len(set(documents[folds == f].tolist())) for f in range(5)]
    assert sum(per_fold) == 13 and max(per_fold) - min(per_fold) <= 1 and min(per_fold) >= 2
    assert set(document_folds(["a", "a", "b"], 5).tolist()) == {0, 1}  # K = min(5, m)
    assert set(document_folds(["a", "a"], 5).tolist()) == {0}


def test_each_held_out_document_is_scored_by_weights_fitted_without_it() -> None:
    # ten documents of three queries, five folds of two documents; the last grid point is ahead (1.0 against 0.5) on
    # three documents, both of fold 0 and one of fold 1, and behind by 0.01 on the others. On all ten its lead is
    # beyond one SE (mean 0.143, SE 0.078): kept. Without fold 0 one document is left ahead (mean 0.054, SE 0.064):
    # the fit shrinks to equal weights, and fold 0's queries are scored there, out of fold
    documents = _documents([3] * 10)
    folds = document_folds(documents, 5, seed=0)
    fold_docs = [sorted(set(documents[folds == f].tolist())) for f in range(5)]
    ahead = np.isin(documents, [*fold_docs[0], fold_docs[1][0]])
    values = np.full((P, len(documents)), 0.5)
    values[-1, ahead] = 1.0
    values[-1, ~ahead] = 0.49
    fit = fit_weights(GRID, values, None, documents, seed=0)
    assert fit.chosen == P - 1 and fit.out_of_fold is not None
    for fold in range(5):
        held = folds == fold
        point = shrunk_point(values, None, documents, ~held)
        assert np.array_equal(fit.out_of_fold[held], values[point, held])
    held = folds == 0
    assert shrunk_point(values, None, documents, ~held) == 0
    assert np.all(fit.out_of_fold[held] == 0.5) and np.all(fit.in_sample[held] == 1.0)
    assert fit.out_of_fold.mean() < fit.in_sample.mean()
