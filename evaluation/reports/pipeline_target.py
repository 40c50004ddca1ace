"""The deployable pipeline's target on each evaluated task (issue 26), measured on the test split only.

The pipeline is the one ``evaluation.select`` chose on the validation split (:mod:`evaluation.select`). Its target:

1. **Never significantly worse than the best cheap baseline**, on all queries and on ``needs_context``: for each
   subset, the cheap baseline with the highest test mean there (the runs whose role is ``baseline``,
   :mod:`evaluation.comparisons`) minus the pipeline is not significantly positive. A pipeline that is that baseline
   meets it trivially.
2. **Where titles do not carry the context**, the pipeline contains the model trained here and beats every cheap
   baseline significantly, on both subsets.

Every margin is a paired comparison with whole documents as the units (:func:`evaluation.reports.target.paired_margin`:
the document sign-flip test, the 95% CI from a bootstrap over documents, the minimum detectable difference); the
margins of one task's target are one family, Holm-adjusted together (:func:`evaluation.reports.target.adjust_margins`),
and "significant" means adjusted p < :data:`~evaluation.results.SIGNIFICANCE_LEVEL`.

Whether titles carry a task's context is declared where the task's source says so (a controlled source with
``titles: uninformative`` is built so that its titles name nothing), and measured elsewhere: they do when the best
cheap baseline with a title header (:data:`evaluation.reports.target.HEADER_SYSTEMS`) beats the best cheap baseline
without one significantly on the ``needs_context`` queries (on all queries when the task has no labels). A
declaration, where there is one, wins over the test (a small difference can be significant with titles that name
nothing; ``bench/BENCHMARKS.md`` records the runs), but the measured document-level figure is always shown beside it.
Either way it decides only which part of the target applies, never the pipeline: the choice was made on validation
before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from evaluation.reports.significance import adjusted_p_words, detectable_text, format_mdd, interval_text, sizes_text
from evaluation.reports.target import HEADER_SYSTEMS, Margin, adjust_margins, paired_margin
from evaluation.results import ALL, NEEDS_CONTEXT, NO_MEASURABLE_DIFFERENCE, SIGNIFICANCE_LEVEL


@dataclass
class PipelineTarget:
    """The target of the chosen ``pipeline`` on one task (module docstring).

    ``against_best``: subset -> the pipeline − the best cheap baseline of that subset; ``titles``: the best title
    header baseline − the best one without, on the subset that decides whether titles carry the context;
    ``against_every``: the pipeline − each cheap baseline (part 2; measured on every task, judged only where titles do
    not carry the context). All of them one Holm family. ``queries``/``documents``: per subset, how many. Verdicts are
    None when they cannot be measured."""

    task: str
    pipeline: str | None
    contains_trained: bool
    queries: dict[str, int]
    titles_declared: bool | None = None  # the task's source says whether its titles name its subject; None: silent
    against_best: dict[str, Margin] = field(default_factory=dict)
    titles: Margin | None = None
    against_every: list[Margin] = field(default_factory=list)
    documents: dict[str, int] = field(default_factory=dict)

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


def _itself(pipeline: str, subset: str, ids: Sequence[str], documents: Mapping[str, str]) -> Margin:
    """The placeholder of a pipeline against itself (it is that cheap baseline): no test, never significant."""
    n_documents = len({documents[q] for q in ids})
    return Margin(pipeline, pipeline, subset, 0.0, 0.0, 0.0, 1.0, len(ids), n_documents, p_adjusted=1.0)


def pipeline_target(
    task: str,
    pipeline: str | None,
    contains_trained: bool,
    baselines: Sequence[str],
    per_query: Mapping[str, Mapping[str, float]],
    needs_context: Mapping[str, bool] | None,
    documents: Mapping[str, str],
    titles_declared: bool | None = None,
) -> PipelineTarget:
    """The target of ``pipeline`` on ``task`` from per-query test nDCG@10 (``per_query[system][query_id]``), the
    cheap ``baselines`` (names, in declaration order), the ``needs_context`` labels (None: the task has none), the
    document of each query (``documents``: the units of every test) and what the task's source declares of its titles
    (``titles_declared``; None: measured)."""
    subsets = _subsets(per_query, needs_context)
    target = PipelineTarget(task, pipeline, contains_trained, {s: len(ids) for s, ids in subsets.items()})
    target.titles_declared = titles_declared
    target.documents = {s: len({documents[q] for q in ids}) for s, ids in subsets.items()}
    cheap = [b for b in baselines if b in per_query]
    deciding = subsets.get(NEEDS_CONTEXT, subsets[ALL])
    with_title = _best(per_query, [b for b in cheap if b in HEADER_SYSTEMS], deciding)
    without = _best(per_query, [b for b in cheap if b not in HEADER_SYSTEMS], deciding)
    titles = []
    if with_title and without:
        subset = NEEDS_CONTEXT if NEEDS_CONTEXT in subsets else ALL
        titles = [paired_margin(per_query, with_title, without, subset, deciding, documents)]
    if pipeline is None or pipeline not in per_query:
        target.pipeline = None
        target.titles = adjust_margins(titles)[0] if titles else None
        return target
    against_best: dict[str, Margin] = {}
    against_every: list[Margin] = []
    for subset, ids in subsets.items():
        best = _best(per_query, cheap, ids)
        if best is not None and best != pipeline:
            against_best[subset] = paired_margin(per_query, pipeline, best, subset, ids, documents)
        elif best == pipeline:
            against_best[subset] = _itself(pipeline, subset, ids, documents)
        against_every += [paired_margin(per_query, pipeline, b, subset, ids, documents) for b in cheap if b != pipeline]
    if pipeline in cheap:  # a cheap baseline cannot beat itself: part 2 is missed by construction
        against_every.append(_itself(pipeline, ALL, subsets[ALL], documents))
    family = adjust_margins([*titles, *against_best.values(), *against_every])  # one Holm family: this task's target
    target.titles = family[0] if titles else None
    target.against_best = dict(zip(against_best, family[len(titles) : len(titles) + len(against_best)], strict=True))
    target.against_every = family[len(titles) + len(against_best) :]
    return target


def _yes_no(value: bool | None) -> str:
    return "–" if value is None else ("yes" if value else "no")


def verdict_words(target: PipelineTarget) -> str:
    return {True: "met", False: "missed", None: "not measured"}[target.met]


def _against_best_sentence(target: PipelineTarget, subset: str, margin: Margin) -> str:
    """Part 1 on one subset in words: the direction against the best cheap baseline, its figures, and the difference
    the test set detects when there is no measurable one."""
    sizes = sizes_text(target.queries.get(subset, 0), target.documents.get(subset))
    if margin.rival == margin.system:
        return f"{target.task}, {subset} ({sizes}): it is the best cheap baseline."
    direction = margin.direction()
    if direction == NO_MEASURABLE_DIFFERENCE:
        return (
            f"{target.task}, {subset}: no measurable difference from the best cheap baseline: {margin.words()}; "
            f"{detectable_text(margin.mdd, margin.n_documents)}."
        )
    return f"{target.task}, {subset}: {direction} than the best cheap baseline: {margin.words()}."


def _losing_text(margin: Margin) -> str:
    """One cheap baseline the pipeline does not beat significantly, in words."""
    if not margin.is_test:
        return f"{margin.subset}: {margin.system} is itself a cheap baseline"
    return f"{margin.subset}: {margin.words()}: {margin.verdict()}"


def pipeline_target_sentences(target: PipelineTarget) -> list[str]:
    """The verdict of ``target`` in words, each part with its document-level figures; where it is missed, by how
    much; whether titles carry the context, the declaration (where there is one) beside the measured figure."""
    if target.pipeline is None:
        return [f"{target.task}: no pipeline was chosen on validation, so the target is not measured."]
    lines = [_against_best_sentence(target, subset, margin) for subset, margin in target.against_best.items()]
    carry = target.titles_carry_context
    if carry is not None:
        how = "declared by the task's source" if target.titles_declared is not None else "measured"
        measured = (
            f"; best title header against best without, by documents: {target.titles.words()}: "
            f"{target.titles.verdict()}"
            if target.titles
            else ""
        )
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
                    else "it does not: " + "; ".join(_losing_text(m) for m in losing[:4]) + "."
                )
            )
    lines.append(f"{target.task}: target {verdict_words(target)}.")
    return lines


def _margin_cell(margin: Margin | None) -> str:
    """``+0.012 [-0.010, +0.034] vs hybrid-title: no measurable difference (adjusted p = 0.360; detectable ±0.031)``."""
    if margin is None:
        return "–"
    if margin.rival == margin.system:
        return "is the best cheap baseline"
    return (
        f"{interval_text(margin)} vs {margin.rival}: {margin.direction()} ({adjusted_p_words(margin)}; "
        f"detectable {format_mdd(margin.mdd, margin.n_documents)})"
    )


def _titles_cell(target: PipelineTarget) -> str:
    """Whether titles carry the context: the declaration where there is one, always with the measured figure."""
    carry = _yes_no(target.titles_carry_context)
    how = ["declared"] if target.titles_declared is not None else []
    titles = target.titles
    if titles is not None:
        how.append(f"measured {titles.system} − {titles.rival} {interval_text(titles)}, {adjusted_p_words(titles)}")
    return carry + (f" ({'; '.join(how)})" if how else "")


def target_row(target: PipelineTarget) -> tuple[str, ...]:
    """One table row (:data:`TARGET_HEADER`): task, queries (documents), pipeline, trained?, the margin against the
    best cheap baseline (all, needs_context) with its document-level CI, adjusted p and detectable difference, titles
    carry the context?, verdict."""
    sizes = " / ".join(
        f"{target.queries[s]:,} ({target.documents.get(s, 0):,})" for s in (ALL, NEEDS_CONTEXT) if s in target.queries
    )
    return (
        target.task,
        sizes,
        target.pipeline or "–",
        _yes_no(target.contains_trained if target.pipeline else None),
        _margin_cell(target.against_best.get(ALL)),
        _margin_cell(target.against_best.get(NEEDS_CONTEXT)),
        _titles_cell(target),
        verdict_words(target),
    )


TARGET_HEADER = (
    "task",
    "queries (documents): all / needs_context",
    "pipeline (chosen on validation)",
    "contains the trained model",
    "vs the best cheap baseline, all [95% CI over documents]",
    "vs the best cheap baseline, needs_context [95% CI over documents]",
    "titles carry the context",
    "target",
)
TARGET_RULE = (
    "The target of the pipeline the product chooses (issue 26), on each task's test split: never significantly worse "
    "than the best cheap baseline (all queries and needs_context); and where titles do not carry the context (the "
    "best title-header baseline does not beat the best one without significantly on needs_context), the pipeline "
    "contains the trained model and beats every cheap baseline significantly. Every margin is a paired test with whole "
    "documents as the units (95% CI from a bootstrap over documents), Holm-adjusted over every paired comparison this "
    "report states for the task; "
    f"significant means adjusted p < {SIGNIFICANCE_LEVEL}; detectable: the smallest difference the test set detects "
    "with 80% power. Whether titles carry the context is what the task's source declares (the held-out task with "
    "uninformative titles), else measured; the measured figure is shown either way. The pipeline was chosen on the "
    "validation split; test decides nothing."
)
