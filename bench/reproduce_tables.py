"""The tables of bench/BENCHMARKS.md from a finished ``make reproduce`` run (its data folder), as Markdown.

For each evaluated task: the test split's size, the pipeline chosen on validation and the rule step that decided, then
every system's test nDCG@10 with its 95% interval over documents, on all queries and on ``needs_context`` (best
``needs_context`` first); then each system that is not a cheap baseline against the best cheap baseline of the same
queries, at the document level (:func:`evaluation.metrics.stats.paired`): the difference, its interval, the
unadjusted document-level p and the minimum detectable difference (80% power): what the test split can decide.

    .venv/bin/python bench/reproduce_tables.py <CONTEB_DATA_DIR of the run> [task ...]

Reads the run's files only (``reports/tasks/<task>/evaluation.json``, ``reports/runs/<task>/``); computes no score.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from evaluation.metrics import trec
from evaluation.metrics.stats import paired
from evaluation.reports.formatting import format_p
from evaluation.results import ALL, HEADLINE, NEEDS_CONTEXT, TaskEvaluation
from evaluation.run_files import load_evaluation, read_per_query, read_query_documents

TASKS = ("reproduce", "reproduce-covidqa", "reproduce-heldout", "reproduce-heldout-untitled")


def _ci(run, subset: str) -> str:
    s = run.summary(HEADLINE, subset)
    return "–" if s is None else f"{s.value:.3f} [{s.ci_low:.3f}, {s.ci_high:.3f}]"


def system_table(evaluation: TaskEvaluation) -> list[str]:
    """Every system that ran, best on needs_context first (all queries when unlabelled)."""
    chosen = evaluation.selection.chosen if evaluation.selection else None
    runs = [r for r in evaluation.runs if r.status == "ok"]

    def key(run) -> float:
        s = run.summary(HEADLINE, NEEDS_CONTEXT) or run.summary(HEADLINE)
        return -s.value if s is not None else 0.0

    lines = ["| system | all [95% CI over documents] | needs_context [95% CI over documents] |", "|---|---|---|"]
    for run in sorted(runs, key=key):
        weights = run.details.get("weights")
        name = run.system + (f" ({', '.join(f'{k} {v:.2g}' for k, v in weights.items())})" if weights else "")
        lines.append(
            f"| {name}{' (chosen)' if run.system == chosen else ''} | {_ci(run, ALL)} | {_ci(run, NEEDS_CONTEXT)} |"
        )
    return lines


def detectable_table(reports: Path, evaluation: TaskEvaluation) -> list[str]:
    """Each system that is not a cheap baseline against the best cheap baseline, per subset, at the document level."""
    task = evaluation.task
    documents = read_query_documents(reports, task) or {}
    values = {r.system: read_per_query(reports, task, r.system, HEADLINE) for r in evaluation.runs if r.status == "ok"}
    baselines = [r.system for r in evaluation.runs if r.status == "ok" and r.role == "baseline"]
    subsets = {ALL: sorted(documents)}
    labelled = evaluation.subset_qrels_files.get(NEEDS_CONTEXT)
    if labelled:
        subsets[NEEDS_CONTEXT] = sorted(trec.read_qrels(reports / labelled))
    chosen = evaluation.selection.chosen if evaluation.selection else None
    lines = [
        "| queries | system | best cheap baseline | Δ [95% CI over documents] | p (documents, unadjusted) "
        "| detectable Δ (80% power) | queries (documents) |",
        "|---|---|---|---|---|---|---|",
    ]
    for subset, ids in subsets.items():
        if not ids or not baselines:
            continue
        best = max(baselines, key=lambda b: np.mean([values[b][q] for q in ids]))
        for system, scores in values.items():
            if system in baselines or scores is None:
                continue
            a = np.array([scores[q] for q in ids])
            b = np.array([values[best][q] for q in ids])
            r = paired(a, b, [documents[q] for q in ids])
            name = system + (" (chosen)" if system == chosen else "")
            lines.append(
                f"| {subset} | {name} | {best} | {r.difference:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}] "
                f"| {format_p(r.p_value)} | ±{r.mdd:.3f} | {r.n_queries:,} ({r.n_documents}) |"
            )
    return lines


def task_section(reports: Path, task: str) -> list[str]:
    evaluation = load_evaluation(reports, task)
    if evaluation is None:
        return [f"**{task}**: not evaluated", ""]
    selection = evaluation.selection
    head = [
        f"**{task}** ({evaluation.n_queries:,} test queries of {evaluation.n_documents} documents, "
        f"{evaluation.n_needs_context or 0:,} needs_context)",
        "",
    ]
    if selection is not None:
        head += [
            f"chosen on validation ({selection.n_documents} documents, {selection.n_queries:,} queries): "
            f"{selection.chosen}; {selection.decision or ''}; what each rule chose: {selection.by_rule}; "
            f"weights used {selection.fitted_weights}; grid's best {selection.grid_best}",
            "",
        ]
    return [*head, *system_table(evaluation), "", *detectable_table(reports, evaluation), ""]


def main(argv: list[str]) -> None:
    data = Path(argv[0])
    for task in argv[1:] or TASKS:
        print("\n".join(task_section(data / "reports", task)))


if __name__ == "__main__":
    main(sys.argv[1:])
