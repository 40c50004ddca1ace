"""The choice on validation (evaluation/choice.py): the simplest candidate unless a more complex one leads by a
margin the document bootstrap supports; ties to the simpler, never to the order of declaration; and the record of
what the earlier rule would have chosen. Per-query values built by hand."""

from __future__ import annotations

import itertools
import json

import numpy as np

from evaluation.choice import Candidate, choose, complexity, fewest_documents
from evaluation.config import EvaluationConfig
from evaluation.results import EARLIER_RULE, Selection, TaskEvaluation, from_json, to_json


def _documents(m: int, size: int = 5) -> np.ndarray:
    return np.repeat([f"d{j:02d}" for j in range(m)], size)


def _candidate(name: str, tier: int, values, parts: int = 1, in_sample=None, grid_best=None) -> Candidate:
    values = np.asarray(values, dtype=np.float64)
    inside = values if in_sample is None else np.asarray(in_sample, dtype=np.float64)
    best = inside if grid_best is None else np.asarray(grid_best, dtype=np.float64)
    return Candidate(name, tier, parts, values, inside, best)


def test_complexity_follows_the_declaration() -> None:
    config = EvaluationConfig.model_validate(
        {
            "systems": [
                {"name": "bm25", "kind": "bm25"},
                {"name": "title-prefix", "kind": "dense", "context": "title"},
                {"name": "late", "kind": "dense", "context": "late"},
                {"name": "hybrid-title", "kind": "hybrid", "systems": ["bm25", "title-prefix"]},
                {"name": "fused", "kind": "fusion", "systems": ["bm25", "late"]},
                {"name": "fused3", "kind": "fusion", "systems": ["bm25", "title-prefix", "late"]},
            ]
        }
    )
    tiers = {s.name: complexity(s, config) for s in config.systems}
    assert tiers == {
        "bm25": (0, 1),
        "title-prefix": (0, 1),
        "late": (1, 1),
        "hybrid-title": (0, 2),
        "fused": (2, 2),
        "fused3": (2, 3),
    }


def test_a_tie_goes_to_the_simpler_whatever_the_order_of_declaration() -> None:
    documents = _documents(8)
    same = np.full(len(documents), 1.0)
    candidates = [
        _candidate("fused-insent", 2, same, parts=2),
        _candidate("insent", 1, same),
        _candidate("hybrid-title", 0, same, parts=2),
        _candidate("bm25-title", 0, same),
        _candidate("bm25", 0, same),
    ]
    for order in itertools.permutations(candidates):
        choice = choose(order, None, documents, resamples=200)
        assert choice.chosen == "bm25"  # tier 0, one system; bm25 before bm25-title by name
        assert choice.notes == [
            "cannot decide between bm25, bm25-title, hybrid-title, insent, fused-insent on validation: each 1.000; "
            "bm25 taken by name among the equally simple"
        ]
    # without an equally simple rival the note says the simplest was taken
    choice = choose(candidates[:3], None, documents, resamples=200)
    assert choice.chosen == "hybrid-title" and choice.notes[0].endswith("hybrid-title taken as the simplest")


def test_a_fusion_tied_in_sample_but_behind_out_of_fold_is_not_chosen() -> None:
    documents = _documents(10)
    model = np.full(len(documents), 0.8)
    fusion = _candidate("fused", 2, model - 0.05, parts=2, in_sample=model, grid_best=model)
    choice = choose([fusion, _candidate("insent", 1, model)], None, documents, resamples=200)
    assert choice.chosen == "insent"
    assert choice.by_rule[EARLIER_RULE] == "fused"  # in-sample tie, declared first: the earlier rule took it
    # ahead in-sample on every document, level out of fold: the in-sample lead would be supported, it is not read
    ahead = _candidate("fused", 2, model, parts=2, in_sample=model + 0.1 + 0.01 * (np.arange(len(model)) % 4))
    choice = choose([ahead, _candidate("insent", 1, model)], None, documents, resamples=200)
    assert choice.chosen == "insent" and choice.by_rule["shrunk weights"] == "fused"


def test_a_large_consistent_lead_over_many_documents_is_chosen() -> None:
    documents = _documents(12)
    rng = np.random.default_rng(0)
    baseline = rng.uniform(0.3, 0.6, len(documents))
    model = baseline + 0.2 + rng.uniform(-0.05, 0.05, len(documents))
    fusion = model + 0.1
    candidates = [
        _candidate("bm25-title", 0, baseline),
        _candidate("insent", 1, model),
        _candidate("fused-insent", 2, fusion, parts=2),
    ]
    choice = choose(candidates, None, documents, resamples=500)
    assert choice.chosen == "fused-insent"
    assert choice.decision.startswith("insent replaced bm25-title (cheap baseline): lead +0.2")
    assert "fused-insent replaced insent (one model): lead +0.100 [lower bound +0.1" in choice.decision
    assert "over 12 documents" in choice.decision


def test_a_small_or_inconsistent_lead_is_not_supported() -> None:
    documents = _documents(12)
    baseline = np.full(len(documents), 0.5)
    ahead = np.repeat(np.where(np.arange(12) < 6, 0.2, -0.15), 5)  # mean +0.025, half the documents behind
    choice = choose(
        [_candidate("insent", 1, baseline + ahead), _candidate("bm25", 0, baseline)], None, documents, resamples=500
    )
    assert choice.chosen == "bm25"
    assert choice.decision.startswith("simplest: bm25, the best cheap baseline; no more complex candidate led")
    assert "closest: insent +0.025 [lower bound -" in choice.decision


def test_too_few_documents_support_no_lead() -> None:
    assert fewest_documents(0.05) == 5 and fewest_documents(0.05 / 7) == 8
    for m in (1, 2, 4):  # every document far ahead: the bootstrap alone would support it from two documents on
        documents = _documents(m, size=10)
        baseline = np.full(len(documents), 0.3)
        choice = choose(
            [_candidate("bm25", 0, baseline), _candidate("insent", 1, baseline + 0.5)], None, documents, resamples=500
        )
        assert choice.chosen == "bm25", m
        assert f"insent +0.500 over {m} document(s), too few to support a lead (at least 5)" in choice.decision
    documents = _documents(5, size=10)  # five documents, all ahead: supported
    baseline = np.full(len(documents), 0.3)
    lead = baseline + 0.5 + 0.01 * (np.arange(len(documents)) % 7)
    assert choose([_candidate("bm25", 0, baseline), _candidate("insent", 1, lead)], None, documents).chosen == "insent"
    # a tier's candidates share the level (Bonferroni): with a second model, 0.025 each, five documents are too few
    second = _candidate("late-chunking", 1, baseline + 0.1)
    choice = choose([_candidate("bm25", 0, baseline), _candidate("insent", 1, lead), second], None, documents)
    assert choice.chosen == "bm25" and "too few to support a lead (at least 6)" in choice.decision


def test_the_criterion_queries_are_the_needs_context_ones() -> None:
    documents = _documents(10, size=4)
    needs = np.tile([True, True, False, False], 10)
    baseline = np.full(len(documents), 0.6)
    model = np.where(needs, 0.9, 0.2)  # far ahead where context is needed, behind on all queries
    choice = choose([_candidate("bm25", 0, baseline), _candidate("insent", 1, model)], needs, documents)
    assert choice.chosen == "insent"
    assert choose([_candidate("bm25", 0, baseline), _candidate("insent", 1, model)], None, documents).chosen == "bm25"


def test_the_record_says_what_each_rule_changed() -> None:
    documents = _documents(10)
    n = len(documents)
    base, model = np.full(n, 0.8), np.full(n, 0.8)
    fusion = _candidate(
        "fused", 2, np.full(n, 0.78), parts=2, in_sample=np.full(n, 0.82), grid_best=np.full(n, 0.85)
    )  # fmt: skip
    candidates = [_candidate("insent", 1, model), fusion, _candidate("bm25-title", 0, base)]
    choice = choose(candidates, None, documents, resamples=200)
    assert choice.by_rule == {
        "earlier rule": "fused",
        "shrunk weights": "fused",
        "cross-validated scores": "insent",  # out of fold the fusion is behind; insent ties bm25-title, declared first
        "tie rule": "bm25-title",
        "simplicity": "bm25-title",
    }
    selection = Selection(split="validation", chosen=choice.chosen, by_rule=choice.by_rule, folds=5)
    assert selection.changed_by() == ["cross-validated scores", "tie rule"]
    # the shrinkage alone changes it: with shrunk weights the fusion falls below the model in-sample
    shrunk = _candidate("fused", 2, np.full(n, 0.7), parts=2, in_sample=np.full(n, 0.79), grid_best=np.full(n, 0.9))
    record = choose([shrunk, _candidate("insent", 1, model + 0.05)], None, documents, resamples=200).by_rule
    assert record["earlier rule"] == "fused" and record["shrunk weights"] == "insent"
    assert Selection(split="validation", by_rule=record).changed_by() == ["shrunk weights"]


def test_the_selection_round_trips_and_older_files_still_load() -> None:
    selection = Selection(
        split="validation",
        candidates=["bm25", "fused"],
        chosen="bm25",
        validation={"bm25": {"all": 0.5}, "fused": {"all": 0.45}},
        fitted_weights={"fused": {"bm25": 0.5, "insent": 0.5}},
        in_sample={"fused": {"all": 0.55}},
        grid_best={"fused": {"bm25": 0.9, "insent": 0.1}},
        tiers={"bm25": 0, "fused": 2},
        folds=5,
        decision="simplest: bm25",
        by_rule={"earlier rule": "fused", "shrunk weights": "fused", "cross-validated scores": "bm25",
                 "tie rule": "bm25", "simplicity": "bm25"},
        notes=["cannot decide between a, b on validation: each 1.000; a taken by name among the equally simple"],
    )  # fmt: skip
    evaluation = TaskEvaluation("t", "s", "test", 1, 1, 1, selection=selection)
    assert from_json(to_json(evaluation)).selection == selection
    assert selection.shrunk() == ["fused"] and selection.changed_by() == ["cross-validated scores"]
    older = json.loads(to_json(evaluation))
    for key in ("in_sample", "grid_best", "tiers", "folds", "decision", "by_rule"):
        del older["selection"][key]
    loaded = from_json(json.dumps(older)).selection
    assert loaded is not None and loaded.folds == 0 and loaded.by_rule == {} and loaded.changed_by() == []
    assert loaded.validation == selection.validation and loaded.shrunk() == []


def test_a_split_too_small_to_support_a_lead_says_it_cannot_decide() -> None:
    # issue 33: two validation documents, three candidates tied at 1.000; no lead can be supported over two
    # documents (2**-m <= 0.05 needs m >= 5): the note says the choice is the simplest by default, not the best
    documents = _documents(2)
    same = np.full(len(documents), 1.0)
    candidates = [
        _candidate("fused", 2, same, parts=2),
        _candidate("insent", 1, same),
        _candidate("hybrid-title", 0, same, parts=2),
    ]
    choice = choose(candidates, None, documents, resamples=200)
    assert choice.chosen == "hybrid-title"
    assert choice.notes[0] == (
        "cannot decide on validation: 2 document(s) cannot support any lead (needs >= 5); hybrid-title kept as the "
        "simplest, not as the best"
    )
    # a model ahead on both documents is not taken either, and the note stays
    behind = _candidate("hybrid-title", 0, same * 0.5, parts=2)
    better = choose([behind, _candidate("insent", 1, same)], None, documents, resamples=200)
    assert better.chosen == "hybrid-title" and better.notes[0].startswith("cannot decide on validation: 2 document(s)")

    # enough documents for one tier but not for the other's three candidates (needs >= 6): that tier is named
    def tiers(m: int) -> list[Candidate]:
        ones = np.full(len(_documents(m)), 1.0)
        fused = [_candidate(f"fused{i}", 2, ones, parts=2) for i in range(3)]
        return [_candidate("bm25", 0, ones * 0.5), _candidate("insent", 1, ones), *fused]

    partial = choose(tiers(5), None, _documents(5), resamples=200)
    assert partial.chosen == "insent"
    assert partial.notes[0] == (
        "cannot decide on validation for the fusion with a model candidates: 5 document(s) cannot support a lead "
        "among 3 (needs >= 6)"
    )
    # six documents support a lead of every tier here: no such note
    assert not any("cannot support" in n for n in choose(tiers(6), None, _documents(6), resamples=200).notes)
