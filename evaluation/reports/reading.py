"""A short reading of an evaluation, generated from its own figures (no LLM).

:func:`task_reading` (one task) and :func:`overall_reading` (every task) return plain sentences, in
this order; the reports put them at the top and the Dagster assets record them as ``reading``:

1. the best system with its nDCG@10 and 95% CI (overall: the best mean over the tasks every system
   ran on);
2. which paired comparisons are significant (p < 0.05) and which are not (a comparison with the best cheap
   baseline names it so, ``evaluation/comparisons.py``);
3. how many queries need context (``needs_context``, ``curation/necessity.py``) and how the systems
   do on them; unlabelled corpora say so;
4. when a late-chunking run (``details["context"] == "late"``) scores below its independent-chunk
   baseline (the run named ``independent``, else a dense run with ``context == "independent"`` on
   the same model), the known causes that the recorded facts support, each stated with its figure:

   * documents longer than the model's window: ``details["windows"]`` (windows forwarded while
     indexing, ``evaluation/systems/dense.py``) over the task's documents > 1, with ``details["max_length"]``
     tokens per window; exactly 1 rules the cause out; not recorded: said so;
   * plain windows (``details["window_policy"]`` absent or ``"plain"``) while an anchored run exists
     (its score is given) or does not (said so);
   * an untrained model: ``details["trained"]`` recorded and null (the runner records it).

Nothing here imports the report builders; numbers are formatted as the reports format them
(:mod:`evaluation.reports.formatting`, 3 decimals) and significance is
:meth:`evaluation.results.Comparison.significant`.
"""

from __future__ import annotations

from collections.abc import Sequence

from conteb.names import SystemName
from evaluation.reports.formatting import format_metric, format_p, format_summary
from evaluation.results import (
    BEST_BASELINE,
    HEADLINE,
    NEEDS_CONTEXT,
    SIGNIFICANCE_LEVEL,
    Comparison,
    Summary,
    SystemRun,
    TaskEvaluation,
    is_missing,
)


def _scored(evaluation: TaskEvaluation, subset: str | None = None) -> list[tuple[SystemRun, Summary]]:
    """Ok runs with a finite nDCG@10 (on ``subset`` when given), best first (ties: configured order)."""
    rows = []
    for run in evaluation.runs:
        if run.status != "ok":
            continue
        summary = run.summary(HEADLINE, subset) if subset else run.metrics.get(HEADLINE)
        if summary is not None and not is_missing(summary.value):
            rows.append((run, summary))
    return sorted(rows, key=lambda pair: -pair[1].value)


def _comparison_text(c: Comparison) -> str:
    against = f"the best cheap baseline ({c.system_b})" if c.plan == BEST_BASELINE else c.system_b
    return f"{c.system_a} vs {against} {c.difference:+.3f} (p = {format_p(c.p_value)}, {c.n_queries:,} queries)"


def _significance(comparisons: Sequence[Comparison], where: str = "") -> list[str]:
    if not comparisons:
        return [f"No paired comparison was run{where}."]
    significant = [c for c in comparisons if c.significant()]
    others = [c for c in comparisons if c not in significant]
    sentences = []
    if significant:
        sentences.append(
            f"Significant differences{where} (p < {SIGNIFICANCE_LEVEL}): "
            + "; ".join(_comparison_text(c) for c in significant)
            + "."
        )
    if others:
        sentences.append(
            f"Not significant{where}: " + "; ".join(_comparison_text(c) for c in others) + "."
            if significant
            else f"No difference is significant{where} (p ≥ {SIGNIFICANCE_LEVEL}): "
            + "; ".join(_comparison_text(c) for c in others)
            + "."
        )
    return sentences


def _necessity(evaluation: TaskEvaluation) -> list[str]:
    e = evaluation
    if e.n_needs_context is None:
        return ["The queries carry no context-necessity labels, so the needs_context subset is not reported."]
    if e.n_needs_context == 0:
        return [f"None of the {e.n_queries:,} queries is labelled as needing context."]
    share = e.n_needs_context / e.n_queries if e.n_queries else 0.0
    sentences = [f"{e.n_needs_context:,} of {e.n_queries:,} queries ({share:.0%}) need context."]
    on_subset = _scored(e, NEEDS_CONTEXT)
    if on_subset:
        changes = []
        for run, summary in on_subset:
            overall = run.metrics.get(HEADLINE)
            on_all = format_metric(overall.value if overall else None)
            changes.append(f"{run.system} {format_metric(summary.value)} (all queries {on_all})")
        best_run, best = on_subset[0]
        sentences.append(
            f"On them the best is {best_run.system} with nDCG@10 {format_summary(best)}; " + ", ".join(changes) + "."
        )
    if e.subset_comparisons:
        sentences += _significance(e.subset_comparisons, " on them")
    return sentences


def _baseline(evaluation: TaskEvaluation, late: SystemRun) -> SystemRun | None:
    """The independent-chunk run ``late`` is compared with (module docstring)."""
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


def _late_causes(evaluation: TaskEvaluation, late: SystemRun) -> list[str]:
    """The known causes of a late-chunking loss that the recorded facts support (module docstring)."""
    d = late.details
    causes = []
    windows, length = d.get("windows"), d.get("max_length")
    window = f"{length:,}-token" if isinstance(length, int) else "model's"
    if isinstance(windows, int | float) and evaluation.n_documents:
        per_document = windows / evaluation.n_documents
        if per_document > 1:
            causes.append(
                f"documents are longer than the {window} window ({per_document:.1f} windows per document on "
                "average), so a chunk sees only the context of its own window"
            )
        else:
            causes.append(f"every document fit in one {window} window, so document length is not the cause")
    else:
        causes.append(f"windows per document were not recorded (the {window} window may cut long documents)")
    if d.get("window_policy", "plain") == "plain":
        anchored = [
            r for r in evaluation.runs if r.details.get("window_policy") == "anchored" or r.system.endswith("-anchored")
        ]
        ran = [r for r in anchored if r.status == "ok" and HEADLINE in r.metrics]
        if ran:
            causes.append(
                "plain windows lose the document's head after the first window; anchored windows "
                + ", ".join(f"({r.system}) score {format_metric(r.metrics[HEADLINE].value)}" for r in ran)
            )
        elif not anchored:
            causes.append("plain windows lose the document's head after the first window (no anchored run to compare)")
        else:
            causes.append(
                "plain windows lose the document's head after the first window (the anchored run did not run)"
            )
    if "trained" in d and d["trained"] is None:
        causes.append(
            "the model was not trained for late chunking (no InSeNT): a model trained on short sequences "
            "loses accuracy when it reads long windows"
        )
    return causes


def _late_losses(evaluation: TaskEvaluation) -> list[str]:
    sentences = []
    for late in evaluation.runs:
        if late.status != "ok" or late.kind != "dense" or late.details.get("context") != "late":
            continue
        base = _baseline(evaluation, late)
        if base is None or HEADLINE not in late.metrics:
            continue
        ours, theirs = late.metrics[HEADLINE].value, base.metrics[HEADLINE].value
        if is_missing(ours) or is_missing(theirs) or ours >= theirs:
            continue
        causes = _late_causes(evaluation, late)
        sentences.append(
            f"{late.system} loses to {base.system} ({format_metric(ours)} vs {format_metric(theirs)}); "
            "known causes that apply: " + "; ".join(causes) + "."
        )
    return sentences


def task_reading(evaluation: TaskEvaluation) -> list[str]:
    """The reading of one task: a few sentences (module docstring), each a plain string."""
    scored = _scored(evaluation)
    if not scored:
        return [f"No system ran on {evaluation.task}: nothing to read."]
    best_run, best = scored[0]
    lead = f"Best system: {best_run.system}, nDCG@10 {format_summary(best)} over {best.n_queries:,} queries"
    if len(scored) > 1:
        second_run, second = scored[1]
        overlap = "its CI overlaps" if second.ci_high >= best.ci_low else "outside its CI"
        lead += f"; next {second_run.system} {format_metric(second.value)} ({overlap})"
    sentences = [lead + "."]
    sentences += _significance(evaluation.comparisons)
    sentences += _necessity(evaluation)
    sentences += _late_losses(evaluation)
    return sentences


def overall_reading(evaluations: Sequence[TaskEvaluation]) -> list[str]:
    """The reading over every task: the best mean, significance and necessity per task, late-chunking losses."""
    if not evaluations:
        return ["No task was evaluated: nothing to read."]
    systems = list(dict.fromkeys(r.system for e in evaluations for r in e.runs))
    complete: dict[str, float] = {}
    for system in systems:
        values = [s.value for e in evaluations for r, s in _scored(e) if r.system == system]
        if len(values) == len(evaluations):
            complete[system] = sum(values) / len(values)
    sentences = []
    if complete:
        ranked = sorted(complete.items(), key=lambda item: -item[1])
        best, mean = ranked[0]
        wins = sum(1 for e in evaluations if _scored(e) and _scored(e)[0][0].system == best)
        sentence = (
            f"Best system over the {len(evaluations)} task(s): {best}, mean nDCG@10 {format_metric(mean)}, "
            f"best on {wins} of {len(evaluations)} task(s)"
        )
        if len(ranked) > 1:
            sentence += f"; next {ranked[1][0]} {format_metric(ranked[1][1])}"
        sentences.append(sentence + ".")
    else:
        sentences.append("No system ran on every task, so no mean over tasks is compared.")
    significant = [c for e in evaluations for c in e.comparisons if c.significant()]
    tested = [c for e in evaluations for c in e.comparisons]
    if tested:
        listed = "; ".join(f"{c.task}: {_comparison_text(c)}" for c in significant) or "none"
        sentences.append(f"{len(significant)} of {len(tested)} paired comparisons are significant: {listed}.")
    labelled = [e for e in evaluations if e.n_needs_context is not None]
    if not labelled:
        sentences.append("No task carries context-necessity labels, so the needs_context subset is not reported.")
    else:
        need = sum(e.n_needs_context or 0 for e in labelled)
        total = sum(e.n_queries for e in labelled)
        counts = ", ".join(f"{e.task} {e.n_needs_context:,}/{e.n_queries:,}" for e in labelled)
        sentence = f"{need:,} of {total:,} labelled queries need context ({counts})"
        unlabelled = [e.task for e in evaluations if e.n_needs_context is None]
        if unlabelled:
            sentence += f"; unlabelled: {', '.join(unlabelled)}"
        sentences.append(sentence + ".")
        best_on = [(e.task, *_scored(e, NEEDS_CONTEXT)[0]) for e in labelled if _scored(e, NEEDS_CONTEXT)]
        if best_on:
            sentences.append(
                "Best on those queries: "
                + "; ".join(f"{task}: {run.system} {format_metric(s.value)}" for task, run, s in best_on)
                + "."
            )
    for e in evaluations:
        sentences += [f"{e.task}: {sentence}" for sentence in _late_losses(e)]
    return sentences
