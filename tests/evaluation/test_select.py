"""The product's choice on validation (evaluation/select.py): the grid, the fit, and that test labels never reach
the choice or the fitted weights (the real runner on real corpora)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from evaluation.config import EvaluationConfig
from evaluation.corpus import EvalCorpus
from evaluation.indexed import IndexedSystem
from evaluation.runner import evaluate_task
from evaluation.select import _Validation, fit_and_select, weight_grid
from tests.evaluation.systems.test_fusion import CHUNKS, SCORES
from tests.evaluation.toy import toy_corpus

SYSTEMS = [
    {"name": "a", "kind": "bm25"},
    {"name": "b", "kind": "bm25", "context": "title"},
]


def test_the_grid_is_small_and_starts_at_equal_weights() -> None:
    assert len(weight_grid(2)) == 11 and len(weight_grid(3)) == 21 and len(weight_grid(4)) == 35
    assert weight_grid(2)[0] == (0.5, 0.5)
    assert all(abs(sum(w) - 1) < 1e-9 and min(w) >= 0 for w in weight_grid(3))


def _fixed(name: str) -> IndexedSystem:
    scores = np.array([SCORES[name]], dtype=np.float32)
    return IndexedSystem(lambda rows: scores[np.zeros(len(rows), dtype=np.int64)], 0.0, 0.0, name, {})


def test_weights_fitted_by_hand() -> None:
    # min-max a: (1, .667, .333, 0), b: (0, .5, 1, .25); gold d1_0 ranks first only for w_a > 0.6: the first such grid
    # point from equal weights is (0.7, 0.3); (0.6, 0.4) ties three chunks and loses on chunk id. One query of one
    # document cannot tell that point from noise: the weights used are equal (evaluation/weights.py), and with nothing
    # to hold out the fusion has no cross-validated score and is no candidate
    corpus = EvalCorpus(
        name="t", source="t", split="validation", chunk_ids=CHUNKS, chunks=CHUNKS, doc_ids=["d1", "d1", "d2", "d2"],
        chunk_index=np.array([0, 1, 0, 1], dtype=np.int32), titles=[None] * 4, query_ids=["q"], queries=["?"],
        gold=np.array([0]),
    )  # fmt: skip
    config = EvaluationConfig.model_validate(
        {
            "systems": [*SYSTEMS, {"name": "f", "kind": "fusion", "systems": ["a", "b"], "depth": 4}],
            "select": ["b", "f"],
        }
    )
    lines: list[str] = []
    fitted, selection = fit_and_select(config, corpus, lambda s: _fixed(s.name), [config.system("f")], log=lines.append)
    assert fitted == {"f": (0.5, 0.5)}
    assert selection is not None and selection.chosen == "b"
    assert selection.grid_best == {"f": {"a": 0.7, "b": 0.3}} and selection.fitted_weights == {
        "f": {"a": 0.5, "b": 0.5}
    }
    assert selection.in_sample["f"]["all"] < 1.0 and "f" not in selection.validation
    assert "f: no cross-validated score (fewer than two validation documents)" in selection.notes
    assert selection.by_rule["earlier rule"] == "f"  # the earlier rule took the grid's best point, in-sample
    assert any("shrunk from {'a': 0.7, 'b': 0.3}" in line for line in lines)


def _with_gold(corpus: EvalCorpus, gold: list[int], split: str) -> EvalCorpus:
    return dataclasses.replace(corpus, gold=np.array(gold, dtype=np.int64), split=split)


def test_test_labels_cannot_change_the_choice_or_the_weights(tmp_path: Path) -> None:
    config = EvaluationConfig.model_validate(
        {
            "systems": [*SYSTEMS, {"name": "f", "kind": "fusion", "systems": ["a", "b"]}],
            "select": ["a", "b", "f"],
            "chunk_sizes": {"sizes": []},
        }
    )
    validation = _with_gold(toy_corpus(), [2, 3, 5], "validation")
    outcomes = []
    for i, test_gold in enumerate(([2, 3, 5], [0, 1, 4], [1, 4, 0])):  # the test split's labels, changed
        test = _with_gold(toy_corpus(), test_gold, "test")
        evaluation = evaluate_task(
            test, config, models_dir=tmp_path / "models", reports_dir=tmp_path / f"r{i}", validation=validation
        )
        assert evaluation.selection is not None and evaluation.selection.chosen is not None
        fused = evaluation.run("f")
        assert fused is not None and fused.status == "ok"
        outcomes.append((evaluation.selection, fused.details["weights"], evaluation.run("a").metrics["ndcg@10"].value))
    selections, weights, test_values = zip(*outcomes, strict=True)
    assert all(s == selections[0] for s in selections) and all(w == weights[0] for w in weights)
    assert len(set(test_values)) > 1  # the test labels did change the test numbers
    assert weights[0] == selections[0].fitted_weights["f"]
    # the validation labels do reach the choice: the same run with validation labels changed fits or chooses anew
    moved = evaluate_task(
        toy_corpus(), config, models_dir=tmp_path / "models", reports_dir=tmp_path / "v",
        validation=_with_gold(toy_corpus(), [0, 1, 4], "validation"),
    )  # fmt: skip
    assert moved.selection is not None and moved.selection.validation != selections[0].validation


def test_a_fitted_fusion_is_compared_by_its_out_of_fold_score(tmp_path: Path) -> None:
    # six documents of three chunks and three queries, random scores of two systems: the fusion's validation score is
    # the mean of its out-of-fold values (folds of whole documents), its in-sample score that of the weights fitted
    # on every validation document, the ones used on test
    rng = np.random.default_rng(4)
    docs = [f"doc{j}" for j in range(6)]
    chunk_ids = [f"{d}_{i}" for d in docs for i in range(3)]
    corpus = EvalCorpus(
        name="t", source="t", split="validation", chunk_ids=chunk_ids, chunks=chunk_ids,
        doc_ids=[c.split("_")[0] for c in chunk_ids], chunk_index=np.tile(np.arange(3, dtype=np.int32), 6),
        titles=[None] * 18, query_ids=[f"q{i}" for i in range(18)], queries=["?"] * 18, gold=np.arange(18),
    )  # fmt: skip
    scores = {name: rng.normal(size=(18, 18)).astype(np.float32) for name in ("a", "b")}
    scores["a"][np.arange(18), np.arange(18)] += np.repeat([2.5, 2.5, 2.5, 2.5, 0.0, 0.0], 3)  # a finds most golds
    scores["b"][np.arange(18), np.arange(18)] += np.repeat([0.0, 0.0, 0.0, 0.0, 2.5, 2.5], 3)  # b the others

    def prepare(system) -> IndexedSystem:
        return IndexedSystem(lambda rows: scores[system.name][rows], 0.0, 0.0, system.name, {})

    config = EvaluationConfig.model_validate(
        {
            "systems": [*SYSTEMS, {"name": "f", "kind": "fusion", "systems": ["a", "b"], "depth": 18}],
            "select": ["f", "a", "b"],
        }
    )
    fitted, selection = fit_and_select(config, corpus, prepare, [config.system("f")])
    assert selection is not None and selection.folds == 5 and selection.tiers == {"f": 0, "a": 0, "b": 0}
    validation = _Validation(corpus, prepare, config)
    fit = validation.fit(config.system("f"))  # type: ignore[arg-type]
    assert fit.out_of_fold is not None and fitted["f"] == fit.weights
    assert selection.validation["f"]["all"] == np.mean(fit.out_of_fold)
    assert selection.in_sample["f"]["all"] == np.mean(fit.in_sample)
    assert selection.validation["f"] != selection.in_sample["f"]
    assert set(selection.by_rule) == {"earlier rule", "shrunk weights", "cross-validated scores", "tie rule",
                                      "simplicity"} and selection.decision  # fmt: skip
