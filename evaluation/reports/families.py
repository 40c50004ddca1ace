"""One Holm family per task in the reproduce report: every paired comparison the report states for a task, adjusted
together, so that a comparison reads the same wherever the report shows it.

The reproduce report states, for one task, the margins of the recommended pipeline's target
(:mod:`evaluation.reports.pipeline_target`) and of the trained model's target (:mod:`evaluation.reports.target`),
and, for the experiment's main task, the evaluation's own comparisons (the recommended pipeline against the best cheap
baseline, each tested system against it, the configured pairs: :mod:`evaluation.comparisons`) and the paper's effects
(:mod:`evaluation.reports.paper`). Each was first adjusted within its own section. A pair of systems on one subset is
one test wherever it appears (the document-level figures do not depend on the order of the queries,
:class:`evaluation.metrics.stats.Clustered`; ``a − b`` and ``b − a`` are one test), so the report's family for a task
is the set of its distinct tests (DESIGN.md, "Statistics": a report's paired comparisons are one family), adjusted by
:func:`evaluation.metrics.stats.holm`; every verdict and cause is then read again from the adjusted p.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass

from evaluation.metrics.stats import holm
from evaluation.reports.paper import PaperComparison, summarize_comparison, verdict_of
from evaluation.reports.pipeline_target import PipelineTarget
from evaluation.reports.target import Margin, TaskTarget, recompute_causes
from evaluation.results import TaskEvaluation, is_missing

Key = tuple[frozenset[str], str]
"""A test: the two systems (either order) and the subset."""


def key_of(a: str, b: str, subset: str) -> Key:
    return frozenset((a, b)), subset


@dataclass
class ReportInputs:
    """What the reproduce report states: the main task's evaluation and paper comparison, every task's targets."""

    evaluation: TaskEvaluation
    comparison: PaperComparison
    targets: list[TaskTarget]
    pipeline_targets: list[PipelineTarget]


def _targets(inputs: ReportInputs) -> list[TaskTarget | PipelineTarget]:
    return [*inputs.targets, *inputs.pipeline_targets]


def _margins(target: TaskTarget | PipelineTarget) -> list[Margin]:
    if isinstance(target, TaskTarget):
        return [*target.margins, *([target.handicap] if target.handicap is not None else [])]
    return [*([target.titles] if target.titles else []), *target.against_best.values(), *target.against_every]


def task_family(inputs: ReportInputs, task: str) -> dict[Key, float]:
    """The distinct tests the report states for ``task``, each with its unadjusted document-level p (the first
    occurrence's: every occurrence computes the same)."""
    raw: dict[Key, float] = {}
    margins = [m for t in _targets(inputs) if t.task == task for m in _margins(t)]
    for margin in margins:
        if margin.is_test:
            raw.setdefault(key_of(margin.system, margin.rival, margin.subset), margin.p_value)
    if inputs.evaluation.task == task:
        for c in [*inputs.evaluation.comparisons, *inputs.evaluation.subset_comparisons]:
            if not is_missing(c.p_value):
                raw.setdefault(key_of(c.system_a, c.system_b, c.subset), c.p_value)
    if inputs.comparison.task == task:
        for effect in inputs.comparison.effects:
            if effect.p_value is not None and effect.verdict != "not measured":
                raw.setdefault(key_of(effect.system_a, effect.system_b, effect.subset), effect.p_value)
    return raw


def _adjusted(margin: Margin, adjusted: dict[Key, float]) -> Margin:
    if not margin.is_test:
        return margin
    return dataclasses.replace(margin, p_adjusted=adjusted[key_of(margin.system, margin.rival, margin.subset)])


def one_family_per_task(inputs: ReportInputs) -> ReportInputs:
    """A copy of ``inputs`` with every comparison's adjusted p taken over its task's family (:func:`task_family`), the
    paper's verdicts and summary, and the trained model's target causes, read again from them."""
    out = copy.deepcopy(inputs)
    tasks = {t.task for t in _targets(out)} | {out.evaluation.task, out.comparison.task}
    for task in sorted(tasks):
        raw = task_family(out, task)
        adjusted = dict(zip(raw, holm(list(raw.values())), strict=True))
        for target in out.targets:
            if target.task == task:
                target.margins = [_adjusted(m, adjusted) for m in target.margins]
                target.handicap = _adjusted(target.handicap, adjusted) if target.handicap is not None else None
                recompute_causes(target)
        for pipeline in out.pipeline_targets:
            if pipeline.task == task:
                pipeline.titles = _adjusted(pipeline.titles, adjusted) if pipeline.titles is not None else None
                pipeline.against_best = {s: _adjusted(m, adjusted) for s, m in pipeline.against_best.items()}
                pipeline.against_every = [_adjusted(m, adjusted) for m in pipeline.against_every]
        if out.evaluation.task == task:
            for c in [*out.evaluation.comparisons, *out.evaluation.subset_comparisons]:
                if not is_missing(c.p_value):
                    c.p_adjusted = adjusted[key_of(c.system_a, c.system_b, c.subset)]
        if out.comparison.task == task:
            for effect in out.comparison.effects:
                if effect.p_value is not None and effect.verdict != "not measured":
                    effect.p_adjusted = adjusted[key_of(effect.system_a, effect.system_b, effect.subset)]
                    points = effect.points if effect.points is not None else 0.0
                    effect.verdict = verdict_of(
                        points, effect.p_adjusted, authors_measured=effect.paper_source is not None
                    )
            out.comparison.summary = summarize_comparison(out.comparison)
    return out
