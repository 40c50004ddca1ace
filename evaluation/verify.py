"""Independent check of reported numbers: recompute them from the TREC files with ``pytrec_eval``.

The reports' metrics come from our vectorised ranks (``evaluation/metrics.py``); this reads the run
files other tools would read (``runs/<task>/<system>.trec`` and ``qrels.trec``) and recomputes the
mean ``ndcg_cut_10``, ``recall_10`` and ``P_10`` with trec_eval's own code. The run files keep the
top ``top_k`` (>= 10) chunks, so these cut-offs are unaffected by the truncation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytrec_eval

from evaluation.results import TaskEvaluation
from evaluation.trec import read_qrels, read_run

CHECKED = {"ndcg@10": "ndcg_cut_10", "recall@10": "recall_10", "p@10": "P_10"}


def verify_against_trec_eval(evaluation: TaskEvaluation, reports_dir: Path, tolerance: float = 1e-6) -> list[str]:
    """Problems found (empty when every ok system's means match pytrec_eval within ``tolerance``)."""
    if evaluation.qrels_file is None:
        return [f"{evaluation.task}: no qrels file recorded"]
    qrels = read_qrels(reports_dir / evaluation.qrels_file)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(CHECKED.values()))
    problems = []
    for run in evaluation.runs:
        if run.status != "ok" or run.run_file is None:
            continue
        scores = evaluator.evaluate(read_run(reports_dir / run.run_file))
        for ours, theirs in CHECKED.items():
            # trec_eval averages over the qrels' queries; a query absent from the run scores 0.
            values = [scores.get(qid, {}).get(theirs, 0.0) for qid in qrels]
            reference = float(np.mean(values)) if values else float("nan")
            reported = run.metrics[ours].value
            if not abs(reference - reported) <= tolerance:
                problems.append(
                    f"{evaluation.task}/{run.system}: {ours} reported {reported:.8f}, "
                    f"pytrec_eval {theirs} on {run.run_file} gives {reference:.8f}"
                )
    return problems
