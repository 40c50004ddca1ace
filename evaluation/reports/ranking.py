"""The order of systems in every report table and figure, and the family each system is coloured by.

Contract: pure functions of results (:mod:`evaluation.results`). :func:`by_score` is the one ordering rule: best
score first, ties and unscored items (a system that did not run) after, each group in its given order.
:func:`task_scores` / :func:`overall_scores` are the scores the report sorts systems by (nDCG@10 on one task; the
mean over the tasks a system ran on). :func:`run_family` is the one owner of a system's family (lexical, dense,
contextual, trained, fusion), read from the run alone, so files written before families existed read the same.
:func:`best_cheap_baseline` names the runner's best cheap baseline of a task (its ``best_baseline`` comparisons).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal, TypeVar

from evaluation.results import ALL, BEST_BASELINE, HEADLINE, PROVENANCE_RECORDED, SystemRun, TaskEvaluation, is_missing

T = TypeVar("T")
Family = Literal["lexical", "dense", "contextual", "trained", "fusion"]

FAMILIES: tuple[Family, ...] = ("lexical", "dense", "contextual", "trained", "fusion")
"""Every family, in legend order."""

FAMILY_COLORS: dict[Family, str] = {
    "lexical": "#7f7f7f",  # grey
    "dense": "#1f77b4",  # blue
    "contextual": "#ff7f0e",  # orange
    "trained": "#d62728",  # red
    "fusion": "#2ca02c",  # green
}
"""One colour per family (five hues a reader tells apart); systems are never told apart by colour alone."""


def by_score(items: Iterable[T], score: Callable[[T], float | None]) -> list[T]:
    """``items`` best first by ``score``; those scored ``None`` or NaN last; ties keep their given order."""

    def rank(item: T) -> tuple[bool, float]:
        value = score(item)
        return (True, 0.0) if value is None or is_missing(value) else (False, -float(value))

    return sorted(items, key=rank)  # stable: ties, and the unscored, keep their order


def headline(run: SystemRun | None) -> float | None:
    """nDCG@10 of ``run`` when it ran (``None`` otherwise)."""
    if run is None or run.status != "ok" or HEADLINE not in run.metrics:
        return None
    value = run.metrics[HEADLINE].value
    return None if is_missing(value) else value


def task_scores(evaluation: TaskEvaluation) -> dict[str, float | None]:
    """Each system of ``evaluation`` -> its nDCG@10 (``None``: not run, failed, or not measured)."""
    return {run.system: headline(run) for run in evaluation.runs}


def overall_scores(evaluations: Sequence[TaskEvaluation]) -> dict[str, float | None]:
    """Each system -> its mean nDCG@10 over the tasks it ran on (``None``: it ran on none), first appearance first."""
    values: dict[str, list[float]] = {}
    for evaluation in evaluations:
        for run in evaluation.runs:
            values.setdefault(run.system, [])
            if (value := headline(run)) is not None:
                values[run.system].append(value)
    return {system: (sum(v) / len(v) if v else None) for system, v in values.items()}


def ranked_systems(scores: Mapping[str, float | None]) -> list[str]:
    """The systems of ``scores`` (:func:`task_scores`, :func:`overall_scores`) best first, unscored last."""
    return by_score(scores, scores.get)


def ranked_runs(evaluation: TaskEvaluation) -> list[SystemRun]:
    """The runs of ``evaluation`` best nDCG@10 first, the runs that did not run last."""
    return by_score(evaluation.runs, headline)


def chunk_size_systems(evaluation: TaskEvaluation) -> list[str]:
    """The systems of ``evaluation``'s chunk-size study, best nDCG@10 on the task first (the order of its table
    and its figure)."""
    return by_score(dict.fromkeys(point.system for point in evaluation.chunk_sizes), task_scores(evaluation).get)


def run_family(run: SystemRun) -> Family:
    """The family of ``run``: ``bm25`` -> lexical; ``hybrid`` / ``fusion`` -> fusion; a model trained here (a
    training asset, ``details["trained"]``, or recorded training documents) -> trained; ``contextual`` (LLM contexts)
    or late chunking (``details["context"] == "late"``) -> contextual; any other model -> dense."""
    if run.kind == "bm25":
        return "lexical"
    if run.kind in ("hybrid", "fusion"):
        return "fusion"
    if run.details.get("trained") or run.provenance == PROVENANCE_RECORDED:
        return "trained"
    if run.kind == "contextual" or run.details.get("context") == "late":
        return "contextual"
    return "dense"


def best_cheap_baseline(evaluation: TaskEvaluation) -> str | None:
    """The best cheap baseline of ``evaluation`` on all queries (the ``system_b`` of its ``best_baseline``
    comparisons, :mod:`evaluation.comparisons`); ``None`` when no tested system was compared with one."""
    return next(
        (c.system_b for c in evaluation.comparisons if c.plan == BEST_BASELINE and c.subset == ALL),
        None,
    )
