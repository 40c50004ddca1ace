"""How the pipeline was chosen on validation (:mod:`evaluation.choice`), in the reports.

* :func:`validation_blocks`: the validation part of a task's "Recommended pipeline" block: the split and the rule,
  the rule step that decided, what the earlier rule would have chosen and which rule changed it, the weights the
  shrinkage moved, the candidates' validation table (a fitted fusion's cross-validated score beside its in-sample one,
  marked so) and the notes (candidates left out, ties the split cannot decide).
* :func:`rule_count_blocks`: across the tasks of one run (the reproduce report), how often each rule changed a choice,
  and task by task what the earlier rule would have chosen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evaluation.choice import TIER_WORDS
from evaluation.reports.document import Block, Heading, Paragraph, Span, Table, number, text
from evaluation.reports.formatting import format_metric
from evaluation.results import ALL, EARLIER_RULE, NEEDS_CONTEXT, RULES, Selection

RULE_WORDS = {
    "shrunk weights": "fusion weights shrunk toward equal (one-standard-error rule)",
    "cross-validated scores": "fitted fusions scored out of fold (cross-validation over documents)",
    "tie rule": "exact ties to the simpler, then by name (not the first declared)",
    "simplicity": "the simplest unless a more complex candidate leads by a supported margin",
}
"""Each rule after the earlier one (:data:`evaluation.results.RULES`), in words."""


def _weights(weights: Mapping[str, float]) -> str:
    return " / ".join(f"{w:.2g} {name}" for name, w in weights.items())


def _record_line(selection: Selection) -> str | None:
    """What the earlier rule would have chosen and which rules changed it; None in a file without the record."""
    if EARLIER_RULE not in selection.by_rule:
        return None
    earlier = selection.by_rule[EARLIER_RULE] or "nothing"
    changed = selection.changed_by()
    if not changed:
        return f"The earlier rule (the highest in-sample score, ties to the first declared) chose {earlier} too."
    steps = "; ".join(f"{RULE_WORDS[rule]}: {selection.by_rule[rule]}" for rule in changed)
    return (
        f"The earlier rule (the highest in-sample score, ties to the first declared) would have chosen {earlier}; "
        f"changed by {steps}."
    )


def _pair(means: Mapping[str, float] | None) -> str:
    if not means:
        return "–"
    if NEEDS_CONTEXT in means:
        return f"{format_metric(means[NEEDS_CONTEXT])} / {format_metric(means.get(ALL))}"
    return format_metric(means.get(ALL))


def validation_blocks(selection: Selection) -> list[Block]:
    """The validation part of the recommended pipeline (module docstring)."""
    lines = [
        f"Chosen on the {selection.split} split ({selection.n_documents:,} documents, {selection.n_queries:,} queries, "
        f"disjoint from train and test): {selection.rule}."
    ]
    if selection.decision:
        lines.append(f"Decided by: {selection.decision}.")
    record = _record_line(selection)
    if record:
        lines.append(record)
    moved = [
        f"{name} from {_weights(selection.grid_best[name])} to {_weights(selection.fitted_weights[name])}"
        for name in selection.shrunk()
    ]
    if moved:
        lines.append("Weights shrunk toward equal (one-standard-error rule over documents): " + "; ".join(moved) + ".")
    blocks: list[Block] = [Paragraph((Span(line),)) for line in lines]
    if selection.validation:
        blocks += _table(selection)
    if selection.notes:
        blocks.append(Paragraph((Span("Notes: " + "; ".join(selection.notes) + "."),)))
    return blocks


def _table(selection: Selection) -> list[Block]:
    """The candidates' validation scores; a fitted fusion's in-sample score beside its cross-validated one."""
    older = selection.folds == 0  # a file written before cross-validation: fitted fusions' scores are in-sample
    fitted = bool(selection.in_sample)
    if older:
        scores = " (in-sample for fitted fusions: written before cross-validation)" if selection.fitted_weights else ""
    elif fitted:
        scores = (
            f" (a fitted fusion's cross-validated: each query scored by weights fitted on the other "
            f"{selection.folds - 1} of {selection.folds} folds of whole documents; its in-sample score beside it)"
        )
    else:
        scores = ""
    header: tuple[str, ...] = ("Candidate", "Complexity", "Validation needs_context", "Validation all")
    if fitted:
        header += ("In-sample, fitted weights (needs_context / all)",)
    rows = tuple(
        (
            text(name + (" (chosen)" if name == selection.chosen else "")),
            text(TIER_WORDS[selection.tiers[name]] if name in selection.tiers else "–"),
            number(format_metric(means.get(NEEDS_CONTEXT))),
            number(format_metric(means.get(ALL))),
            *((number(_pair(selection.in_sample.get(name))),) if fitted else ()),
        )
        for name, means in selection.validation.items()
    )
    return [
        Paragraph((Span(f"Validation nDCG@10 of each candidate{scores}:"),)),
        Table("recommended-validation", header, rows),
    ]


def rule_counts(selections: Sequence[Selection]) -> dict[str, int]:
    """Per rule after the earlier one (:data:`~evaluation.results.RULES`), how many of ``selections`` it changed
    (a choice changed by a rule when the choice after it differs from the choice before it); ``recorded``: how many
    selections carry the record, ``shrunk``: fitted fusions whose weights the shrinkage moved."""
    recorded = [s for s in selections if EARLIER_RULE in s.by_rule]
    counts = {rule: sum(rule in s.changed_by() for s in recorded) for rule in RULES[1:]}
    return {**counts, "recorded": len(recorded), "shrunk": sum(len(s.shrunk()) for s in recorded)}


def rule_count_blocks(selections: Sequence[tuple[str, Selection]]) -> list[Block]:
    """The reproduce report's account of the choice across tasks (module docstring); ``[]`` without a selection."""
    if not selections:
        return []
    counts = rule_counts([s for _, s in selections])
    changed = sum(bool(s.changed_by()) for _, s in selections)
    summary = (
        f"Across {len(selections)} task(s) with a choice ({counts['recorded']} with the record), the earlier rule's "
        f"choice changed on {changed}: "
        + "; ".join(f"{RULE_WORDS[rule]}: {counts[rule]}" for rule in RULES[1:])
        + f" (each rule counted where adding it, in this order, changed the choice of the rules before it); the "
        f"shrinkage moved the weights of {counts['shrunk']} fitted fusion(s)."
    )
    rows = tuple(
        (
            text(task),
            text(selection.chosen or "none"),
            text(selection.by_rule.get(EARLIER_RULE) or "–" if selection.by_rule else "not recorded"),
            text(", ".join(selection.changed_by()) or "–"),
            text(selection.decision or "–"),
        )
        for task, selection in selections
    )
    return [
        Heading("How the pipeline was chosen, task by task", 2),
        Paragraph((Span(summary),)),
        Table("choice-rules", ("task", "chosen", "earlier rule's choice", "changed by", "decided by"), rows),
    ]
