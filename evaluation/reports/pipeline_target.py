"""The deployable pipeline's target on each evaluated task (issue 26), measured on the test split only.

The pipeline is the one ``evaluation.select`` chose on the validation split (:mod:`evaluation.select`). Its target:

1. **Never significantly worse than the best cheap baseline**, on all queries and on ``needs_context``: for each
   subset, the cheap baseline with the highest test mean there (the runs whose role is ``baseline``,
   :mod:`evaluation.comparisons`) minus the pipeline is not significantly positive (paired randomization test,
   p < :data:`~evaluation.results.SIGNIFICANCE_LEVEL`). A pipeline that is that baseline meets it trivially.
2. **Where titles do not carry the context**, the pipeline contains the model trained here and beats every cheap
   baseline significantly, on both subsets.

Whether titles carry a task's context is declared where the task's source says so (a controlled source with
``titles: uninformative`` is built so that its titles name nothing), and measured elsewhere: they do when the best
cheap baseline with a title header (:data:`evaluation.reports.target.HEADER_SYSTEMS`) beats the best cheap baseline
without one significantly on the ``needs_context`` queries (on all queries when the task has no labels). The
measured difference is reported in both cases: on the uninformative-title task of the reproduce run it was +0.003,
significant over 224 queries yet no context at all, which is why a declaration, where there is one, wins over a
significance test. Either way it decides only which part of the target applies, never the pipeline: the choice was
made on validation before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from evaluation.reports.target import HEADER_SYSTEMS, Margin, paired_margin
from evaluation.results import ALL, NEEDS_CONTEXT, SIGNIFICANCE_LEVEL


@dataclass
class PipelineTarget:
    """The target of the chosen ``pipeline`` on one task (module docstring).

    ``against_best``: subset -> the pipeline − the best cheap baseline of that subset; ``titles``: the best title
    header baseline − the best one without, on the subset that decides whether titles carry the context;
    ``against_every``: the pipeline − each cheap baseline (part 2; measured on every task, judged only where titles do
    not carry the context). Verdicts are None when they cannot be measured."""

    task: str
    pipeline: str | None
    contains_trained: bool
    queries: dict[str, int]
    titles_declared: bool | None = None  # the task's source says whether its titles name its subject; None: silent
    against_best: dict[str, Margin] = field(default_factory=dict)
    titles: Margin | None = None
    against_every: list[Margin] = field(default_factory=list)

    @property
    def titles_carry_context(self) -> bool | None:
        if self.titles_declared is not None:
            return self.titles_declared
        return None if self.titles is None else (self.titles.difference > 0 and self.titles.significant)

    @property
    def never_worse(self) -> bool | None:
        if self.pipeline is None or not self.against_best:
            return None
        return all(not (m.difference < 0 and m.significant) for m in self.against_best.values())

    @property
    def beats_every_cheap_baseline(self) -> bool | None:
        if self.pipeline is None or not self.against_every:
            return None
        return self.contains_trained and all(m.difference > 0 and m.significant for m in self.against_every)

    @property
    def met(self) -> bool | None:
        if self.never_worse is None:
            return None
        if self.titles_carry_context is False:
            beats = self.beats_every_cheap_baseline
            return None if beats is None else self.never_worse and beats
        return self.never_worse


def _subsets(per_query: Mapping[str, Mapping[str, float]], needs_context: Mapping[str, bool] | None) -> dict:
    ids = sorted(next(iter(per_query.values())).keys()) if per_query else []
    subsets = {ALL: ids}
    if needs_context is not None:
        labelled = [q for q in ids if needs_context.get(q)]
        if labelled:
            subsets[NEEDS_CONTEXT] = labelled
    return subsets


def _best(per_query: Mapping[str, Mapping[str, float]], systems: Sequence[str], ids: Sequence[str]) -> str | None:
    """The system of ``systems`` with the highest mean over ``ids`` (the first declared on a tie)."""
    ran = [s for s in systems if s in per_query]
    if not ran or not ids:
        return None
    means = {s: float(np.mean([per_query[s][q] for q in ids])) for s in ran}
    return max(ran, key=lambda s: (means[s], -ran.index(s)))


def pipeline_target(
    task: str,
    pipeline: str | None,
    contains_trained: bool,
    baselines: Sequence[str],
    per_query: Mapping[str, Mapping[str, float]],
    needs_context: Mapping[str, bool] | None,
    titles_declared: bool | None = None,
) -> PipelineTarget:
    """The target of ``pipeline`` on ``task`` from per-query test nDCG@10 (``per_query[system][query_id]``), the
    cheap ``baselines`` (names, in declaration order), the ``needs_context`` labels (None: the task has none) and
    what the task's source declares of its titles (``titles_declared``; None: measured)."""
    subsets = _subsets(per_query, needs_context)
    counts = {s: len(ids) for s, ids in subsets.items()}
    target = PipelineTarget(task, pipeline, contains_trained, counts, titles_declared)
    cheap = [b for b in baselines if b in per_query]
    deciding = subsets.get(NEEDS_CONTEXT, subsets[ALL])
    with_title = _best(per_query, [b for b in cheap if b in HEADER_SYSTEMS], deciding)
    without = _best(per_query, [b for b in cheap if b not in HEADER_SYSTEMS], deciding)
    if with_title and without:
        subset = NEEDS_CONTEXT if NEEDS_CONTEXT in subsets else ALL
        target.titles = paired_margin(per_query, with_title, without, subset, deciding)
    if pipeline is None or pipeline not in per_query:
        target.pipeline = None
        return target
    for subset, ids in subsets.items():
        best = _best(per_query, cheap, ids)
        if best is not None and best != pipeline:
            target.against_best[subset] = paired_margin(per_query, pipeline, best, subset, ids)
        elif best == pipeline:
            target.against_best[subset] = Margin(pipeline, best, subset, 0.0, 0.0, 0.0, 1.0, len(ids))
        target.against_every += [paired_margin(per_query, pipeline, b, subset, ids) for b in cheap if b != pipeline]
    if pipeline in cheap:  # a cheap baseline cannot beat itself: part 2 is missed by construction
        target.against_every.append(Margin(pipeline, pipeline, ALL, 0.0, 0.0, 0.0, 1.0, len(subsets[ALL])))
    return target


def _yes_no(value: bool | None) -> str:
    return "–" if value is None else ("yes" if value else "no")


def verdict_words(target: PipelineTarget) -> str:
    return {True: "met", False: "missed", None: "not measured"}[target.met]


def pipeline_target_sentences(target: PipelineTarget) -> list[str]:
    """The verdict of ``target`` in words, each part with its figures; where it is missed, by how much."""
    if target.pipeline is None:
        return [f"{target.task}: no pipeline was chosen on validation, so the target is not measured."]
    lines = []
    for subset, margin in target.against_best.items():
        worse = margin.difference < 0 and margin.significant
        what = "it is the best cheap baseline" if margin.rival == margin.system else margin.words()
        lines.append(
            f"{target.task}, {subset}: {'significantly worse than' if worse else 'not significantly worse than'} "
            f"the best cheap baseline: {what}."
        )
    carry = target.titles_carry_context
    if carry is not None:
        how = "declared by the task's source" if target.titles_declared is not None else "measured"
        measured = f"; best title header against best without: {target.titles.words()}" if target.titles else ""
        lines.append(f"{target.task}: titles {'carry' if carry else 'do not carry'} the context ({how}{measured}).")
        if carry is False:
            losing = [m for m in target.against_every if not (m.difference > 0 and m.significant)]
            lines.append(
                f"{target.task}: where titles do not carry the context the pipeline must contain the trained model "
                f"({'it does' if target.contains_trained else 'it does not'}) and beat every cheap baseline "
                "significantly: "
                + (
                    "it does, on both subsets."
                    if not losing
                    else "it does not: " + "; ".join(f"{m.subset}: {m.words()}" for m in losing[:4]) + "."
                )
            )
    lines.append(f"{target.task}: target {verdict_words(target)}.")
    return lines


def target_row(target: PipelineTarget) -> tuple[str, ...]:
    """One table row: task, pipeline, trained?, Δ against the best cheap baseline (all, needs_context) with p, titles
    carry the context?, verdict."""

    def cell(subset: str) -> str:
        margin = target.against_best.get(subset)
        if margin is None:
            return "–"
        if margin.rival == margin.system:
            return "is the best cheap baseline"
        return f"{margin.difference:+.3f} vs {margin.rival} (p = {margin.p_value:.2g})"

    return (
        target.task,
        target.pipeline or "–",
        _yes_no(target.contains_trained if target.pipeline else None),
        cell(ALL),
        cell(NEEDS_CONTEXT),
        _yes_no(target.titles_carry_context),
        verdict_words(target),
    )


TARGET_HEADER = (
    "task",
    "pipeline (chosen on validation)",
    "contains the trained model",
    "vs the best cheap baseline, all",
    "vs the best cheap baseline, needs_context",
    "titles carry the context",
    "target",
)
TARGET_RULE = (
    "The target of the pipeline the product chooses (issue 26), on each task's test split: never significantly worse "
    "than the best cheap baseline (all queries and needs_context; paired randomization test, p < "
    f"{SIGNIFICANCE_LEVEL}); and where titles do not carry the context (the best title-header baseline does not beat "
    "the best one without significantly on needs_context), the pipeline contains the trained model and beats every "
    "cheap baseline significantly. Whether titles carry the context is what the task's source declares (the held-out "
    "task with uninformative titles), else measured. The pipeline was chosen on the validation split; test decides "
    "nothing."
)
