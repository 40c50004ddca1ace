"""The report of the paper's controlled experiment: ``<reports>/reproduce/{report.md, report.html, comparison.json,
effects.png}``.

It reads what the experiment's evaluation wrote (``tasks/<task>/evaluation.json`` and the per-query metrics of every
system, ``runs/<task>/<system>.metrics.parquet``) and the ``needs_context`` labels of the evaluated queries, compares
the authors' headline effects with ours (:mod:`evaluation.reports.paper`: each figure beside the effect its source
measured, none beside an anchored-window effect) and renders them with the shared document model
(:mod:`evaluation.reports.document`, :mod:`evaluation.reports.markdown`, :mod:`evaluation.reports.html`). ``setup``
lines state what was run and what was scaled down.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from conteb.staging import staged_tree
from conteb.storage import write_bytes_atomic, write_text_atomic
from evaluation.reports import plots
from evaluation.reports.answer import answer_blocks, trained_parts
from evaluation.reports.blocks import baseline_blocks, provenance_blocks, provenance_cell
from evaluation.reports.document import (
    Block,
    BulletList,
    Document,
    Heading,
    Image,
    Paragraph,
    Span,
    Table,
    number,
    text,
)
from evaluation.reports.html import render_html
from evaluation.reports.markdown import render_markdown
from evaluation.reports.paper import (
    PAPER,
    PAPER_EFFECTS,
    RELEASE_POST,
    SOURCES,
    EffectResult,
    PaperComparison,
    authors_figure,
    compare_with_paper,
)
from evaluation.reports.pipeline_target import TARGET_HEADER as PIPELINE_HEADER
from evaluation.reports.pipeline_target import TARGET_RULE as PIPELINE_RULE
from evaluation.reports.pipeline_target import PipelineTarget, pipeline_target, pipeline_target_sentences, target_row
from evaluation.reports.selection import rule_count_blocks, rule_counts
from evaluation.reports.significance import (
    P_ADJUSTED,
    P_UNADJUSTED,
    QUERY_LEVEL_P,
    format_mdd,
    interval_text,
    p_adjusted_text,
    p_query_text,
    p_unadjusted_text,
    sizes_cell,
    sizes_text,
)
from evaluation.reports.target import (
    REFERENCE,
    TARGET_SYSTEM,
    TOLERANCE,
    Margin,
    TaskTarget,
    target_sentences,
    task_target,
)
from evaluation.results import ALL, HEADLINE, NEEDS_CONTEXT, Selection, TaskEvaluation, json_ready
from evaluation.run_files import load_evaluation, read_per_query, read_query_documents

REPORT_FOLDER = "reproduce"


def per_query_of_runs(
    reports_dir: Path, evaluation: TaskEvaluation, metric: str = HEADLINE
) -> dict[str, dict[str, float]]:
    """system -> query id -> ``metric`` for every system of ``evaluation`` that ran (and wrote its metrics)."""
    out = {}
    for run in evaluation.runs:
        values = read_per_query(reports_dir, evaluation.task, run.system, metric) if run.status == "ok" else None
        if values is not None:
            out[run.system] = values
    return out


def documents_of(reports_dir: Path, task: str) -> dict[str, str]:
    """query id -> its document for ``task`` (:func:`evaluation.run_files.read_query_documents`), the unit of every
    test and interval here; raises FileNotFoundError when the task wrote no qrels."""
    documents = read_query_documents(reports_dir, task)
    if documents is None:
        raise FileNotFoundError(f"no qrels of task {task!r} under {reports_dir}: evaluate it first")
    return documents


def read_needs_context(queries_file: Path | None) -> dict[str, bool] | None:
    """query id -> ``needs_context`` from a published queries Parquet file (None when absent or without labels)."""
    if queries_file is None or not queries_file.is_file():
        return None
    table = pq.read_table(queries_file)
    if "needs_context" not in table.column_names:
        return None
    labels = table.column("needs_context").to_pylist()
    return {qid: bool(label) for qid, label in zip(table.column("query_id").to_pylist(), labels, strict=True)}


def _points(value: float | None) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:+.1f}"


EFFECTS_HEADER = (
    "effect",
    "queries",
    "authors (source)",
    "ours (points)",
    "95% CI over documents",
    P_ADJUSTED,
    P_UNADJUSTED,
    "queries (documents)",
    "detectable (points, 80% power)",
    "verdict",
    QUERY_LEVEL_P,
)


def _effect_row(result: EffectResult):
    """One row under :data:`EFFECTS_HEADER`."""
    measured = result.verdict != "not measured"
    significant = result.verdict not in ("inconclusive", "not measured")
    ci = "–" if result.ci_low is None else f"[{result.ci_low:+.1f}, {result.ci_high:+.1f}]"
    mdd = None if result.mdd_points is None else result.mdd_points / 100.0
    return (
        text(result.claim),
        text(result.subset),
        number(authors_figure(result)),
        number(_points(result.points)),
        number(ci),
        number(
            result.p_text(result.p_adjusted) if measured else "–",
            bold=significant,
        ),
        number(result.p_text(result.p_value) if measured else "–"),
        number(sizes_cell(result.n_queries, result.n_documents) if measured else "–"),
        number(format_mdd(mdd, result.n_documents, 100.0, 1) if measured else "–"),
        text(result.verdict if measured else f"not measured: {result.reason}"),
        number(result.p_text(result.p_query) if measured else "–"),
    )


VERDICT_COLOURS = {
    "reproduces": "#2a9d8f",
    "gain": "#2a9d8f",
    "opposite": "#d62828",
    "loss": "#d62828",
    "inconclusive": "#8d99ae",
}
AUTHOR_MARKERS = {PAPER: "D", RELEASE_POST: "s"}
"""The authors' figure on the plot: a diamond for the paper's, a square for the release post's."""


@dataclass(frozen=True)
class EffectMark:
    """One row of the effects plot: ours (points, 95% CI, verdict) and the authors' figure, only where they measured
    the effect (``authors_points`` and ``authors_source`` None otherwise: anchored windows, a direction-only claim)."""

    label: str
    points: float
    ci_low: float
    ci_high: float
    verdict: str
    authors_points: float | None
    authors_source: str | None


def effect_marks(comparison: PaperComparison) -> list[EffectMark]:
    """The measured paired effects of ``comparison`` as plot rows, in order (see :class:`EffectMark`)."""
    marks = []
    for r in comparison.effects:
        if r.verdict == "not measured" or r.points is None or r.ci_low is None or r.ci_high is None:
            continue  # a measured effect has all three (paper.paired_effect)
        figure = r.paper_points if r.paper_source is not None else None
        marks.append(
            EffectMark(
                f"{r.system_a} − {r.system_b}\n({r.subset})",
                r.points,
                r.ci_low,
                r.ci_high,
                r.verdict,
                figure,
                r.paper_source if figure is not None else None,
            )
        )
    return marks


def plot_effects(comparison: PaperComparison, dpi: int = 110) -> bytes:
    """Ours (with 95% CI) beside the authors' figure (:func:`effect_marks`), in nDCG@10 points; an effect the authors
    did not measure (anchored windows) has no figure beside it."""
    from matplotlib.figure import Figure

    marks = effect_marks(comparison)
    figure = Figure(figsize=(9, 0.55 * max(3, len(marks)) + 1.2), layout="constrained")
    axis = figure.subplots()
    ys = list(range(len(marks)))
    for y, mark in zip(ys, marks, strict=True):
        axis.errorbar(
            mark.points,
            y,
            xerr=[[mark.points - mark.ci_low], [mark.ci_high - mark.points]],
            fmt="o",
            color=VERDICT_COLOURS[mark.verdict],
            capsize=3,
            label=mark.verdict,
        )
        if mark.authors_points is not None and mark.authors_source is not None:
            axis.plot(
                mark.authors_points,
                y,
                marker=AUTHOR_MARKERS[mark.authors_source],
                color="#333333",
                markersize=5,
                label=mark.authors_source,
            )
    axis.axvline(0, color="#999999", linewidth=0.8)
    axis.set_yticks(ys, [mark.label for mark in marks], fontsize=7)
    axis.invert_yaxis()
    axis.set_xlabel(
        "nDCG@10 difference (points); dots: ours with 95% CI over documents, diamond: the paper, square: the release "
        "post"
    )
    handles, names = axis.get_legend_handles_labels()
    unique = dict(zip(names, handles, strict=True))
    axis.legend(unique.values(), unique.keys(), fontsize=7, loc="lower right")
    axis.grid(alpha=0.3, axis="x")
    return plots.png_bytes(figure, dpi)


TARGET_RULE = (
    f"The target on every evaluated task: {TARGET_SYSTEM} (InSeNT, anchored windows) is the best system on the "
    f"needs_context queries, and loses at most {TOLERANCE} nDCG@10 to {REFERENCE} chunks on all queries (point "
    "estimates; how sure: each difference's paired randomization test over whole documents, Holm-adjusted over every "
    "paired comparison this report states for the task, and its 95% CI from a bootstrap over documents; detectable: "
    "the smallest difference the test "
    "set detects with 80% power). A cause is named only when the same task measures it, by the adjusted p "
    "(evaluation/reports/target.py). No setting was tuned on a test split."
)


def _verdict_cell(met: bool | None) -> str:
    return "–" if met is None else ("yes" if met else "no")


def target_blocks(targets: Sequence[TaskTarget]) -> list[Block]:
    """The target section: the rule, one row per task, the verdicts in words, then the trained models against
    every other system on each task (all queries and needs_context)."""
    blocks: list[Block] = [Heading("The target, task by task", 2), Paragraph((Span(TARGET_RULE),))]
    rows = []
    for t in targets:
        needs = t.means.get(NEEDS_CONTEXT, {})
        on_all = t.means.get(ALL, {})
        best = t.best_on_needs_context
        sizes = [sizes_cell(t.queries.get(s, 0), t.documents.get(s)) for s in (ALL, NEEDS_CONTEXT)]
        rows.append(
            (
                text(t.task),
                number(" / ".join(sizes)),
                number(
                    f"{on_all[TARGET_SYSTEM]:.3f} / "
                    + (f"{needs[TARGET_SYSTEM]:.3f}" if TARGET_SYSTEM in needs else "–")
                    if TARGET_SYSTEM in on_all
                    else "–"
                ),
                number(f"{on_all[REFERENCE]:.3f}" if REFERENCE in on_all else "–"),
                text(f"{best} {needs[best]:.3f}" if best else "–"),
                text(_verdict_cell(t.met_best)),
                text(_verdict_cell(t.met_all)),
            )
        )
    blocks.append(
        Table(
            "target",
            (
                "task",
                "queries (documents): all / needs_context",
                f"{TARGET_SYSTEM} all / needs_context",
                f"{REFERENCE}, all",
                "best on needs_context",
                "best on needs_context?",
                f"within {TOLERANCE} of {REFERENCE}?",
            ),
            tuple(rows),
        )
    )
    blocks.append(BulletList(tuple((Span(line),) for t in targets for line in target_sentences(t))))
    for t in targets:
        if not t.margins:
            continue
        blocks.append(Heading(f"{t.task}: the trained models against every other system", 3))
        blocks.append(Table(f"margins-{t.task}", MARGINS_HEADER, tuple(_margin_row(m) for m in t.margins)))
    return blocks


MARGINS_HEADER = (
    "trained",
    "against",
    "queries",
    "difference [95% CI over documents]",
    P_ADJUSTED,
    P_UNADJUSTED,
    "queries (documents)",
    "detectable Δ (80% power)",
    "verdict",
    QUERY_LEVEL_P,
)


def _margin_row(m: Margin):
    """One row under :data:`MARGINS_HEADER`."""
    return (
        text(m.system),
        text(m.rival),
        text(m.subset),
        number(interval_text(m)),
        number(p_adjusted_text(m), bold=m.significant),
        number(p_unadjusted_text(m)),
        number(sizes_cell(m.n_queries, m.n_documents)),
        number(format_mdd(m.mdd, m.n_documents)),
        text(m.direction(), bold=m.significant),
        number(p_query_text(m)),
    )


def pipeline_target_blocks(targets: Sequence[PipelineTarget]) -> list[Block]:
    """The chosen pipeline's target (:mod:`evaluation.reports.pipeline_target`): the rule, one row per task, then
    each verdict in words with its figures."""
    if not targets:
        return []
    return [
        Heading("The recommended pipeline's target, task by task", 2),
        Paragraph((Span(PIPELINE_RULE),)),
        Table("pipeline-target", PIPELINE_HEADER, tuple(tuple(text(c) for c in target_row(t)) for t in targets)),
        BulletList(tuple((Span(line),) for t in targets for line in pipeline_target_sentences(t))),
    ]


def build_pipeline_targets(
    reports_dir: Path, tasks: Sequence[tuple[str, Path | None, bool | None]]
) -> list[PipelineTarget]:
    """The recommended pipeline's target on each evaluated task, given as (task, its evaluated queries file, whether
    its source declares that its titles name its subject: None when it says nothing); a task that was not evaluated
    raises FileNotFoundError."""
    targets = []
    for task, queries_file, titles_declared in tasks:
        evaluation = load_evaluation(reports_dir, task)
        if evaluation is None:
            raise FileNotFoundError(f"no evaluation of task {task!r} under {reports_dir}: evaluate it first")
        chosen = evaluation.selection.chosen if evaluation.selection else None
        run = evaluation.run(chosen) if chosen else None
        baselines = [r.system for r in evaluation.runs if r.role == "baseline" and r.status == "ok"]
        trained = bool(run is not None and trained_parts(evaluation, run))
        per_query = per_query_of_runs(reports_dir, evaluation)
        labels, documents = read_needs_context(queries_file), documents_of(reports_dir, task)
        targets.append(pipeline_target(task, chosen, trained, baselines, per_query, labels, documents, titles_declared))
    return targets


def build_targets(reports_dir: Path, tasks: Sequence[tuple[str, str, Path | None]]) -> list[TaskTarget]:
    """The target on each evaluated task, given as (task, what it is, its evaluated queries file); a task that was
    not evaluated raises FileNotFoundError."""
    targets = []
    for task, about, queries_file in tasks:
        evaluation = load_evaluation(reports_dir, task)
        if evaluation is None:
            raise FileNotFoundError(f"no evaluation of task {task!r} under {reports_dir}: evaluate it first")
        per_query = per_query_of_runs(reports_dir, evaluation)
        documents = documents_of(reports_dir, task)
        targets.append(task_target(task, about, per_query, read_needs_context(queries_file), documents))
    return targets


def reproduce_document(
    comparison: PaperComparison,
    evaluation: TaskEvaluation,
    setup: Sequence[str],
    images: dict[str, str],
    targets: Sequence[TaskTarget] = (),
    pipeline_targets: Sequence[PipelineTarget] = (),
    selections: Sequence[tuple[str, Selection]] = (),
) -> Document:
    """The report: the reading first, the target on every evaluated task, then the effects table, each tested system
    against the best cheap baseline (all queries, needs_context), systems (with their models' provenance), the
    chunk-size effect, the setup."""
    blocks: list[Block] = [
        *answer_blocks(evaluation),
        *pipeline_target_blocks(pipeline_targets),
        *rule_count_blocks(selections),
        Heading("What reproduces here", 2),
        BulletList(tuple((Span(line),) for line in comparison.summary) or ((Span("nothing was measured"),),)),
    ]
    if targets:
        blocks += target_blocks(targets)
    blocks += [
        Heading("Headline effects: the authors' beside ours", 2),
        Paragraph(
            (
                Span(
                    f"Differences in nDCG@10 points on the {evaluation.split} split of task {evaluation.task} "
                    f"({sizes_text(comparison.subsets.get(ALL, 0), comparison.documents.get(ALL))}; "
                    f"{sizes_text(comparison.subsets.get(NEEDS_CONTEXT, 0), comparison.documents.get(NEEDS_CONTEXT))} "
                    "labelled needs_context). The authors' figures "
                    f"(ConTEB averages), each marked with its source: paper = {SOURCES[PAPER]} (ModernBERT); release "
                    f"post = {SOURCES[RELEASE_POST]}. The authors measured no anchored windows (this project's own "
                    "rule): no figure stands beside those effects, whose verdicts (gain, loss) are about our numbers "
                    "only. Ours: the 95% CI from a bootstrap over documents; the paired randomization test flips "
                    "whole documents; verdicts read its p Holm-adjusted over every paired comparison this report "
                    "states for the task (adjusted p < 0.05); "
                    "detectable: the smallest difference the test set detects with 80% power; the query-level p "
                    "treats every query as independent and decides nothing."
                ),
            )
        ),
        Table(
            "effects",
            EFFECTS_HEADER,
            tuple(_effect_row(r) for r in comparison.effects),
        ),
    ]
    if "effects" in images:
        blocks.append(Image("effects: ours vs the authors'", images["effects"]))
    blocks.append(Heading("Against the best cheap baseline", 2))
    blocks += baseline_blocks([evaluation])
    if evaluation.subset_comparisons:
        blocks.append(Heading(f"On the {comparison.subsets.get(NEEDS_CONTEXT, 0):,} queries that need context", 3))
        blocks += baseline_blocks([evaluation], NEEDS_CONTEXT)
    rows = []
    for run in evaluation.runs:
        summary = run.metrics.get(HEADLINE)
        value = "–" if summary is None else f"{summary.value:.3f} [{summary.ci_low:.3f}, {summary.ci_high:.3f}]"
        rows.append(
            (
                text(run.system),
                number(value),
                number("–" if summary is None else sizes_cell(summary.n_queries, summary.n_documents)),
                text(run.description or (run.reason or run.status)),
                text(provenance_cell(run)),
            )
        )
    blocks += [
        Heading("Systems", 2),
        Table(
            "systems",
            ("system", "nDCG@10 [95% CI over documents], all queries", "queries (documents)", "what", "provenance"),
            tuple(rows),
        ),
    ]
    blocks += provenance_blocks((("", run) for run in evaluation.runs), 3)
    blocks.append(Heading("Chunk-size curve", 2))
    if comparison.retention:
        blocks.append(
            Table(
                "retention",
                ("system", "nDCG@10 at 1000", "at smallest", "retention", "independent", "verdict"),
                tuple(
                    (
                        text(r.system),
                        number(f"{r.at_reference:.3f}"),
                        number(f"{r.at_smallest:.3f} ({r.smallest_size})"),
                        number(f"{r.retention:.0%}"),
                        number("–" if r.independent_retention is None else f"{r.independent_retention:.0%}"),
                        text(r.verdict),
                    )
                    for r in comparison.retention
                ),
            )
        )
    else:
        blocks.append(Paragraph((Span(evaluation.chunk_size_note or "the chunk-size study did not run"),)))
    if "chunk_sizes" in images:
        blocks.append(Image("nDCG@10 by chunk size", images["chunk_sizes"]))
    blocks += [Heading("Setup and what was scaled down", 2), BulletList(tuple((Span(line),) for line in setup))]
    return Document(f"The paper's controlled experiment, reproduced on {evaluation.task}", tuple(blocks))


def build_comparison(reports_dir: Path, task: str, queries_file: Path | None) -> tuple[PaperComparison, TaskEvaluation]:
    """Compare the task's last evaluation with the paper (raises FileNotFoundError when it was not evaluated)."""
    evaluation = load_evaluation(reports_dir, task)
    if evaluation is None:
        raise FileNotFoundError(f"no evaluation of task {task!r} under {reports_dir}: evaluate it first")
    comparison = compare_with_paper(
        evaluation,
        per_query_of_runs(reports_dir, evaluation),
        read_needs_context(queries_file),
        documents_of(reports_dir, task),
    )
    return comparison, evaluation


def write_reproduce_report(
    comparison: PaperComparison,
    evaluation: TaskEvaluation,
    reports_dir: Path,
    setup: Sequence[str],
    targets: Sequence[TaskTarget] = (),
    pipeline_targets: Sequence[PipelineTarget] = (),
    selections: Sequence[tuple[str, Selection]] = (),
) -> dict[str, Path]:
    """Write ``comparison.json``, ``effects.png``, ``chunk_sizes.png`` (when studied), ``report.md`` and ``.html``,
    all together or none (:func:`conteb.staging.staged_tree`)."""
    with staged_tree(Path(reports_dir)) as staged:
        folder = staged.stage / REPORT_FOLDER
        paths: dict[str, Path] = {}
        images: dict[str, str] = {}
        paths["effects.png"] = write_bytes_atomic(plot_effects(comparison), folder / "effects.png")
        images["effects"] = "effects.png"
        chunk_sizes = plots.plot_chunk_sizes([evaluation])
        if chunk_sizes is not None:
            paths["chunk_sizes.png"] = write_bytes_atomic(chunk_sizes, folder / "chunk_sizes.png")
            images["chunk_sizes"] = "chunk_sizes.png"
        document = reproduce_document(comparison, evaluation, setup, images, targets, pipeline_targets, selections)
        record = {
            "sources": SOURCES,
            "paper_effects": [dataclasses.asdict(e) for e in PAPER_EFFECTS],
            **dataclasses.asdict(comparison),
        }
        record["targets"] = [{**dataclasses.asdict(t), "met": t.met, "verdict": target_sentences(t)} for t in targets]
        record["pipeline_targets"] = [
            {**dataclasses.asdict(t), "met": t.met, "verdict": pipeline_target_sentences(t)} for t in pipeline_targets
        ]
        record["choice_rules"] = {
            "changed": rule_counts([selection for _, selection in selections]),
            "tasks": {task: dataclasses.asdict(selection) for task, selection in selections},
        }
        record["setup"] = list(setup)
        paths["comparison.json"] = write_text_atomic(
            json.dumps(json_ready(record), indent=2, allow_nan=False), folder / "comparison.json"
        )
        paths["report.md"] = write_text_atomic(render_markdown(document), folder / "report.md")
        paths["report.html"] = write_text_atomic(render_html(document), folder / "report.html")
    return {name: staged.final(path) for name, path in paths.items()}
