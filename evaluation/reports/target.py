"""The reproduce experiment's target on each evaluated task, measured and stated plainly (issue 20).

**The target.** On every evaluated task, the trained anchored model (:data:`TARGET_SYSTEM`, ``insent-anchored``)

1. is the best system on the ``needs_context`` queries: the highest mean nDCG@10 of every system that ran, and
2. loses at most :data:`TOLERANCE` (0.01) nDCG@10 to independent chunks (:data:`REFERENCE`) on all queries.

Both are point estimates of the same report's per-query nDCG@10; beside each, a paired comparison with whole documents
as the units (:func:`evaluation.metrics.stats.paired`: the document sign-flip randomization test, the 95% CI of the
difference from a bootstrap over documents, the minimum detectable difference) says how sure the verdict is.
:func:`task_target` also measures both trained InSeNT models against every other system that ran (the control,
independent chunks, title-prefix, the hybrids, contextual BM25, ...), on all queries and on ``needs_context``. The
margins of one task's target (those, and the untrained-window handicap a cause reads) are one family: their p-values
are Holm-adjusted together (:func:`adjust_margins`), and every verdict and cause reads the adjusted p.

Where the target is missed the report says by how much, and names a cause only when the same task measures it
(:data:`CAUSES`: each rule states what it tests; a cause whose test is not significant is not named; a gap within noise
is stated with the difference the test set could detect).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from conteb.names import SystemName
from evaluation.metrics.stats import holm, paired
from evaluation.reports.significance import adjusted_p_words, interval_text, sizes_text, verdict_text
from evaluation.results import ALL, NEEDS_CONTEXT, direction_words, is_significant

TARGET_SYSTEM = SystemName.INSENT_ANCHORED
REFERENCE = SystemName.INDEPENDENT
TOLERANCE = 0.01
RESAMPLES = 10000
"""Sign vectors of every margin's paired test (its interval: 2,000 bootstrap resamples; both seeded with 0)."""
TRAINED = (SystemName.INSENT_ANCHORED, SystemName.INSENT)
"""The trained systems measured against every other system (their rivals)."""
FIRST_RIVALS = (
    SystemName.FINETUNE_CONTROL,
    SystemName.INDEPENDENT,
    SystemName.TITLE_PREFIX,
    SystemName.HYBRID,
    SystemName.HYBRID_TITLE,
    SystemName.BM25_TITLE,
    SystemName.BM25,
)
"""The rivals the issue names, listed first; every other system that ran follows in the evaluation's order."""
HEADER_SYSTEMS = frozenset(
    {
        SystemName.TITLE_PREFIX,
        SystemName.BM25_TITLE,
        SystemName.HYBRID_TITLE,
        SystemName.LATE_CHUNKING_TITLE,
        SystemName.LATE_CHUNKING_ANCHORED_TITLE,
    }
)
"""Systems that put the document's title in front of every chunk."""
LEXICAL_SYSTEMS = frozenset({SystemName.BM25, SystemName.BM25_SUBWORD, SystemName.HYBRID})
"""Systems that match words without a title header (BM25, and its hybrid with independent chunks)."""


@dataclass(frozen=True)
class Margin:
    """``system`` − ``rival`` on one subset: the mean nDCG@10 difference and its 95% CI from a bootstrap over
    documents; ``p_value``: the paired test with documents as units; ``p_adjusted``: it Holm-adjusted over the
    family the margin belongs to (:func:`adjust_margins`; a margin alone is its own family), what :attr:`significant`
    reads; ``p_query``: the query-level test (secondary); ``mdd``: the smallest difference the test detects with 80%
    power (``inf``: too few documents)."""

    system: str
    rival: str
    subset: str
    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    n_queries: int
    n_documents: int | None = None
    p_adjusted: float = float("nan")
    p_query: float = float("nan")
    mdd: float = float("nan")
    resamples: int = RESAMPLES

    @property
    def significant(self) -> bool:
        return is_significant(self.p_adjusted)

    @property
    def is_test(self) -> bool:
        """False for the placeholder of a system against itself (a pipeline that is the best cheap baseline)."""
        return self.system != self.rival

    def direction(self) -> str:
        """``significantly better``, ``significantly worse`` or ``no measurable difference`` (the adjusted p)."""
        return direction_words(self.p_adjusted, self.difference)

    def words(self) -> str:
        """``a − b +0.012 [-0.010, +0.034] (adjusted p = 0.360, 85 queries of 13 documents)``."""
        sizes = sizes_text(self.n_queries, self.n_documents)
        return f"{self.system} − {self.rival} {interval_text(self)} ({adjusted_p_words(self)}, {sizes})"

    def verdict(self) -> str:
        """The verdict in words, with the detectable difference when there is no measurable one."""
        return verdict_text(self)


def adjust_margins(margins: Sequence[Margin]) -> list[Margin]:
    """``margins`` with ``p_adjusted`` set: Holm's adjustment over the family of their distinct tests (a test listed
    twice, by ``(system, rival, subset)``, counts once; placeholders, :attr:`Margin.is_test` false, are left out)."""
    unique = {(m.system, m.rival, m.subset): m for m in margins if m.is_test}
    adjusted = dict(zip(unique, holm([m.p_value for m in unique.values()]), strict=True))
    return [
        dataclasses.replace(m, p_adjusted=adjusted[(m.system, m.rival, m.subset)]) if m.is_test else m for m in margins
    ]


@dataclass
class TaskTarget:
    """The target on one task (module docstring): the means, the margins, both verdicts and the measured causes.

    ``met_best``/``met_all`` are None when they cannot be measured (no ``needs_context`` label, or
    :data:`TARGET_SYSTEM` or :data:`REFERENCE` did not run); ``causes`` are sentences, each with its figure;
    ``queries`` and ``documents``: per subset, how many; ``handicap``: untrained anchored late chunking − independent
    chunks on all queries (in the margins' Holm family; None when either did not run)."""

    task: str
    about: str
    queries: dict[str, int]
    means: dict[str, dict[str, float]]
    margins: list[Margin]
    best_on_needs_context: str | None = None
    met_best: bool | None = None
    loss_to_reference: float | None = None  # mean(independent) − mean(insent-anchored), all queries
    met_all: bool | None = None
    causes: list[str] = field(default_factory=list)
    documents: dict[str, int] = field(default_factory=dict)
    handicap: Margin | None = None

    @property
    def met(self) -> bool | None:
        if self.met_best is None or self.met_all is None:
            return None
        return self.met_best and self.met_all

    def margin(self, system: str, rival: str, subset: str) -> Margin | None:
        return next(
            (m for m in self.margins if (m.system, m.rival, m.subset) == (system, rival, subset)),
            None,
        )


def paired_margin(
    per_query: Mapping[str, Mapping[str, float]],
    system: str,
    rival: str,
    subset: str,
    ids: Sequence[str],
    documents: Mapping[str, str],
) -> Margin:
    """``system`` − ``rival`` over the queries ``ids`` of ``subset``, ``documents`` (query id -> its document) the
    units: :func:`evaluation.metrics.stats.paired` (the sign-flip test with :data:`RESAMPLES`, the 95% CI with 2,000
    bootstrap resamples, seed 0). Its ``p_adjusted`` is its own p until :func:`adjust_margins` adjusts its family."""
    a = np.array([per_query[system][q] for q in ids], dtype=np.float64)
    b = np.array([per_query[rival][q] for q in ids], dtype=np.float64)
    result = paired(a, b, [documents[q] for q in ids], "randomization", RESAMPLES, 2000, 0.95, 0)
    return Margin(
        system, rival, subset, result.difference, result.ci_low, result.ci_high, result.p_value, result.n_queries,
        result.n_documents, result.p_value, result.p_query, result.mdd,
    )  # fmt: skip


def rivals_of(systems: Sequence[str]) -> list[str]:
    """The systems to measure the trained ones against: :data:`FIRST_RIVALS` first, then the others, in order."""
    first = [s for s in FIRST_RIVALS if s in systems]
    return first + [s for s in systems if s not in first]


def task_target(
    task: str,
    about: str,
    per_query: Mapping[str, Mapping[str, float]],
    needs_context: Mapping[str, bool] | None,
    documents: Mapping[str, str],
) -> TaskTarget:
    """The target on ``task`` from per-query nDCG@10 (``per_query[system][query_id]``, the systems that ran, in the
    evaluation's order), the ``needs_context`` labels (None: the task has none) and the document of each query
    (``documents``: the units of every test and interval)."""
    systems = list(per_query)
    ids = sorted(next(iter(per_query.values())).keys()) if per_query else []
    subsets = {ALL: ids}
    if needs_context is not None:
        subsets[NEEDS_CONTEXT] = [q for q in ids if needs_context.get(q)]
    means = {
        subset: {s: float(np.mean([per_query[s][q] for q in qs])) for s in systems}
        for subset, qs in subsets.items()
        if qs
    }
    margins = [
        paired_margin(per_query, system, rival, subset, qs, documents)
        for system in TRAINED
        if system in per_query
        for subset, qs in subsets.items()
        if qs
        for rival in rivals_of(systems)
        if rival != system
    ]
    untrained = SystemName.LATE_CHUNKING_ANCHORED
    handicap = (
        [paired_margin(per_query, untrained, REFERENCE, ALL, ids, documents)]
        if ids and untrained in per_query and REFERENCE in per_query
        else []
    )
    family = adjust_margins([*margins, *handicap])  # one Holm family: the target's margins on this task
    counts = {s: len(qs) for s, qs in subsets.items()}
    target = TaskTarget(task, about, counts, means, family[: len(margins)])
    target.documents = {s: len({documents[q] for q in qs}) for s, qs in subsets.items()}
    target.handicap = family[len(margins)] if handicap else None
    on_needs = means.get(NEEDS_CONTEXT)
    if on_needs:
        target.best_on_needs_context = max(on_needs, key=lambda s: (on_needs[s], -systems.index(s)))
        if TARGET_SYSTEM in on_needs:
            target.met_best = target.best_on_needs_context == TARGET_SYSTEM
    on_all = means.get(ALL, {})
    if TARGET_SYSTEM in on_all and REFERENCE in on_all:
        target.loss_to_reference = on_all[REFERENCE] - on_all[TARGET_SYSTEM]
        target.met_all = target.loss_to_reference <= TOLERANCE
    recompute_causes(target)
    return target


def recompute_causes(target: TaskTarget) -> None:
    """``target.causes`` from its margins as they are now (after a family's adjustment, say): the sentences of the
    rules of :data:`CAUSES` that apply, none when the target is not missed."""
    target.causes = [s for rule in CAUSES if (s := rule(target)) is not None] if target.met is False else []


# --- the causes: each rule returns a sentence with its figure, or None when the task does not measure it ---

Rule = Callable[[TaskTarget], "str | None"]


def window_handicap(target: TaskTarget) -> str | None:
    """The base model reads windows worse than single chunks: untrained anchored late chunking loses significantly
    to independent chunks on all queries (:attr:`TaskTarget.handicap`). Named when the all-queries part of the target
    is missed."""
    handicap = target.handicap
    if target.met_all is not False or handicap is None or not (handicap.significant and handicap.difference < 0):
        return None
    sentence = f"the untrained model reads windows worse than single chunks: {handicap.words()}"
    trained = target.margin(TARGET_SYSTEM, SystemName.LATE_CHUNKING_ANCHORED, ALL)
    if trained is not None and trained.significant and trained.difference > 0:
        share = trained.difference / -handicap.difference
        sentence += f"; training recovered {trained.difference:+.3f} of it ({share:.0%})"
    elif trained is not None:
        sentence += f"; training did not measurably change it ({trained.words()}: {trained.verdict()})"
    return sentence


def training_data_alone(target: TaskTarget) -> str | None:
    """The +Training control beats the anchored model significantly on all queries: the same data helps single
    chunks more than windows. Named when the all-queries part is missed or the control is the best on
    ``needs_context``."""
    if target.met_all is not False and target.best_on_needs_context != SystemName.FINETUNE_CONTROL:
        return None
    control = target.margin(TARGET_SYSTEM, SystemName.FINETUNE_CONTROL, ALL)
    if control is None or not (control.significant and control.difference < 0):
        return None
    return f"the same training data lifts single chunks more than windows: {control.words()}"


def _best_beats_target(target: TaskTarget, kinds: frozenset[str]) -> Margin | None:
    """The margin of the target system over the best system on ``needs_context`` when that system is one of
    ``kinds`` and beats it significantly there; else None."""
    best = target.best_on_needs_context
    margin = target.margin(TARGET_SYSTEM, best, NEEDS_CONTEXT) if best in kinds else None
    return margin if margin is not None and margin.significant and margin.difference < 0 else None


def header_carries_context(target: TaskTarget) -> str | None:
    """The best system on ``needs_context`` is a title-header system and beats the anchored model significantly
    there: the title names what those chunks lack."""
    margin = _best_beats_target(target, HEADER_SYSTEMS)
    return None if margin is None else f"a title header carries the missing context on this task: {margin.words()}"


def lexical_match(target: TaskTarget) -> str | None:
    """The best system on ``needs_context`` matches words without a header (BM25, its hybrid) and beats the anchored
    model significantly there."""
    margin = _best_beats_target(target, LEXICAL_SYSTEMS)
    return None if margin is None else f"exact word overlap wins on these queries: {margin.words()}"


def within_noise(target: TaskTarget) -> str | None:
    """The anchored model is not the best on ``needs_context``, but its gap to the best is not significant: said with
    the difference the test set could detect."""
    best = target.best_on_needs_context
    if target.met_best is not False or best is None:
        return None
    margin = target.margin(TARGET_SYSTEM, best, NEEDS_CONTEXT)
    if margin is None or margin.significant:
        return None
    return f"the gap to the best system on needs_context is within noise: {margin.words()}: {margin.verdict()}"


CAUSES: tuple[Rule, ...] = (window_handicap, training_data_alone, header_carries_context, lexical_match, within_noise)
"""The causes the report can name, in order."""


def target_sentences(target: TaskTarget) -> list[str]:
    """The verdict on ``target`` in words: each part with its figure, by how much it is missed, the causes."""
    where = f"{target.task} ({target.about})"
    if target.met is None:
        missing = "no needs_context label" if target.met_best is None else f"{REFERENCE} or {TARGET_SYSTEM} missing"
        return [f"{where}: the target cannot be measured ({missing})."]
    needs = target.means[NEEDS_CONTEXT]
    best = target.best_on_needs_context or ""
    n_needs = target.queries.get(NEEDS_CONTEXT, 0)
    if target.met_best:
        runner_up = max((s for s in needs if s != TARGET_SYSTEM), key=lambda s: needs[s], default=None)
        margin = target.margin(TARGET_SYSTEM, runner_up, NEEDS_CONTEXT) if runner_up else None
        on = sizes_text(n_needs, target.documents.get(NEEDS_CONTEXT))
        first = f"{TARGET_SYSTEM} is the best system on the {on} that need context ({needs[TARGET_SYSTEM]:.3f})"
        if margin is not None:
            first += f", ahead of {runner_up}: {margin.words()}: {margin.verdict()}"
    else:
        first = (
            f"{TARGET_SYSTEM} is not the best on the {sizes_text(n_needs, target.documents.get(NEEDS_CONTEXT))} that "
            f"need context: {needs[TARGET_SYSTEM]:.3f} against {best} {needs[best]:.3f} "
            f"({needs[TARGET_SYSTEM] - needs[best]:+.3f})"
        )
    loss = target.loss_to_reference or 0.0
    reference = target.margin(TARGET_SYSTEM, REFERENCE, ALL)
    second = (
        f"on all {sizes_text(target.queries[ALL], target.documents.get(ALL))} it "
        + (f"loses {loss:.3f} to {REFERENCE}" if loss > 0 else f"gains {-loss:.3f} over {REFERENCE}")
        + (f" ({reference.words()}: {reference.verdict()})" if reference else "")
        + ("" if target.met_all else f": {loss - TOLERANCE:.3f} more than the {TOLERANCE} allowed")
    )
    verdict = "met" if target.met else "missed"
    lines = [f"{where}: target {verdict}. {first[0].upper() + first[1:]}; {second}."]
    if not target.met:
        lines.append(
            "Measured causes: " + "; ".join(target.causes) + "."
            if target.causes
            else "No cause that this report measures applies."
        )
    return lines
