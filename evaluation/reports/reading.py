"""A short reading of an evaluation, generated from its own figures (no LLM).

:func:`task_reading_parts` (one task) and :func:`overall_reading_parts` (every task) return a :class:`Reading`: a few
opening sentences, the paired comparisons one per line in short groups (:mod:`evaluation.reports.reading_groups`:
contextual systems vs the cheap baselines, trained vs untrained, other pairs, the needs_context subset) and the
late-chunking sentences; the reports put it at the top (the groups as small tables) and the Dagster assets record
:func:`task_reading` / :func:`overall_reading` (the same, one line each) as ``reading``. Every sentence comes from
one rule, a function below that states its precondition. Two principles hold throughout:

* nothing is called better, best, lower or a loss unless a paired comparison of the same report
  (:class:`evaluation.results.Comparison` on nDCG@10, significant by :meth:`~evaluation.results.Comparison.significant`:
  the document-level test, Holm-adjusted p < 0.05) finds it, in that direction; otherwise the sentence names the
  comparison with its figures (:func:`evaluation.reports.significance.figures_text`) and the difference the test set
  detects, or says that no paired test of the two was run (point estimates and overlapping CIs are given as such); a
  comparison with the best cheap baseline names it so (``evaluation/comparisons.py``);
* a cause of a late-chunking loss is named only when the same report measures it; the causes it does not measure
  are listed as "not shown", with why.

Task rules (the report shows 1, 3 and 4 first, then the groups of 2 and 5, then 6):

1. :func:`lead` — the highest nDCG@10 (95% CI) and the runner-up; "Best system" only when their paired comparison is
   significant in its favour. Precondition: a run scored (ok, finite nDCG@10); else the reading is the one sentence
   "No system ran on <task>: nothing to read.".
2. every paired comparison on all queries, one line each in its group (significant ones first), with its difference,
   p-value, number of queries and verdict. Precondition: one was run; else :func:`untested_sentence` says that none
   was.
3. :func:`necessity_share` — always: the share of queries that need context (``needs_context``,
   ``curation/necessity.py``), or that none is labelled and why (no labels at all: a dataset not curated here; no
   query labelled: what the labels would need).
4. :func:`subset_scores` — each system's nDCG@10 on those queries beside its score on all queries, highest first.
   Precondition: some queries need context and a system was scored on them.
5. the same on the needs_context subset (one group). Precondition: some queries need context.
6. :func:`late_versus_baseline` — per late-chunking run (``details["context"] == "late"``) that scores below its
   independent-chunk baseline (:func:`baseline_of`): a loss, with its causes, only when their paired comparison is
   significant; else the difference, with no measurable difference (and what the test set detects) or not tested,
   and no cause. The causes of a loss, each named only when its precondition holds:

   * :func:`cause_long_documents` — ``details["windows"]`` (windows forwarded while indexing,
     ``evaluation/systems/dense.py``) over the task's documents > 1; exactly 1 rules the cause out; not recorded: not
     shown;
   * :func:`cause_plain_windows` — the run uses plain windows (``details["window_policy"]`` absent or ``"plain"``) and
     the report's paired comparison of an anchored run with it is significant, anchored higher;
   * :func:`cause_untrained` — ``details["trained"]`` recorded and null (the runner records it) and the report's
     paired comparison of a trained late-chunking run with it is significant, trained higher.

Overall rules: :func:`overall_lead` (the highest mean over the tasks every system ran on: a mean over tasks has no
paired test, and says so), :func:`overall_comparisons` (how many of every task's comparisons are significantly better,
significantly worse, or show no measurable difference, by the adjusted p; each one is a line of its group, naming its
task, the non-significant ones too), :func:`overall_necessity`
(the share over the labelled tasks, the unlabelled ones and why), :func:`overall_subset` (the highest on the
needs_context queries per task) and rule 6 per task.

Nothing here imports the report builders; numbers are formatted as the reports format them
(:mod:`evaluation.reports.formatting`, 3 decimals).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from conteb.names import SystemName
from evaluation.reports.formatting import format_metric, format_summary
from evaluation.reports.reading_groups import ON_NEEDS_CONTEXT, ComparisonGroup, overall_groups, task_groups
from evaluation.reports.significance import detectable_text, figures_text
from evaluation.results import (
    HEADLINE,
    NEEDS_CONTEXT,
    SIGNIFICANCE_LEVEL,
    SIGNIFICANTLY_BETTER,
    SIGNIFICANTLY_WORSE,
    Comparison,
    Summary,
    SystemRun,
    TaskEvaluation,
    is_missing,
)

NO_LABELS_WHY = (
    "no needs_context column: a dataset not curated by this pipeline, such as an external ConTEB folder, or "
    "published before the labels existed"
)
NONE_LABELLED_WHY = (
    "no query names its document's theme while its gold chunk does not, and no LLM judged a gold chunk "
    "insufficient alone (without an LLM only the theme signal labels)"
)


# --- shared helpers ------------------------------------------------------------------------------


def _scored(evaluation: TaskEvaluation, subset: str | None = None) -> list[tuple[SystemRun, Summary]]:
    """Ok runs with a finite nDCG@10 (on ``subset`` when given), highest first (ties: configured order)."""
    rows = []
    for run in evaluation.runs:
        if run.status != "ok":
            continue
        summary = run.summary(HEADLINE, subset) if subset else run.metrics.get(HEADLINE)
        if summary is not None and not is_missing(summary.value):
            rows.append((run, summary))
    return sorted(rows, key=lambda pair: -pair[1].value)


def between(comparisons: Sequence[Comparison], a: str, b: str) -> Comparison | None:
    """The nDCG@10 comparison of systems ``a`` and ``b`` (either order) among ``comparisons``, or ``None``."""
    return next(
        (c for c in comparisons if c.metric == HEADLINE and {c.system_a, c.system_b} == {a, b} and a != b), None
    )


def _difference(comparison: Comparison, a: str) -> float:
    """``mean(a) − mean(other)`` of ``comparison`` (which holds ``a``)."""
    return comparison.difference if comparison.system_a == a else -comparison.difference


def _shows_higher(comparison: Comparison | None, a: str) -> bool:
    """True when ``comparison`` finds ``a`` significantly higher than the other system."""
    return comparison is not None and comparison.significant() and _difference(comparison, a) > 0


def _test_text(comparison: Comparison, a: str) -> str:
    """``+0.075 [+0.050, +0.101], adjusted p = 1.0e-04, 200 queries of 40 documents`` seen from ``a``."""
    return figures_text(comparison, flip=comparison.system_a != a)


def _no_difference(comparison: Comparison, a: str) -> str:
    """``no measurable difference (<figures seen from a>; this test set detects ...)``."""
    detectable = detectable_text(comparison.mdd, comparison.n_documents)
    return f"no measurable difference ({_test_text(comparison, a)}; {detectable})"


# --- task rules ----------------------------------------------------------------------------------


def lead(evaluation: TaskEvaluation) -> str | None:
    """Rule 1: the highest nDCG@10 and the runner-up; ``None`` when no run was scored (the caller says so).

    "Best system" only when the paired comparison of the two is significant in the leader's favour; not significant:
    "Highest nDCG@10 ..., no measurable difference (figures; what the test set detects)"; not tested: the point
    estimates and whether the CIs overlap.
    """
    scored = _scored(evaluation)
    if not scored:
        return None
    best_run, best = scored[0]
    over = f"{best.n_queries:,} queries" + ("" if best.n_documents is None else f" of {best.n_documents:,} documents")
    figures = f"{best_run.system}, nDCG@10 {format_summary(best)} over {over}"
    if len(scored) == 1:
        return f"Only system scored: {figures}."
    second_run, second = scored[1]
    test = between(evaluation.comparisons, best_run.system, second_run.system)
    if test is not None and _shows_higher(test, best_run.system):
        return (
            f"Best system: {figures}; next {second_run.system} {format_metric(second.value)}, significantly lower "
            f"({_test_text(test, best_run.system)})."
        )
    if test is not None:
        return (
            f"Highest nDCG@10: {figures}; next {second_run.system} {format_metric(second.value)}, "
            f"{_no_difference(test, best_run.system)}: no system is shown best."
        )
    overlap = "the CIs overlap" if second.ci_high >= best.ci_low else "outside the leader's CI"
    return (
        f"Highest nDCG@10: {figures}; next {second_run.system} {format_metric(second.value)} ({overlap}; no paired "
        "test of the two was run)."
    )


def untested_sentence(evaluation: TaskEvaluation) -> list[str]:
    """Rules 2 and 5 when nothing was tested: says that no paired comparison was run (on all queries; on the
    needs_context queries when some need context)."""
    sentences = [] if evaluation.comparisons else ["No paired comparison was run."]
    if evaluation.n_needs_context and not evaluation.subset_comparisons:
        sentences.append(f"No paired comparison was run {ON_NEEDS_CONTEXT.lower()}.")
    return sentences


def necessity_share(evaluation: TaskEvaluation) -> str:
    """Rule 3 (no precondition): the share of queries that need context, or why none is labelled."""
    e = evaluation
    if e.n_needs_context is None:
        return (
            f"The queries carry no context-necessity labels ({NO_LABELS_WHY}), so the needs_context subset is not "
            "reported."
        )
    if e.n_needs_context == 0:
        return (
            f"None of the {e.n_queries:,} queries (0%) is labelled as needing context: {NONE_LABELLED_WHY}; "
            "the needs_context subset is not reported."
        )
    share = e.n_needs_context / e.n_queries if e.n_queries else 0.0
    return f"{e.n_needs_context:,} of {e.n_queries:,} queries ({share:.0%}) need context."


def subset_scores(evaluation: TaskEvaluation) -> str | None:
    """Rule 4: nDCG@10 on the needs_context queries beside all queries, highest first; ``None`` unless some queries
    need context and a system was scored on them."""
    on_subset = _scored(evaluation, NEEDS_CONTEXT) if evaluation.n_needs_context else []
    if not on_subset:
        return None
    cells = []
    for run, summary in on_subset:
        overall = run.metrics.get(HEADLINE)
        cells.append(
            f"{run.system} {format_summary(summary)} (all queries {format_metric(overall.value if overall else None)})"
        )
    return "nDCG@10 on them, highest first: " + ", ".join(cells) + "."


def baseline_of(evaluation: TaskEvaluation, late: SystemRun) -> SystemRun | None:
    """The independent-chunk run ``late`` is compared with: the run named ``independent``, else a dense run with
    ``context == "independent"`` on the same model; ``None`` when there is none."""
    ok = [r for r in evaluation.runs if r.status == "ok" and HEADLINE in r.metrics]
    named = next((r for r in ok if r.system == SystemName.INDEPENDENT), None)
    if named is not None:
        return named
    model = late.details.get("model")
    return next(
        (
            r
            for r in ok
            if r.kind == "dense" and r.details.get("context") == "independent" and r.details.get("model") == model
        ),
        None,
    )


Cause = tuple[str | None, str | None]
"""``(named, not_shown)``: the cause in words when the report measures it, else why it is not shown (or neither)."""


def cause_long_documents(evaluation: TaskEvaluation, late: SystemRun) -> Cause:
    """Named when ``details["windows"]`` over the task's documents is > 1; ruled out (named) at 1; not recorded: not
    shown."""
    windows, length = late.details.get("windows"), late.details.get("max_length")
    window = f"{length:,}-token" if isinstance(length, int) else "model's"
    if not isinstance(windows, int | float) or not evaluation.n_documents:
        return None, "long documents (windows per document were not recorded)"
    per_document = windows / evaluation.n_documents
    if per_document > 1:
        return (
            f"documents are longer than the {window} window ({per_document:.1f} windows per document on average), so "
            "a chunk sees only the context of its own window"
        ), None
    return f"every document fit in one {window} window, so document length is not the cause", None


def _anchored(run: SystemRun) -> bool:
    return run.details.get("window_policy") == "anchored" or run.system.endswith("-anchored")


def _cause_from_rivals(
    evaluation: TaskEvaluation, late: SystemRun, rivals: Sequence[SystemRun], cause: str, label: str, absent: str
) -> Cause:
    """``cause`` named when one of ``rivals`` scores significantly above ``late`` in the report's comparisons; else
    ``label`` not shown, with the first rival's comparison (no measurable difference, or significantly lower) or
    ``absent``."""
    tests = [(r.system, t) for r in rivals if (t := between(evaluation.comparisons, r.system, late.system)) is not None]
    for system, test in tests:
        if _shows_higher(test, system):
            return f"{cause}: {system} scores above it ({_test_text(test, system)})", None
    if tests:
        system, test = tests[0]
        if test.significant():
            return None, f"{label} ({system} vs {late.system} {_test_text(test, system)}: significantly lower)"
        return None, f"{label} ({system} vs {late.system}: {_no_difference(test, system)})"
    return None, f"{label} ({absent})"


def cause_plain_windows(evaluation: TaskEvaluation, late: SystemRun) -> Cause:
    """Named when ``late`` has plain windows and the report's comparison of an anchored run with it is significant,
    anchored higher; an anchored run itself: neither."""
    if late.details.get("window_policy", "plain") != "plain" or _anchored(late):
        return None, None
    return _cause_from_rivals(
        evaluation,
        late,
        [run for run in evaluation.runs if _anchored(run)],
        "plain windows lose the document's head after the first window",
        "plain windows",
        "no paired comparison of an anchored run with it",
    )


def cause_untrained(evaluation: TaskEvaluation, late: SystemRun) -> Cause:
    """Named when ``details["trained"]`` is recorded and null and the report's comparison of a trained late-chunking
    run with ``late`` is significant, trained higher; a trained or unrecorded model: neither."""
    if "trained" not in late.details or late.details["trained"] is not None:
        return None, None
    return _cause_from_rivals(
        evaluation,
        late,
        [
            r
            for r in evaluation.runs
            if r.kind == "dense" and r.details.get("context") == "late" and r.details.get("trained")
        ],
        "the model is not trained for late chunking (no InSeNT)",
        "the untrained model",
        "no paired comparison of a trained late-chunking model with it",
    )


CAUSES = (cause_long_documents, cause_plain_windows, cause_untrained)
"""The causes of a late-chunking loss, in the order the reading names them."""


def late_versus_baseline(evaluation: TaskEvaluation, late: SystemRun) -> str | None:
    """Rule 6 for one run: ``None`` unless ``late`` is an ok late-chunking dense run scoring below its baseline
    (:func:`baseline_of`); a loss with its causes only when their paired comparison is significant."""
    if late.status != "ok" or late.kind != "dense" or late.details.get("context") != "late":
        return None
    base = baseline_of(evaluation, late)
    if base is None or HEADLINE not in late.metrics:
        return None
    ours, theirs = late.metrics[HEADLINE].value, base.metrics[HEADLINE].value
    if is_missing(ours) or is_missing(theirs) or ours >= theirs:
        return None
    scores = f"{format_metric(ours)} vs {format_metric(theirs)}"
    test = between(evaluation.comparisons, late.system, base.system)
    if test is None:
        return (
            f"{late.system} scores below {base.system} ({scores}), but no paired test of the two was run: no loss is "
            "claimed and no cause named."
        )
    if not _shows_higher(test, base.system):
        return (
            f"{late.system} scores below {base.system} ({scores}) with {_no_difference(test, late.system)}: no loss "
            "to explain."
        )
    causes = [cause(evaluation, late) for cause in CAUSES]
    named = [text for text, _ in causes if text]
    not_shown = [why for _, why in causes if why]
    sentence = (
        f"{late.system} loses to {base.system} ({scores}, {_test_text(test, late.system)}); causes this report "
        f"measures: {'; '.join(named) or 'none'}"
    )
    if not_shown:
        sentence += f"; not shown by this report: {'; '.join(not_shown)}"
    return sentence + "."


def _late_sentences(evaluation: TaskEvaluation) -> list[str]:
    return [s for run in evaluation.runs if (s := late_versus_baseline(evaluation, run)) is not None]


@dataclass(frozen=True)
class Reading:
    """A reading in parts: ``opening`` sentences, the paired comparisons in ``groups`` (one per line or table row,
    :mod:`evaluation.reports.reading_groups`), and the ``late`` sentences (rule 6)."""

    opening: tuple[str, ...]
    groups: tuple[ComparisonGroup, ...] = ()
    late: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """Every sentence, one comparison per line, in the report's order."""
        return [*self.opening, *(line for group in self.groups for line in group.lines()), *self.late]


def task_reading_parts(evaluation: TaskEvaluation) -> Reading:
    """The reading of one task (the rules of the module docstring) in parts."""
    first = lead(evaluation)
    if first is None:
        return Reading((f"No system ran on {evaluation.task}: nothing to read.",))
    opening = [first, necessity_share(evaluation)]
    if evaluation.n_needs_context:
        scores = subset_scores(evaluation)
        opening += [scores] if scores else []
    opening += untested_sentence(evaluation)
    return Reading(tuple(opening), tuple(task_groups(evaluation)), tuple(_late_sentences(evaluation)))


def task_reading(evaluation: TaskEvaluation) -> list[str]:
    """The reading of one task as plain lines (:meth:`Reading.lines`), as the Dagster assets record it."""
    return task_reading_parts(evaluation).lines()


# --- overall rules -------------------------------------------------------------------------------


def overall_lead(evaluations: Sequence[TaskEvaluation]) -> str:
    """The highest mean nDCG@10 over the tasks every system in it ran on (no paired test across tasks: said so)."""
    systems = list(dict.fromkeys(r.system for e in evaluations for r in e.runs))
    complete: dict[str, float] = {}
    for system in systems:
        values = [s.value for e in evaluations for r, s in _scored(e) if r.system == system]
        if len(values) == len(evaluations):
            complete[system] = sum(values) / len(values)
    if not complete:
        return "No system ran on every task, so no mean over tasks is compared."
    ranked = sorted(complete.items(), key=lambda item: -item[1])
    best, mean = ranked[0]
    wins = sum(1 for e in evaluations if _scored(e) and _scored(e)[0][0].system == best)
    sentence = (
        f"Highest mean nDCG@10 over the {len(evaluations)} task(s): {best} {format_metric(mean)}, highest on {wins} of "
        f"{len(evaluations)} task(s)"
    )
    if len(ranked) > 1:
        sentence += f"; next {ranked[1][0]} {format_metric(ranked[1][1])}"
    return sentence + " (a mean over tasks has no paired test: each task's reading tests its systems)."


def overall_comparisons(evaluations: Sequence[TaskEvaluation]) -> str:
    """How many of every task's paired comparisons on all queries are significantly better, significantly worse (the
    first system against the second) or show no measurable difference, by the Holm-adjusted p (each one is a line of
    its group); none run: says so."""
    tested = [c for e in evaluations for c in e.comparisons]
    if not tested:
        return "No paired comparison was run."
    better = sum(1 for c in tested if c.direction() == SIGNIFICANTLY_BETTER)
    worse = sum(1 for c in tested if c.direction() == SIGNIFICANTLY_WORSE)
    return (
        f"Of {len(tested)} paired comparisons on all queries (the first system against the second; Holm-adjusted p < "
        f"{SIGNIFICANCE_LEVEL}, one family per task): {better} significantly better, {worse} significantly worse, "
        f"{len(tested) - better - worse} with no measurable difference."
    )


def overall_necessity(evaluations: Sequence[TaskEvaluation]) -> str:
    """The share of queries that need context over the labelled tasks, per task, and the unlabelled tasks and why."""
    labelled = [e for e in evaluations if e.n_needs_context is not None]
    if not labelled:
        return (
            f"No task carries context-necessity labels ({NO_LABELS_WHY}), so the needs_context subset is not reported."
        )
    need = sum(e.n_needs_context or 0 for e in labelled)
    total = sum(e.n_queries for e in labelled)
    share = need / total if total else 0.0
    counts = ", ".join(f"{e.task} {e.n_needs_context:,}/{e.n_queries:,}" for e in labelled)
    sentence = f"{need:,} of {total:,} labelled queries ({share:.0%}) need context ({counts})"
    none = [e.task for e in labelled if e.n_needs_context == 0]
    if none:
        sentence += f"; none labelled in {', '.join(none)} ({NONE_LABELLED_WHY})"
    unlabelled = [e.task for e in evaluations if e.n_needs_context is None]
    if unlabelled:
        sentence += f"; unlabelled: {', '.join(unlabelled)} ({NO_LABELS_WHY})"
    return sentence + "."


def overall_subset(evaluations: Sequence[TaskEvaluation]) -> str | None:
    """The highest nDCG@10 on the needs_context queries per task (point estimates); ``None`` when no task has them."""
    best_on = [(e.task, *_scored(e, NEEDS_CONTEXT)[0]) for e in evaluations if _scored(e, NEEDS_CONTEXT)]
    if not best_on:
        return None
    return (
        "Highest on those queries (point estimates; each task's reading tests them): "
        + "; ".join(f"{task}: {run.system} {format_metric(s.value)}" for task, run, s in best_on)
        + "."
    )


def overall_reading_parts(evaluations: Sequence[TaskEvaluation]) -> Reading:
    """The reading over every task (module docstring) in parts."""
    if not evaluations:
        return Reading(("No task was evaluated: nothing to read.",))
    opening = [overall_lead(evaluations), overall_comparisons(evaluations), overall_necessity(evaluations)]
    subset = overall_subset(evaluations)
    opening += [subset] if subset else []
    late = [f"{e.task}: {sentence}" for e in evaluations for sentence in _late_sentences(e)]
    return Reading(tuple(opening), tuple(overall_groups(evaluations)), tuple(late))


def overall_reading(evaluations: Sequence[TaskEvaluation]) -> list[str]:
    """The reading over every task as plain lines (:meth:`Reading.lines`)."""
    return overall_reading_parts(evaluations).lines()
