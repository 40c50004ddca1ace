"""The first lines of a task's report: the answer (the pipeline the product recommends) before any detail.

From :attr:`~evaluation.results.TaskEvaluation.selection` (chosen on the validation split, :mod:`evaluation.select`)
and the test runs: the recommended pipeline (a fusion with its weights), whether it contains a model trained here, its
test nDCG@10 on all queries and on the needs_context ones with 95% intervals from a bootstrap over documents (queries
and documents counted), and its margin against the best cheap baseline on the same test queries with the paired test
over documents, its Holm-adjusted p and the verdict in words (the runner's ``best_baseline`` comparisons,
:mod:`evaluation.comparisons`; wording: :mod:`evaluation.reports.significance`), then how it was chosen on validation
(:func:`evaluation.reports.selection.validation_blocks`).
"""

from __future__ import annotations

from collections.abc import Sequence

from evaluation.reports.document import Block, BulletList, Heading, Paragraph, Span
from evaluation.reports.formatting import format_metric, format_summary
from evaluation.reports.selection import validation_blocks
from evaluation.reports.significance import adjusted_p_words, interval_text, sizes_text, verdict_text
from evaluation.results import (
    ALL,
    BEST_BASELINE,
    HEADLINE,
    NEEDS_CONTEXT,
    PROVENANCE_RECORDED,
    Comparison,
    Summary,
    SystemRun,
    TaskEvaluation,
)

HEADING = "Recommended pipeline"


def trained_parts(evaluation: TaskEvaluation, run: SystemRun) -> list[str]:
    """The systems of ``run`` (itself, or the components of a fusion or hybrid) whose model was trained here: a
    training asset (``details["trained"]``) or a model whose training documents are recorded."""
    names = run.details.get("components") or [run.system]
    found = []
    for name in names:
        part = evaluation.run(name) if name != run.system else run
        if part is not None and (part.details.get("trained") or part.provenance == PROVENANCE_RECORDED):
            found.append(name)
    return found


def _pipeline(run: SystemRun) -> str:
    """``name`` with its fused systems and weights, when it fuses."""
    weights = run.details.get("weights")
    if weights:
        parts = " + ".join(f"{w:.2g} × {name}" for name, w in weights.items())
        how = "fitted on validation" if run.details.get("fitted") else "given"
        return f"{run.system} ({parts}; weights {how})"
    components = run.details.get("components")
    return f"{run.system} ({' + '.join(components)})" if components else run.system


def _margin(evaluation: TaskEvaluation, chosen: str, subset: str) -> str:
    """The margin line of ``subset`` against the best cheap baseline (or why there is none)."""
    comparisons = evaluation.comparisons if subset == ALL else evaluation.subset_comparisons
    tests = [c for c in comparisons if c.plan == BEST_BASELINE]
    found: Comparison | None = next((c for c in tests if c.system_a == chosen), None)
    label = "all queries" if subset == ALL else "needs_context"
    if found is None:
        if any(c.system_b == chosen for c in tests):
            return f"{label}: it is the best cheap baseline on these test queries"
        return f"{label}: no cheap baseline ran"
    return (
        f"{label}: {interval_text(found)} against {found.system_b} ({format_metric(found.mean_b)}), "
        f"{verdict_text(found)}, {adjusted_p_words(found)} ({found.method} over documents, "
        f"{sizes_text(found.n_queries, found.n_documents)})"
    )


def _test_figure(summary: Summary | None, n_queries: int | None) -> str:
    """``0.959 [0.930, 0.983] (85 queries of 13 documents)``: a test score with its document-level interval."""
    counted = summary.n_queries if summary is not None else n_queries or 0
    documents = summary.n_documents if summary is not None else None
    return f"{format_summary(summary)} ({sizes_text(counted, documents)})"


def answer_blocks(evaluation: TaskEvaluation) -> list[Block]:
    """The report's first blocks (module docstring); ``[]`` when no choice was made (no ``evaluation.select``)."""
    selection = evaluation.selection
    if selection is None:
        return []
    run = evaluation.run(selection.chosen) if selection.chosen else None
    if run is None or run.status != "ok":
        chosen = selection.chosen
        why = "no candidate ran on validation" if chosen is None else f"{chosen} did not run on test"
        return [Heading(HEADING, 2), Paragraph((Span(f"No pipeline recommended: {why}."),))]
    trained = trained_parts(evaluation, run)
    lines = [
        f"Recommended: {_pipeline(run)}.",
        "Contains the model trained here: " + (f"yes ({', '.join(trained)})." if trained else "no."),
        f"Test nDCG@10 (95% CI over documents): all queries {_test_figure(run.summary(HEADLINE), evaluation.n_queries)}"
        + (
            f"; needs_context {_test_figure(run.summary(HEADLINE, NEEDS_CONTEXT), evaluation.n_needs_context)}."
            if run.summary(HEADLINE, NEEDS_CONTEXT) is not None and evaluation.n_needs_context
            else "; no needs_context label."
        ),
        "Against the best cheap baseline on the same test queries: "
        + "; ".join(_margin(evaluation, run.system, subset) for subset in (ALL, NEEDS_CONTEXT))
        + ".",
    ]
    blocks: list[Block] = [Heading(HEADING, 2), *(Paragraph((Span(line),)) for line in lines)]
    return blocks + validation_blocks(selection)


def overall_answer_blocks(evaluations: Sequence[TaskEvaluation]) -> list[Block]:
    """The overall report's first lines: per task that made a choice, the recommended pipeline and its test nDCG@10
    (all queries, needs_context); ``[]`` when no task did. Each task's report gives the intervals and the margin."""
    items = []
    for evaluation in evaluations:
        selection = evaluation.selection
        run = evaluation.run(selection.chosen) if selection and selection.chosen else None
        if selection is None:
            continue
        if run is None or run.status != "ok":
            items.append((Span(f"{evaluation.task}: no pipeline recommended"),))
            continue
        overall, needs = run.summary(HEADLINE), run.summary(HEADLINE, NEEDS_CONTEXT)
        trained = " (contains the model trained here)" if trained_parts(evaluation, run) else ""
        items.append(
            (
                Span(
                    f"{evaluation.task}: {_pipeline(run)}{trained}: test nDCG@10 "
                    f"{format_metric(overall.value if overall is not None else None)} on all queries"
                    + (f", {format_metric(needs.value)} on needs_context" if needs is not None else "")
                    + f" (chosen on {selection.split})"
                ),
            )
        )
    return [Heading(HEADING, 2), BulletList(tuple(items))] if items else []
