"""The paired comparisons of a reading, one per line, grouped by what they compare.

Contract: :func:`task_groups` and :func:`overall_groups` sort the paired comparisons of one task or of every task
into short groups (:class:`ComparisonGroup`), in this order, each comparison in the first group it fits:

1. :data:`AGAINST_BASELINES` — the contextual systems against the cheap baselines: a comparison with the best cheap
   baseline (``plan == BEST_BASELINE``) or with a run whose ``role`` is ``baseline`` (``evaluation/comparisons.py``);
2. :data:`TRAINED` — one side's model is trained (``details["trained"]`` set), the other's is not;
3. :data:`OTHER_PAIRS` — every other configured pair (late chunking vs independent chunks, ...);
4. :data:`ON_NEEDS_CONTEXT` — every comparison on the queries that need context.

Empty groups are left out; within a group the significant comparisons (Holm-adjusted p < 0.05,
:meth:`~evaluation.results.Comparison.significant`) come first. :func:`comparison_line` is one comparison in words
(:mod:`evaluation.reports.significance`: the document-level interval, the adjusted p, queries and documents, the
direction, and the detectable difference beside "no measurable difference"; the Dagster ``reading`` metadata and the
tests read it); the reports show each group as a small table (:mod:`evaluation.reports.subsets`). Numbers are
formatted as the reports format them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evaluation.comparisons import BASELINE
from evaluation.reports.significance import adjusted_p_words, interval_text, sizes_text, verdict_text
from evaluation.results import BEST_BASELINE, HEADLINE, Comparison, TaskEvaluation

AGAINST_BASELINES = "Contextual systems vs the cheap baselines"
TRAINED = "Trained vs untrained"
OTHER_PAIRS = "Other pairs"
ON_NEEDS_CONTEXT = "On the queries that need context"


@dataclass(frozen=True)
class ComparisonGroup:
    """Comparisons of one kind (``title``), significant first; ``with_task``: over several tasks (each line and row
    names its task)."""

    title: str
    comparisons: tuple[Comparison, ...]
    with_task: bool = False

    def lines(self) -> list[str]:
        """One line per comparison: ``<title>: <comparison_line>``."""
        return [f"{self.title}: {comparison_line(c, self.with_task)}" for c in self.comparisons]


def against_text(c: Comparison) -> str:
    """``A vs B``, the best cheap baseline named so (``A vs the best cheap baseline (B)``)."""
    against = f"the best cheap baseline ({c.system_b})" if c.plan == BEST_BASELINE else c.system_b
    return f"{c.system_a} vs {against}"


def comparison_text(c: Comparison) -> str:
    """``A vs B +0.123 [+0.101, +0.145] (adjusted p = 1.0e-04, 200 queries of 40 documents)`` (the metric named when
    it is not nDCG@10; the interval over documents)."""
    metric = "" if c.metric == HEADLINE else f" on {c.metric}"
    sizes = sizes_text(c.n_queries, c.n_documents)
    return f"{against_text(c)}{metric} {interval_text(c)} ({adjusted_p_words(c)}, {sizes})"


def comparison_line(c: Comparison, with_task: bool = False) -> str:
    """One comparison in words, with its verdict from the adjusted p (:func:`evaluation.reports.significance.
    verdict_text`: a direction, or no measurable difference with the difference the test set detects)."""
    return f"{c.task + ': ' if with_task else ''}{comparison_text(c)}: {verdict_text(c)}."


def _kind(evaluation: TaskEvaluation, c: Comparison) -> str:
    """The group of an all-queries comparison (module docstring, rules 1-3)."""
    runs = [evaluation.run(c.system_a), evaluation.run(c.system_b)]
    if c.plan == BEST_BASELINE or any(r is not None and r.role == BASELINE for r in runs):
        return AGAINST_BASELINES
    trained = [bool(r is not None and r.details.get("trained")) for r in runs]
    return TRAINED if trained[0] != trained[1] else OTHER_PAIRS


def _significant_first(comparisons: Sequence[Comparison]) -> tuple[Comparison, ...]:
    return tuple(sorted(comparisons, key=lambda c: not c.significant()))


def _groups(pairs: Sequence[tuple[TaskEvaluation, Comparison, bool]], with_task: bool) -> list[ComparisonGroup]:
    """``(evaluation, comparison, on the subset)`` sorted into the module's groups, empty ones left out."""
    order = (AGAINST_BASELINES, TRAINED, OTHER_PAIRS, ON_NEEDS_CONTEXT)
    members: dict[str, list[Comparison]] = {title: [] for title in order}
    for evaluation, c, on_subset in pairs:
        members[ON_NEEDS_CONTEXT if on_subset else _kind(evaluation, c)].append(c)
    return [ComparisonGroup(title, _significant_first(members[title]), with_task) for title in order if members[title]]


def task_groups(evaluation: TaskEvaluation) -> list[ComparisonGroup]:
    """The task's comparisons in groups (the subset's only when some queries need context)."""
    pairs = [(evaluation, c, False) for c in evaluation.comparisons]
    if evaluation.n_needs_context:
        pairs += [(evaluation, c, True) for c in evaluation.subset_comparisons]
    return _groups(pairs, with_task=False)


def overall_groups(evaluations: Sequence[TaskEvaluation]) -> list[ComparisonGroup]:
    """Every task's comparisons on all queries in groups, each line naming its task (the subsets: each task's
    report)."""
    return _groups([(e, c, False) for e in evaluations for c in e.comparisons], with_task=True)
