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

:func:`comparison_plan` lists them; the runner (``evaluation/runner.py``) then tests, on all queries and again on the
``needs_context`` subset, each tested system that ran against the **best baseline on those queries**
(:meth:`ComparisonPlan.best_baseline`: the highest mean of the significance metric over exactly the queries of the
test, ties to the first declared). The best is picked on the same data it is tested on, which can only make the
comparison harder for the tested system (:data:`BEST_BASELINE_RULE` says so in the reports). Then come the configured
pairs (``significance.comparisons``), less any pair the first part already tested.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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
