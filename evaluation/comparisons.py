"""Which paired comparisons an evaluation makes: one rule, built from the declared systems, that every report shows.

A contextual method is better only if it beats the cheapest thing a user would try first. So each system is either a
*cheap baseline* or *tested* (:func:`system_role`, from its declaration alone):

* **baseline**: needs no training, no LLM and no model reading the document beyond a title header: every ``bm25``
  (words, subwords, with or without the title), dense ``context: independent`` and ``context: title`` (title-prefix)
  and ``late_interaction`` ``context: independent`` on an untrained model, and a ``hybrid`` or ``fusion`` whose
  components are all baselines. Independent chunks count as a baseline: a user tries them first too, and one more
  candidate can only make the comparison harder for the tested systems.
* **tested**: everything else: late chunking (plain, anchored, with a header), any trained model (InSeNT, the
  fine-tuned control), ``contextual`` (LLM contexts), late interaction over late chunking, a hybrid with a tested
  component.

A system's own ``role`` (``baseline`` or ``tested``) overrides the rule: the rule reads the declaration only, so a
model given by folder or hub id (``model:``) counts as untrained; the reproduce experiment declares its trained model
folders ``role: tested`` (``evaluation/experiment.py``).

:func:`comparison_plan` lists them; :func:`compare_systems` then tests, on all queries and again on the
``needs_context`` subset, each tested system that ran against the **best baseline on those queries**
(:meth:`ComparisonPlan.best_baseline`: the highest mean of the significance metric over exactly the queries of the
test, ties to the first declared). The best is picked on the same data it is tested on, which can only make the
comparison harder for the tested system (:data:`BEST_BASELINE_RULE` says so in the reports). Then come the configured
pairs (``significance.comparisons``), less any pair the first part already tested.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluation.config import (
    BM25System,
    ContextualSystem,
    DenseSystem,
    EvaluationConfig,
    FusionSystem,
    HybridSystem,
    LateInteractionSystem,
    Role,
    SystemConfig,
)
from evaluation.metrics.stats import paired
from evaluation.results import ALL, BEST_BASELINE, CONFIGURED, Comparison, TaskEvaluation
from evaluation.run_files import read_per_query

BASELINE: Role = "baseline"
TESTED: Role = "tested"

BEST_BASELINE_RULE = (
    "Each tested system (late chunking, anchored windows, title headers inside windows, InSeNT, the fine-tuned "
    "control, LLM contexts) is tested against the best cheap baseline of the task (BM25 in every variant, "
    "independent chunks, title-prefix, hybrids of these): the best by {metric} on the same queries it is tested on. "
    "Picking the best on the same data can only make the comparison harder for the tested system."
)
"""The rule in words (``{metric}`` to fill), as the reports state it above the comparisons."""


def system_role(system: SystemConfig, config: EvaluationConfig) -> Role:
    """``baseline`` or ``tested``: the system's own ``role``, else the rule (module docstring); a hybrid's components
    are looked up in ``config``."""
    if system.role is not None:
        return system.role
    match system:
        case BM25System():
            return BASELINE
        case HybridSystem() | FusionSystem():
            parts = config.components(system)
            return BASELINE if all(system_role(part, config) == BASELINE for part in parts) else TESTED
        case ContextualSystem():
            return TESTED
        case DenseSystem():
            cheap = system.trained is None and system.context in ("independent", "title")
            return BASELINE if cheap else TESTED
        case LateInteractionSystem():
            return BASELINE if system.trained is None and system.context == "independent" else TESTED
    raise TypeError(f"unknown system config {system!r}")  # pragma: no cover


@dataclass(frozen=True)
class ComparisonPlan:
    """The comparisons of an evaluation (module docstring): ``baselines`` and ``tested`` in declared order, the
    configured pairs, and the metric the best baseline is picked by (the significance metric)."""

    baselines: tuple[str, ...]
    tested: tuple[str, ...]
    configured: tuple[tuple[str, str], ...]
    metric: str

    def role(self, system: str) -> Role | None:
        """The role of a declared system, None for a name the plan does not know."""
        return BASELINE if system in self.baselines else TESTED if system in self.tested else None

    def best_baseline(self, means: Mapping[str, float]) -> str | None:
        """The baseline with the highest mean in ``means`` (baseline -> mean of the metric over the tested queries;
        baselines that did not run are absent; NaN never wins), ties to the first declared; None when none is there."""
        best: str | None = None
        for name in self.baselines:
            value = means.get(name)
            if value is None or value != value:  # absent or NaN
                continue
            if best is None or value > means[best]:
                best = name
        return best


def comparison_plan(config: EvaluationConfig) -> ComparisonPlan:
    """The plan of ``config``'s declared systems and significance settings."""
    roles = {system.name: system_role(system, config) for system in config.systems}
    return ComparisonPlan(
        baselines=tuple(name for name, role in roles.items() if role == BASELINE),
        tested=tuple(name for name, role in roles.items() if role == TESTED),
        configured=tuple(config.significance.comparisons),
        metric=config.significance.metric,
    )


def compare_systems(
    evaluation: TaskEvaluation,
    config: EvaluationConfig,
    reports_dir: Path,
    query_ids: Sequence[str],
    documents: Mapping[str, str],
    subset: str = ALL,
) -> list[Comparison]:
    """The paired tests of the comparison plan (:func:`comparison_plan`) between systems that ran, on
    ``query_ids`` (the task's current queries, or those of ``subset``, recorded in each comparison): first each tested
    system against the best cheap baseline on these queries (``plan`` :data:`~evaluation.results.BEST_BASELINE`, the
    candidates' means in ``baselines``), then the configured pairs not already tested. ``documents``: query id ->
    its document, the unit of every test and interval (:func:`evaluation.metrics.stats.paired`); ``p_adjusted`` is
    left for the caller, who knows the whole family (:func:`evaluation.metrics.stats.adjust_family`)."""
    significance = config.significance
    plan = comparison_plan(config)
    ok = {run.system for run in evaluation.runs if run.status == "ok"}
    per_query: dict[str, dict[str, float] | None] = {}

    def values(system: str) -> dict[str, float] | None:
        if system not in per_query:
            per_query[system] = read_per_query(reports_dir, evaluation.task, system, significance.metric)
        return per_query[system]

    def test(a: str, b: str, kind: str, baselines: dict[str, float] | None = None) -> Comparison | None:
        values_a, values_b = values(a), values(b)
        if values_a is None or values_b is None:
            return None
        shared = [q for q in query_ids if q in values_a and q in values_b]
        x = np.array([values_a[q] for q in shared], dtype=np.float64)
        y = np.array([values_b[q] for q in shared], dtype=np.float64)
        boot = config.bootstrap
        result = paired(
            x, y, [documents[q] for q in shared], significance.method, significance.resamples, boot.resamples,
            boot.confidence, boot.seed,
        )  # fmt: skip
        return Comparison(
            task=evaluation.task,
            system_a=a,
            system_b=b,
            metric=significance.metric,
            mean_a=float(x.mean()),
            mean_b=float(y.mean()),
            difference=result.difference,
            p_value=result.p_value,
            n_queries=len(shared),
            n_documents=result.n_documents,
            p_query=result.p_query,
            ci_low=result.ci_low,
            ci_high=result.ci_high,
            mdd=result.mdd,
            method=significance.method,
            resamples=significance.resamples,
            subset=subset,
            plan=kind,
            baselines=dict(baselines or {}),
        )

    means: dict[str, float] = {}
    for name in plan.baselines:
        scores = values(name) if name in ok else None
        on_queries = [scores[q] for q in query_ids if q in scores] if scores is not None else []
        if on_queries:
            means[name] = float(np.mean(on_queries))
    best = plan.best_baseline(means)
    comparisons: list[Comparison] = []
    if best is not None:  # a chosen pipeline (evaluation.select) that is a cheap baseline: tested against the best
        chosen = [evaluation.selection.chosen] if evaluation.selection and evaluation.selection.chosen else []
        for name in [*plan.tested, *(n for n in chosen if n in plan.baselines and n != best)]:
            if name in ok and (comparison := test(name, best, BEST_BASELINE, means)) is not None:
                comparisons.append(comparison)
    done = {(c.system_a, c.system_b) for c in comparisons}
    for a, b in plan.configured:
        if a in ok and b in ok and (a, b) not in done and (comparison := test(a, b, CONFIGURED)) is not None:
            comparisons.append(comparison)
    return comparisons
