"""Weighted fusion (``kind: fusion``) against rankings computed by hand: min-max and z-score score fusion over each
system's retrieved list, and weighted RRF, over four chunks."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from evaluation.config import EvaluationConfig, FusionSystem
from evaluation.indexed import IndexedSystem, NotRunnable
from evaluation.systems.fusion import prepare_fusion

CHUNKS = ["d1_0", "d1_1", "d2_0", "d2_1"]
SCORES = {  # one query; each system's score of the four chunks
    "a": [4.0, 3.0, 2.0, 1.0],
    "b": [0.0, 2.0, 4.0, 1.0],
    "c": [1.0, 4.0, 0.0, 3.0],
}


def _component(name: str) -> IndexedSystem:
    scores = np.array([SCORES[name]], dtype=np.float32)
    return IndexedSystem(lambda rows: scores[np.zeros(len(rows), dtype=np.int64)], 1.0, 0.5, name, {})


def _ranking(**fields) -> list[str]:
    system = FusionSystem(kind="fusion", name="f", **fields)
    fused = prepare_fusion(system, [(n, _component(n)) for n in system.systems], CHUNKS)
    scores = fused.score_block(np.array([0]))[0]
    # trec order: score descending, equal scores by chunk id descending
    return [CHUNKS[i] for i in sorted(range(4), key=lambda i: (-scores[i], [-ord(ch) for ch in CHUNKS[i]]))]


def test_min_max_fusion_by_hand() -> None:
    # a: (1, 2/3, 1/3, 0); b: (0, 1/2, 1, 1/4)
    # 0.5/0.5: (0.5, 0.583, 0.667, 0.125)
    assert _ranking(systems=("a", "b"), weights=(0.5, 0.5), depth=4) == ["d2_0", "d1_1", "d1_0", "d2_1"]
    # 0.8/0.2: (0.8, 0.633, 0.467, 0.05)
    assert _ranking(systems=("a", "b"), weights=(0.8, 0.2), depth=4) == ["d1_0", "d1_1", "d2_0", "d2_1"]
    # three systems, c: (1/4, 1, 0, 3/4); 0.2/0.3/0.5: (0.325, 0.783, 0.367, 0.45)
    ranking = _ranking(systems=("a", "b", "c"), weights=(0.2, 0.3, 0.5), depth=4)
    assert ranking == ["d1_1", "d2_1", "d2_0", "d1_0"]


def test_chunks_outside_a_retrieved_list_take_its_minimum() -> None:
    # depth 2: a lists d1_0 (1) and d1_1 (0); b lists d2_0 (1) and d1_1 (0); the rest take 0 (the list's minimum)
    # fused 0.5/0.5: d1_0 0.5, d1_1 0, d2_0 0.5, d2_1 0; ties by chunk id descending
    assert _ranking(systems=("a", "b"), weights=(0.5, 0.5), depth=2) == ["d2_0", "d1_0", "d2_1", "d1_1"]


def test_z_score_fusion_by_hand() -> None:
    # a: mean 2.5, std 1.118 -> (1.342, 0.447, -0.447, -1.342); b: mean 1.75, std 1.479 -> (-1.183, 0.169, 1.521,
    # -0.507); 0.5/0.5: (0.079, 0.308, 0.537, -0.924)
    ranking = _ranking(systems=("a", "b"), weights=(0.5, 0.5), normalise="zscore", depth=4)
    assert ranking == ["d2_0", "d1_1", "d1_0", "d2_1"]


def test_weighted_rrf_by_hand() -> None:
    # ranks a: (1, 2, 3, 4), b: (4, 2, 1, 3); k = 1
    # 0.7/0.3: d1_0 .35+.06=.41, d1_1 .233+.1=.333, d2_0 .175+.15=.325, d2_1 .14+.075=.215
    assert _ranking(systems=("a", "b"), method="rrf", k=1, weights=(0.7, 0.3)) == ["d1_0", "d1_1", "d2_0", "d2_1"]
    # 0.3/0.7: d1_0 .15+.14=.29, d1_1 .333, d2_0 .075+.35=.425, d2_1 .06+.175=.235
    assert _ranking(systems=("a", "b"), method="rrf", k=1, weights=(0.3, 0.7)) == ["d2_0", "d1_1", "d1_0", "d2_1"]


def test_fusion_records_its_weights_and_costs() -> None:
    system = FusionSystem(kind="fusion", name="f", systems=("a", "b"), weights=(0.3, 0.7))
    fused = prepare_fusion(system, [(n, _component(n)) for n in system.systems], CHUNKS)
    assert fused.details["weights"] == {"a": 0.3, "b": 0.7} and fused.details["fitted"] is False
    assert fused.index_seconds == 2.0 and fused.query_seconds == 1.0
    assert "0.3 a + 0.7 b" in fused.description


def test_unfitted_weights_do_not_run() -> None:
    system = FusionSystem(kind="fusion", name="f", systems=("a", "b"))
    assert system.fitted
    with pytest.raises(NotRunnable, match="validation split"):
        prepare_fusion(system, [(n, _component(n)) for n in system.systems], CHUNKS)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"weights": (0.5, 0.6)}, "sum to 1"),
        ({"weights": (1.0,)}, "1 given for 2 systems"),
        # the registry refuses weights given and fitted at once (conteb.yaml's comment and the manual say so)
        pytest.param(
            {"weights": (0.5, 0.5), "fit": "validation"},
            r"set either weights \(fixed\) or fit: validation \(fitted\), not both",
            id="fields2-not both",
        ),
    ],
)
def test_bad_weights_are_refused(fields, message) -> None:
    with pytest.raises(ValidationError, match=message):
        FusionSystem(kind="fusion", name="f", systems=("a", "b"), **fields)


def test_select_names_declared_systems_and_fusions_fuse_declared_ones() -> None:
    systems = [{"name": "bm25", "kind": "bm25"}, {"name": "t", "kind": "bm25", "context": "title"}]
    fusion = {"name": "f", "kind": "fusion", "systems": ["bm25", "t"]}
    config = EvaluationConfig.model_validate({"systems": [*systems, fusion], "select": ["bm25", "f"]})
    assert [s.name for s in config.components(config.system("f"))] == ["bm25", "t"]
    with pytest.raises(ValidationError, match="select: undeclared"):
        EvaluationConfig.model_validate({"systems": systems, "select": ["nope"]})
    with pytest.raises(ValidationError, match="fuses undeclared"):
        EvaluationConfig.model_validate({"systems": [systems[0], fusion]})
