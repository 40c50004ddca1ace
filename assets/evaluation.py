"""Evaluation assets: ``[task]/evaluation`` per evaluated task, ``evaluation_report`` over all of them.

Thin: the work is :func:`evaluation.runner.evaluate_task` (also behind ``conteb evaluate``) and the
renderers of ``evaluation/report.py``. Each task asset records nDCG@10 per system as numeric metadata
(plotted over time by Dagster; ``ndcg@10/<system>/needs_context`` on the queries that need context,
when labelled), the reading of its figures (``reading``, ``evaluation/reading.py``) and the task report
as Markdown with its plots embedded; its check
``metrics_match_trec_eval`` recomputes nDCG@10 from the written TREC files with ``pytrec_eval``.
"""

from pathlib import Path

import dagster as dg

from assets.resources import ConTEBSettings
from conteb.names import StageTable
from conteb.storage import reports_dir
from evaluation.load import CorpusError
from evaluation.reading import overall_reading, task_reading
from evaluation.results import HEADLINE, NEEDS_CONTEXT, TaskEvaluation
from evaluation.targets import EvalTarget, evaluate_target, evaluation_targets
from project.config import ProjectConfig

GROUP = "evaluation"
EVALUATION = "evaluation"
REPORT = "evaluation_report"


def evaluation_key(task: str) -> dg.AssetKey:
    return dg.AssetKey([task, EVALUATION])


def _upstream(config: ProjectConfig, target: EvalTarget) -> list[dg.AssetKey]:
    """What the task's evaluation reads: its dataset, its chunk contexts, the trained models it compares."""
    deps: list[dg.AssetKey] = []
    task = next((t for t in config.tasks if t.name == target.name), None)
    systems = config.evaluation.systems
    if task is not None:
        deps.append(dg.AssetKey([task.name, StageTable.CONTEB_DATASET]))
        if task.chunk_contexts and any(s.kind == "contextual" for s in systems):
            deps.append(dg.AssetKey([task.name, StageTable.CHUNK_CONTEXTS]))
    if config.training.tasks:
        trained = {getattr(s, "trained", None) for s in systems} - {None}
        if not config.training.control:
            trained.discard("finetune_control_model")
        deps += [dg.AssetKey(name) for name in sorted(trained)]
    return deps


def run_metadata(evaluation: TaskEvaluation) -> dict[str, object]:
    """Numeric nDCG@10 per system (Dagster plots it across materializations), counts and reasons."""
    metadata: dict[str, object] = {
        "documents": evaluation.n_documents,
        "chunks": evaluation.n_chunks,
        "queries": evaluation.n_queries,
    }
    if evaluation.n_needs_context is not None:
        metadata[f"count/{NEEDS_CONTEXT}"] = evaluation.n_needs_context
    for run in evaluation.runs:
        if run.status == "ok":
            metadata[f"{HEADLINE}/{run.system}"] = dg.MetadataValue.float(round(run.metrics[HEADLINE].value, 6))
            subset = run.summary(HEADLINE, NEEDS_CONTEXT)
            if subset is not None:
                metadata[f"{HEADLINE}/{run.system}/{NEEDS_CONTEXT}"] = dg.MetadataValue.float(round(subset.value, 6))
        else:
            metadata[f"{run.status}/{run.system}"] = dg.MetadataValue.text(run.reason or "")
    for comparison in evaluation.comparisons:
        name = f"p_value/{comparison.system_a}_vs_{comparison.system_b}"
        metadata[name] = dg.MetadataValue.float(comparison.p_value)
    for comparison in evaluation.subset_comparisons:
        name = f"p_value/{comparison.system_a}_vs_{comparison.system_b}/{comparison.subset}"
        metadata[name] = dg.MetadataValue.float(comparison.p_value)
    return metadata


def _task_asset(config: ProjectConfig, target: EvalTarget) -> dg.AssetsDefinition:
    @dg.asset(
        key=evaluation_key(target.name),
        group_name=GROUP,
        deps=_upstream(config, target),
        kinds={"python", "numpy"},
        description=f"Every configured retrieval system on {target.name} ({target.path}): metrics with 95% "
        "CIs, per-position, document-level, corpus-size scaling, chunk-size study, TREC run files.",
        check_specs=[
            dg.AssetCheckSpec(
                "metrics_match_trec_eval",
                asset=evaluation_key(target.name),
                description="nDCG@10, Recall@10 and P@10 of every system recomputed from its TREC run file with "
                "pytrec_eval, on all queries and on the needs_context subset.",
            )
        ],
    )
    def task_evaluation(context: dg.AssetExecutionContext, settings: ConTEBSettings):
        # Imported here: torch and sentence-transformers would otherwise load in every step process.
        from evaluation.report import dagster_markdown_task, reading_markdown, write_task_report
        from evaluation.verify import verify_against_trec_eval

        data = settings.data_path
        reports = reports_dir(data)
        try:
            evaluation = evaluate_target(target, config.evaluation, data, log=context.log.info)
        except CorpusError as error:
            raise dg.Failure(description=f"{target.name}: {error}") from error
        paths = write_task_report(evaluation, reports)
        failed = [run for run in evaluation.runs if run.status == "failed"]
        metadata = {
            **run_metadata(evaluation),
            "reading": dg.MetadataValue.md(reading_markdown(task_reading(evaluation))),
            "report": dg.MetadataValue.md(dagster_markdown_task(evaluation)),
            **{f"path/{name}": dg.MetadataValue.path(str(path)) for name, path in paths.items()},
        }
        if failed:
            raise dg.Failure(
                description="; ".join(f"{run.system}: {run.reason}" for run in failed),
                metadata=metadata,
            )
        yield dg.MaterializeResult(metadata=metadata)
        problems = verify_against_trec_eval(evaluation, reports)
        yield dg.AssetCheckResult(
            check_name="metrics_match_trec_eval",
            passed=not problems,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={
                "systems checked": sum(r.status == "ok" for r in evaluation.runs),
                "problems": "\n".join(problems),
            },
        )

    return task_evaluation


def _report_asset(config: ProjectConfig, targets: list[EvalTarget]) -> dg.AssetsDefinition:
    @dg.asset(
        key=dg.AssetKey(REPORT),
        group_name=GROUP,
        deps=[evaluation_key(t.name) for t in targets],
        kinds={"python", "markdown", "html"},
        description="results.json, report.md/.html and plots over every evaluated task (data/reports/).",
    )
    def evaluation_report(context: dg.AssetExecutionContext, settings: ConTEBSettings) -> dg.MaterializeResult:
        from evaluation.report import dagster_markdown_overall, reading_markdown, write_reports
        from evaluation.runner import load_evaluation

        reports = reports_dir(settings.data_path)
        loaded = {t.name: load_evaluation(reports, t.name) for t in targets}
        evaluations = [e for e in loaded.values() if e is not None]
        missing = [name for name, e in loaded.items() if e is None]
        if missing:
            context.log.warning(f"no evaluation yet for {missing}: left out of the report")
        paths = write_reports(evaluations, reports)
        context.log.info(f"report over {len(evaluations)} task(s): {paths.get('report.md')}")
        metadata: dict[str, object] = {
            "tasks": len(evaluations),
            "reading": dg.MetadataValue.md(reading_markdown(overall_reading(evaluations))),
            "report": dg.MetadataValue.md(dagster_markdown_overall(evaluations)),
            **{f"path/{name}": dg.MetadataValue.path(str(path)) for name, path in paths.items()},
        }
        for evaluation in evaluations:
            for run in evaluation.runs:
                if run.status == "ok":
                    value = round(run.metrics[HEADLINE].value, 6)
                    metadata[f"{HEADLINE}/{evaluation.task}/{run.system}"] = dg.MetadataValue.float(value)
                    subset = run.summary(HEADLINE, NEEDS_CONTEXT)
                    if subset is not None:
                        name = f"{HEADLINE}/{evaluation.task}/{run.system}/{NEEDS_CONTEXT}"
                        metadata[name] = dg.MetadataValue.float(round(subset.value, 6))
        return dg.MaterializeResult(metadata=metadata)

    return evaluation_report


def build_evaluation_assets(config: ProjectConfig, data_dir: Path) -> list[dg.AssetsDefinition]:
    """One evaluation asset per target of the ``evaluation:`` block, and the overall report."""
    targets = evaluation_targets(config.tasks, config.evaluation, data_dir)
    if not targets:
        return []
    return [*(_task_asset(config, target) for target in targets), _report_asset(config, targets)]
