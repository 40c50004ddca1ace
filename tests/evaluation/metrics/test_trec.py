"""TREC run and qrels files: round trip, exact scores, pytrec_eval, id validation."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from evaluation.metrics.trec import read_qrels, read_run, write_qrels, write_run

QUERIES = ["q1", "q2", "q3"]
CHUNKS = ["d1_0", "d1_1", "d2_0", "d2_1", "d3_0"]
GOLD = ["d1_1", "d2_0", "d2_0"]


def _top() -> tuple[np.ndarray, np.ndarray]:
    index = np.array([[1, 0, 4], [3, 2, -1], [0, 1, 2]])  # q2 has only 2 results (-1 = padding)
    score = np.array(
        [[0.9, 0.5, 0.1], [0.8, 0.7999999, 0.0], [0.3, 0.3, np.float32(0.1)]],  # a tie and a near tie
        dtype=np.float32,
    )
    return index, score


def test_round_trip(tmp_path: Path) -> None:
    index, score = _top()
    run_path = write_run(tmp_path / "runs" / "dense.trec", QUERIES, CHUNKS, index, score, "dense")
    qrels_path = write_qrels(tmp_path / "qrels.trec", QUERIES, GOLD)
    lines = run_path.read_text().splitlines()
    assert lines[0] == "q1 Q0 d1_1 1 0.899999976 dense"
    assert lines[4] == "q2 Q0 d2_0 2 0.799999893 dense"
    assert len(lines) == 8 and not list(tmp_path.rglob("*.tmp"))
    assert qrels_path.read_text().splitlines()[0] == "q1 0 d1_1 1"

    run = read_run(run_path)
    assert list(run) == QUERIES and list(run["q2"]) == ["d2_1", "d2_0"]
    for q, qid in enumerate(QUERIES):
        for rank, row in enumerate(index[q]):
            if row >= 0:
                assert np.float32(run[qid][CHUNKS[row]]) == score[q, rank]  # exact, ties kept
    assert run["q3"]["d1_0"] == run["q3"]["d1_1"] and run["q2"]["d2_1"] != run["q2"]["d2_0"]
    assert read_qrels(qrels_path) == {"q1": {"d1_1": 1}, "q2": {"d2_0": 1}, "q3": {"d2_0": 1}}


def test_float64_scores_are_exact(tmp_path: Path) -> None:
    scores = np.array([[1 / 3, 1 / 3 - 1e-15]])
    path = write_run(tmp_path / "r.trec", ["q"], ["a", "b"], np.array([[0, 1]]), scores, "s")
    run = read_run(path)
    assert run["q"]["a"] == scores[0, 0] and run["q"]["b"] == scores[0, 1] and run["q"]["a"] > run["q"]["b"]


def test_pytrec_eval_accepts_the_dicts(tmp_path: Path) -> None:
    import pytrec_eval

    index, score = _top()
    run = read_run(write_run(tmp_path / "run.trec", QUERIES, CHUNKS, index, score, "dense"))
    qrels = read_qrels(write_qrels(tmp_path / "qrels.trec", QUERIES, GOLD))
    results = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recip_rank"}).evaluate(run)
    assert results["q1"]["ndcg_cut_10"] == pytest.approx(1.0)
    assert results["q2"]["recip_rank"] == pytest.approx(0.5)
    assert results["q3"]["ndcg_cut_10"] == pytest.approx(0.5)  # gold at rank 3: 1 / log2(4)


@pytest.mark.parametrize(
    ("query_ids", "chunk_ids", "system", "bad"),
    [
        (["q 1", "q2", "q3"], CHUNKS, "dense", "'q 1'"),
        (QUERIES, ["d1_0", "d1\t1", *CHUNKS[2:]], "dense", "'d1\\t1'"),
        (QUERIES, CHUNKS, "my system", "'my system'"),
    ],
)
def test_ids_with_whitespace_are_rejected(tmp_path: Path, query_ids, chunk_ids, system, bad) -> None:
    index, score = _top()
    with pytest.raises(ValueError, match=re.escape(bad) + ".*whitespace"):
        write_run(tmp_path / "run.trec", query_ids, chunk_ids, index, score, system)
    assert not (tmp_path / "run.trec").exists()


def test_qrels_ids_with_whitespace_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'d 1'.*whitespace"):
        write_qrels(tmp_path / "qrels.trec", ["q1"], ["d 1"])
    (tmp_path / "bad.trec").write_text("q1 Q0 d 1 1 0.5 sys\n")
    with pytest.raises(ValueError, match=r"bad\.trec:1: expected 6 fields"):
        read_run(tmp_path / "bad.trec")


def test_invalid_runs_are_rejected(tmp_path: Path) -> None:
    index, score = _top()
    with pytest.raises(ValueError, match="twice"):
        write_run(tmp_path / "r.trec", QUERIES, CHUNKS, np.array([[1, 1, 0], [0, 1, 2], [0, 1, 2]]), score, "s")
    with pytest.raises(ValueError, match="appears twice"):
        write_run(tmp_path / "r.trec", ["q1", "q1", "q3"], CHUNKS, index, score, "s")
    with pytest.raises(ValueError, match="NaN"):
        write_run(tmp_path / "r.trec", QUERIES, CHUNKS, index, np.full(index.shape, np.nan), "s")
    with pytest.raises(ValueError, match="past"):
        write_run(tmp_path / "r.trec", QUERIES, CHUNKS[:2], index, score, "s")
