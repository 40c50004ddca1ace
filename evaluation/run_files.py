"""The files an evaluation writes under ``reports_dir``, and reading them back (fixed layout, other tools read it)::

    runs/<task>/qrels.trec                 qid 0 chunk_id 1
    runs/<task>/qrels.needs_context.trec   the same, for the needs_context queries (when labelled)
    runs/<task>/<system>.trec              qid Q0 chunk_id rank score system (top_k per query)
    runs/<task>/<system>.metrics.parquet   per-query metrics (conteb.schemas.per_query_metrics_schema)
    tasks/<task>/evaluation.json           the TaskEvaluation (every number of the reports)

:mod:`evaluation.runner` writes them; the reports, the comparisons and ``conteb evaluate`` read them.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from conteb.ids import split_chunk_id
from evaluation.metrics import trec
from evaluation.results import TaskEvaluation, from_json


def runs_dir(reports_dir: Path, task: str) -> Path:
    return reports_dir / "runs" / task


def evaluation_path(reports_dir: Path, task: str) -> Path:
    return reports_dir / "tasks" / task / "evaluation.json"


def task_paths(task: str) -> list[str]:
    """The folders (relative to ``reports_dir``) that evaluating ``task`` writes: its run files and its evaluation."""
    return [str(runs_dir(Path(), task)), str(evaluation_path(Path(), task).parent)]


def per_query_path(reports_dir: Path, task: str, system: str) -> Path:
    return runs_dir(reports_dir, task) / f"{system}.metrics.parquet"


def read_per_query(reports_dir: Path, task: str, system: str, metric: str) -> dict[str, float] | None:
    """query id -> ``metric`` from the per-query metrics ``system`` wrote for ``task`` (None: no such file)."""
    path = per_query_path(reports_dir, task, system)
    if not path.is_file():
        return None
    table = pq.read_table(path, columns=["query_id", metric])
    return dict(zip(table.column("query_id").to_pylist(), table.column(metric).to_pylist(), strict=True))


def read_query_documents(reports_dir: Path, task: str) -> dict[str, str] | None:
    """query id -> its document, the unit of every document-level test: the document part of its gold chunk id in the
    task's ``qrels.trec`` (:func:`conteb.ids.split_chunk_id`; the first gold chunk when there are several); None when
    the task wrote no qrels."""
    path = runs_dir(reports_dir, task) / "qrels.trec"
    if not path.is_file():
        return None
    judged = trec.read_qrels(path)
    return {qid: split_chunk_id(min(c for c, rel in gold.items() if rel > 0))[0] for qid, gold in judged.items()}


def load_evaluation(reports_dir: Path, task: str) -> TaskEvaluation | None:
    """The task's last ``evaluation.json``, or None."""
    path = evaluation_path(reports_dir, task)
    return from_json(path.read_text(encoding="utf-8")) if path.is_file() else None
