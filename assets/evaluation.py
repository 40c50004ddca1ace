"""Evaluation assets: ``[task]/evaluation`` per evaluated task, ``evaluation_report`` over all of them.

Thin: the work is :mod:`evaluation.sharding` (the encode shards), :func:`evaluation.targets.evaluate_and_report`
(:func:`evaluation.runner.evaluate_task`, also behind ``conteb evaluate``) and the renderers of
``evaluation/reports/publish.py``. ``[task]/evaluation`` is a graph (:func:`_task_asset`): split → one encode step per
document shard → rank. It records nDCG@10 per system as numeric metadata (plotted over time by Dagster;
``ndcg@10/<system>/needs_context`` on the queries that need context, when labelled), ``encode_shards``, the
reading of its figures (``reading``, ``evaluation/reports/reading.py``) and the task report as Markdown with its plots
embedded. Its check ``metrics_match_trec_eval`` (a step of its own after the asset) recomputes nDCG@10 from the
written TREC files with ``pytrec_eval``.
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from assets.resources import ConTEBSettings
from assets.retries import retried_op
from conteb.names import StageTable, TrainedModel
from conteb.storage import models_dir, reports_dir
from curation.shards import shard_key
from evaluation.encoded import EncodingJob, EncodingKey, EncodingOutcome, EncodingShard, merge_outcomes
from evaluation.load import CorpusError
from evaluation.reports.reading import overall_reading, task_reading
from evaluation.results import ALL, BEST_BASELINE, HEADLINE, NEEDS_CONTEXT, TaskEvaluation
from evaluation.targets import EvalTarget, LoadedTarget, evaluate_and_report, evaluation_targets, load_target
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
            trained.discard(TrainedModel.FINETUNE_CONTROL)
        deps += [dg.AssetKey(name) for name in sorted(trained)]
    return deps


def run_metadata(evaluation: TaskEvaluation) -> dict[str, object]:
    """Numeric nDCG@10 per system (Dagster plots it across materializations), counts, reasons, each model's
    provenance (``provenance/<system>``: ``provenance unknown: ...`` for a model without training_data.json), the
    pipeline recommended on validation (``recommended``) and, for every comparison, ``p_adjusted/<a>_vs_<b>`` (the
    Holm-adjusted document-level p, what every verdict reads), ``verdict/<a>_vs_<b>`` (significantly better,
    significantly worse or no measurable difference) and ``p_value/<a>_vs_<b>`` (the document-level p before the
    adjustment), ``<tested>_vs_best_baseline`` against the best cheap baseline (with ``difference/...`` and the
    baseline's name under ``best_baseline``); the ``needs_context`` subset's with ``/needs_context`` appended."""
    metadata: dict[str, object] = {
        "documents": evaluation.n_documents,
        "chunks": evaluation.n_chunks,
        "queries": evaluation.n_queries,
    }
    if evaluation.n_needs_context is not None:
        metadata[f"count/{NEEDS_CONTEXT}"] = evaluation.n_needs_context
    if evaluation.selection is not None:  # the pipeline chosen on validation (evaluation/select.py)
        metadata["recommended"] = dg.MetadataValue.text(evaluation.selection.chosen or "none")
    for run in evaluation.runs:
        if run.status == "ok":
            metadata[f"{HEADLINE}/{run.system}"] = dg.MetadataValue.float(round(run.metrics[HEADLINE].value, 6))
            subset = run.summary(HEADLINE, NEEDS_CONTEXT)
            if subset is not None:
                metadata[f"{HEADLINE}/{run.system}/{NEEDS_CONTEXT}"] = dg.MetadataValue.float(round(subset.value, 6))
        else:
            metadata[f"{run.status}/{run.system}"] = dg.MetadataValue.text(run.reason or "")
        if run.provenance_note is not None:  # what is known of the model's training documents (evaluation/leakage.py)
            metadata[f"provenance/{run.system}"] = dg.MetadataValue.text(run.provenance_note)
    for comparison in [*evaluation.comparisons, *evaluation.subset_comparisons]:
        # against the best cheap baseline: one key per tested system whichever baseline is best (plotted over time),
        # the baseline itself under best_baseline
        against = "best_baseline" if comparison.plan == BEST_BASELINE else comparison.system_b
        where = "" if comparison.subset == ALL else f"/{comparison.subset}"
        pair = f"{comparison.system_a}_vs_{against}{where}"
        metadata[f"p_adjusted/{pair}"] = dg.MetadataValue.float(comparison.p_adjusted)
        metadata[f"verdict/{pair}"] = dg.MetadataValue.text(comparison.direction())
        metadata[f"p_value/{pair}"] = dg.MetadataValue.float(comparison.p_value)
        if comparison.plan == BEST_BASELINE:
            metadata[f"difference/{comparison.system_a}_vs_best_baseline{where}"] = dg.MetadataValue.float(
                round(comparison.difference, 6)
            )
            metadata[f"best_baseline{where}"] = dg.MetadataValue.text(comparison.system_b)
    return metadata


@dataclass(frozen=True)
class EvaluationPlan:
    """From the split to the ranking step: the loaded target and the encodings its shards compute."""

    loaded: LoadedTarget
    jobs: tuple[EncodingJob, ...]


@dataclass(frozen=True)
class ShardInput:
    """One encode step's input: its shard and the jobs to run on it."""

    shard: EncodingShard
    jobs: tuple[EncodingJob, ...]

    @property
    def key(self) -> str:
        return shard_key(self.shard.index)


@dataclass(frozen=True)
class ShardResult:
    """One encode step's output: its shard's index and every job's encoding (or problem)."""

    index: int
    outcomes: dict[EncodingKey, EncodingOutcome]


def _op_prefix(target: EvalTarget) -> str:
    """``<task>__evaluation`` as an op name (letters, digits and ``_`` only)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", f"{target.name}__{EVALUATION}")


def _task_asset(config: ProjectConfig, target: EvalTarget) -> dg.AssetsDefinition:
    """``[task]/evaluation`` as a graph: split → one encode step per document shard → rank (``evaluation/sharding.py``).

    The split loads the corpus (and the span sources of the chunk-size study), plans the encodings and cuts the
    documents into shards of ``execution.encode_shard_documents``; each encode step (``RetryPolicy(max_retries=2)``)
    encodes its shard for every model-based system; the rank step joins the shards, encodes the queries, ranks,
    measures and writes the task's files and report. Intermediate values go through Dagster's ``io_manager``, as the
    sharded LLM stages' do (``assets/sharded.py``).
    """
    prefix, deps = _op_prefix(target), _upstream(config, target)
    size = config.execution.encode_shard_documents
    dep_names = [f"upstream_{i}" for i in range(len(deps))]

    @dg.op(
        name=f"{prefix}__split",
        ins={name: dg.In(dg.Nothing) for name in dep_names},
        out={"plan": dg.Out(), "shards": dg.DynamicOut()},
        description=f"Load {target.name}'s corpus and cut its documents into encode shards of at most {size}.",
    )
    def split_op(context: dg.OpExecutionContext, settings: ConTEBSettings):
        from evaluation.sharding import encoding_jobs, encoding_shards, study_sources

        try:
            loaded = load_target(target, config.evaluation)
        except CorpusError as error:
            raise dg.Failure(description=f"{target.name}: {error}") from error
        jobs = tuple(
            encoding_jobs(loaded.corpus, config.evaluation, models_dir(settings.data_path), sources=loaded.sources)
        )
        shards = encoding_shards(loaded.corpus, study_sources(jobs, loaded.sources), size)
        context.log.info(
            f"{target.name}: {loaded.corpus.n_documents:,} documents, {loaded.corpus.n_chunks:,} chunks in "
            f"{len(shards)} encode shard(s) of at most {size} documents; encodings: "
            + (", ".join(str(job.key) for job in jobs) or "none (no model-based system can run)")
        )
        yield dg.Output(EvaluationPlan(loaded, jobs), "plan")
        for shard in shards:
            payload = ShardInput(shard, jobs)
            yield dg.DynamicOutput(payload, mapping_key=payload.key, output_name="shards")

    @retried_op(
        name=f"{prefix}__encode",
        pool=config.execution.encode_pool,
        tags=config.execution.encode_op_tags or None,
        description=f"Encode one shard of {target.name}'s documents for every model-based system.",
    )
    def encode_op(context: dg.OpExecutionContext, settings: ConTEBSettings, shard: ShardInput) -> ShardResult:
        from evaluation.sharding import encode_shard

        documents = shard.shard.doc_ids
        context.log.info(
            f"{target.name} shard {shard.key}: {len(documents)} documents, {shard.shard.corpus.n_chunks:,} chunks, "
            f"{len(shard.jobs)} encoding(s)"
        )
        outcomes = encode_shard(
            shard.shard,
            shard.jobs,
            models_dir(settings.data_path),
            label=f"{target.name} shard {shard.key}: ",
            log=context.log.info,
        )
        return ShardResult(shard.shard.index, outcomes)

    @dg.op(
        name=f"{prefix}__rank",
        out=dg.Out(dg.Nothing),
        description=f"Join {target.name}'s encode shards, encode the queries, rank, measure, write the report.",
    )
    def rank_op(
        context: dg.OpExecutionContext,
        settings: ConTEBSettings,
        plan: EvaluationPlan,
        encoded: list[ShardResult],
    ) -> None:
        # Imported here: torch and sentence-transformers would otherwise load in every step process.
        from evaluation.reports.publish import dagster_markdown_task, reading_markdown

        data = settings.data_path
        encodings = merge_outcomes([result.outcomes for result in sorted(encoded, key=lambda result: result.index)])
        reported = evaluate_and_report(plan.loaded, config.evaluation, data, encodings=encodings, log=context.log.info)
        evaluation, paths = reported.evaluation, reported.paths
        failed = [run for run in evaluation.runs if run.status == "failed"]
        metadata = {
            **run_metadata(evaluation),
            "encode_shards": len(encoded),
            "reading": dg.MetadataValue.md(reading_markdown(task_reading(evaluation))),
            "report": dg.MetadataValue.md(dagster_markdown_task(evaluation)),
            **{f"path/{name}": dg.MetadataValue.path(str(path)) for name, path in paths.items()},
        }
        if failed:
            raise dg.Failure(
                description="; ".join(f"{run.system}: {run.reason}" for run in failed),
                metadata=metadata,
            )
        context.add_output_metadata(metadata)

    def compose(**upstream: Any) -> Any:
        plan, shards = split_op(**upstream)
        return rank_op(plan, shards.map(encode_op).collect())

    compose.__doc__ = (
        f"Every configured retrieval system on {target.name} ({target.path}): metrics with 95% CIs, per-position, "
        "document-level, corpus-size scaling, chunk-size study, TREC run files. Chunks are encoded in document "
        "shards (one step each), then ranked in one step."
    )
    compose.__name__ = prefix
    return dg.graph_asset(
        key=evaluation_key(target.name),
        group_name=GROUP,
        ins={name: dg.AssetIn(key=key, dagster_type=dg.Nothing) for name, key in zip(dep_names, deps, strict=True)},
        kinds={"python", "numpy"},
    )(compose)


def _trec_eval_check(target: EvalTarget) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=evaluation_key(target.name),
        name="metrics_match_trec_eval",
        description="nDCG@10, Recall@10 and P@10 of every system recomputed from its TREC run file with "
        "pytrec_eval, on all queries and on the needs_context subset.",
    )
    def metrics_match_trec_eval(settings: ConTEBSettings) -> dg.AssetCheckResult:
        from evaluation.metrics.verify import verify_against_trec_eval
        from evaluation.run_files import load_evaluation

        reports = reports_dir(settings.data_path)
        evaluation = load_evaluation(reports, target.name)
        if evaluation is None:
            return dg.AssetCheckResult(passed=False, metadata={"problems": f"no evaluation of {target.name} yet"})
        problems = verify_against_trec_eval(evaluation, reports)
        return dg.AssetCheckResult(
            passed=not problems,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={
                "systems checked": sum(r.status == "ok" for r in evaluation.runs),
                "problems": "\n".join(problems),
            },
        )

    return metrics_match_trec_eval


def _report_asset(config: ProjectConfig, targets: list[EvalTarget]) -> dg.AssetsDefinition:
    @dg.asset(
        key=dg.AssetKey(REPORT),
        group_name=GROUP,
        deps=[evaluation_key(t.name) for t in targets],
        kinds={"python", "markdown", "html"},
        description="results.json, report.md/.html and plots over every evaluated task (data/reports/).",
    )
    def evaluation_report(context: dg.AssetExecutionContext, settings: ConTEBSettings) -> dg.MaterializeResult:
        from evaluation.reports.publish import dagster_markdown_overall, reading_markdown, write_reports
        from evaluation.run_files import load_evaluation

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


def build_evaluation_assets(
    config: ProjectConfig, data_dir: Path
) -> tuple[list[dg.AssetsDefinition], list[dg.AssetChecksDefinition]]:
    """One evaluation asset (and its trec_eval check) per target of the ``evaluation:`` block, and the overall
    report."""
    targets = evaluation_targets(config.tasks, config.evaluation, data_dir)
    if not targets:
        return [], []
    assets = [*(_task_asset(config, target) for target in targets), _report_asset(config, targets)]
    return assets, [_trec_eval_check(target) for target in targets]
