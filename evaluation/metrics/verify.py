"""Independent check of reported numbers: recompute them from the TREC files with ``pytrec_eval``.

The reports' metrics come from our vectorised ranks (``evaluation/metrics/retrieval.py``); this reads the run
files other tools would read (``runs/<task>/<system>.trec`` and ``qrels.trec``) and recomputes the
mean ``ndcg_cut_10``, ``recall_10`` and ``P_10`` with trec_eval's own code, on every query and on each reported
query subset (its own qrels file, e.g. ``qrels.needs_context.trec``). The run files keep the
top ``top_k`` (>= 10) chunks, so these cut-offs are unaffected by the truncation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytrec_eval

from evaluation.metrics.trec import read_qrels, read_run
from evaluation.results import TaskEvaluation

CHECKED = {"ndcg@10": "ndcg_cut_10", "recall@10": "recall_10", "p@10": "P_10"}


def verify_against_trec_eval(evaluation: TaskEvaluation, reports_dir: Path, tolerance: float = 1e-6) -> list[str]:
    """Problems found (empty when every ok system's means match pytrec_eval within ``tolerance``).

    Checked on every query (``qrels_file``) and on each reported subset (``subset_qrels_files``, e.g.
    ``needs_context``: the same run files scored against the subset's qrels, compared with
    ``SystemRun.subset_metrics``).
    """
    if evaluation.qrels_file is None:
        return [f"{evaluation.task}: no qrels file recorded"]
    problems = _verify_qrels(evaluation, reports_dir, evaluation.qrels_file, None, tolerance)
    for subset, qrels_file in evaluation.subset_qrels_files.items():
        problems += _verify_qrels(evaluation, reports_dir, qrels_file, subset, tolerance)
    return problems


def _verify_qrels(
    evaluation: TaskEvaluation, reports_dir: Path, qrels_file: str, subset: str | None, tolerance: float
) -> list[str]:
    qrels = read_qrels(reports_dir / qrels_file)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(CHECKED.values()))
    label = "" if subset is None else f" ({subset} subset)"
    problems = []
    for run in evaluation.runs:
        if run.status != "ok" or run.run_file is None:
            continue
        metrics = run.metrics if subset is None else run.subset_metrics.get(subset)
        if metrics is None:
            problems.append(f"{evaluation.task}/{run.system}: no metrics recorded for subset {subset!r}")
            continue
        scores = evaluator.evaluate(read_run(reports_dir / run.run_file))
        for ours, theirs in CHECKED.items():
            # trec_eval averages over the qrels' queries; a query absent from the run scores 0.
            values = [scores.get(qid, {}).get(theirs, 0.0) for qid in qrels]
            reference = float(np.mean(values)) if values else float("nan")
            reported = metrics[ours].value
            if not abs(reference - reported) <= tolerance:
                problems.append(
                    f"{evaluation.task}/{run.system}{label}: {ours} reported {reported:.8f}, "
                    f"pytrec_eval {theirs} on {run.run_file} gives {reference:.8f}"
                )
    return problems
