"""The paper's controlled experiment as assets (job ``reproduce_conteb``), in the groups ``reproduce_models`` and
``reproduce_results`` beside those of its tasks (``reproduce_sources``, ...).

* ``reproduce/*`` curation assets: the task of ``conteb.yaml``'s ``reproduce:`` block, built by the same factories
  as every registry task (``pipelines/definitions.py``), split by document into train and test;
* group ``reproduce_models``: ``reproduce/insent_plain``, ``reproduce/insent_anchored``,
  ``reproduce/insent_anchored_title`` (anchored windows, each chunk under its title header),
  ``reproduce/finetune_control``: the four models (:class:`conteb.names.ReproduceModel`), trained on the train split
  through Dagster Pipes (:func:`assets.models.pipes_training_asset`);
* group ``reproduce_results``: ``reproduce/evaluation``: every baseline and the trained models on the test split
  (``evaluation/experiment.py``), with the chunk-size study on the test documents only (and the same for each other
  evaluated task);
* ``reproduce/paper_comparison``: the paper's headline effects beside ours (``evaluation/reports/paper.py``), written to
  ``<data>/reports/reproduce/``.
"""

from collections.abc import Sequence
from pathlib import Path

import dagster as dg

from assets.evaluation import run_metadata
from assets.keys import key
from assets.models import pipes_training_asset
from assets.resources import ConTEBSettings
from conteb.config import ControlledSource, TaskConfig
from conteb.names import ReproduceModel, StageTable, SystemName
from conteb.reproduce import EVALUATION_GROUP, MODELS_GROUP, REPRODUCE_TASK, ExperimentTask, ReproduceConfig
from conteb.storage import dataset_dir, models_dir, reports_dir
from evaluation.experiment import model_folder, training_settings
from evaluation.reports.profile import TrainedModel, profile_lines
from evaluation.results import TaskEvaluation
from project.config import ProjectConfig

MODELS = {
    # asset name -> (evaluation system, description)
    ReproduceModel.INSENT_PLAIN: (
        SystemName.INSENT,
        "InSeNT (late chunking, plain windows) trained on the experiment's train split.",
    ),
    ReproduceModel.INSENT_ANCHORED: (
        SystemName.INSENT_ANCHORED,
        "InSeNT with anchored windows, trained on the train split.",
    ),
    ReproduceModel.INSENT_ANCHORED_TITLE: (
        SystemName.INSENT_ANCHORED_TITLE,
        "InSeNT with anchored windows, each chunk under its title header (header: title), trained on the train split.",
    ),
    ReproduceModel.FINETUNE_CONTROL: (
        SystemName.FINETUNE_CONTROL,
        "The +Training control: same data, each chunk encoded alone.",
    ),
}
EVALUATION = "evaluation"
MASK_NOTE = 'no LLM configured: the labelled offline mask, theme mentions replaced by "the subject"'
COMPARISON = "paper_comparison"


def experiment_models_dir(data_path: Path) -> Path:
    """Folder of the experiment's model folders (``<data>/models/reproduce``)."""
    return models_dir(data_path) / REPRODUCE_TASK


def setup_lines(
    block: ReproduceConfig,
    tasks: Sequence[tuple[ExperimentTask, TaskConfig]],
    models: Sequence[TrainedModel],
    evaluations: Sequence[TaskEvaluation],
) -> list[str]:
    """What was run (the models as trained, the tasks as evaluated: :func:`evaluation.reports.profile.profile_lines`)
    and what differs from the paper's setting (shown in the report)."""
    profile = block.settings
    main = tasks[0][1]
    source = main.source.path
    lines = [
        f"Profile `{block.profile}`: source `{source}` "
        f"({'the first ' + str(profile.max_documents) + ' articles' if profile.max_documents else 'every article'}); "
        f"document splits {block.split_fields}, COVID-QA's {block.covidqa_split_fields} (hash of seed and document "
        "id).",
        "Tasks: "
        + "; ".join(
            f"`{task.name}` ({about.about}; "
            + " and ".join(part for part, on in (("trained on", about.trains), ("evaluated", about.evaluates)) if on)
            + (f", first {task.max_documents} documents" if task.max_documents else "")
            + ")"
            for about, task in tasks
        )
        + ".",
        "Context-dependent variant of the SQuAD task: the reformulation stage ("
        + ("the configured LLM" if main.chunk_contexts else MASK_NOTE)
        + ").",
        *profile_lines(models, evaluations, profile.max_documents),
        f"Chunk-size study on the SQuAD test documents: {', '.join(map(str, profile.chunk_sizes)) or 'not run'} "
        "characters.",
    ]
    if block.profile == "cpu":
        lines.append("Set `reproduce: {profile: gpu}` for the paper-sized run.")
    return lines


def trained_models(models_root: Path) -> list[TrainedModel]:
    """The experiment's models as trained: each ``<folder>.train.yaml`` read as training reads it (the training
    defaults filled in; an invalid file raises :class:`training.config.TrainingConfigError` naming it) and the
    documents per task of its ``training_data.json`` (empty when absent); a missing or invalid file fails the asset
    with one line naming it."""
    from embedding.model_folder import read_training_record
    from training.config import TrainingConfigError, config_to_dict, load_training_config

    models = []
    for system, _ in MODELS.values():
        folder = model_folder(models_root, system)
        path = folder.parent / f"{folder.name}.train.yaml"
        try:
            settings = config_to_dict(load_training_config(path))
            record = read_training_record(folder)
        except (OSError, TrainingConfigError, ValueError) as error:
            raise dg.Failure(description=f"{path}: the model's training settings cannot be read: {error}") from None
        documents = {} if record is None else {entry["task"]: len(entry["doc_ids"]) for entry in record.tasks}
        models.append(TrainedModel(system, settings, documents))
    return models


def build_reproduce_assets(
    config: ProjectConfig, tasks: Sequence[tuple[ExperimentTask, TaskConfig]]
) -> list[dg.AssetsDefinition]:
    """The experiment's models (trained on every training task), one evaluation per evaluated task and the comparison
    (the tasks' curation assets come from the task factories; the SQuAD task is first)."""
    block = config.reproduce
    main = tasks[0][1]
    training = [task for about, task in tasks if about.trains]
    evaluated = [task for about, task in tasks if about.evaluates]
    datasets = [dg.AssetKey([task.name, StageTable.CONTEB_DATASET]) for task in training]
    nproc = config.training.nproc_per_node  # the training block's launch setting serves the experiment's models too
    assets = [_model_asset(block, main, name, training, datasets, nproc) for name in MODELS]
    assets += [_evaluation_asset(config, main, task, chunk_sizes=task is main) for task in evaluated]
    assets.append(_comparison_asset(block, tasks))
    return assets


def _model_asset(
    block: ReproduceConfig,
    main: TaskConfig,
    name: str,
    training: Sequence[TaskConfig],
    datasets: list[dg.AssetKey],
    nproc_per_node: int = 1,
) -> dg.AssetsDefinition:
    system, description = MODELS[name]
    profile = block.settings

    def run_config(data_path: Path) -> dict:
        return training_settings(
            profile.training,
            data=[dataset_dir(data_path, task.name) for task in training],
            output=model_folder(experiment_models_dir(data_path), system),
            base_model=profile.base_model,
            system=system,
            anchor_share=block.window_share,
            window_overlap_chunks=profile.window_overlap_chunks,
        )

    key = dg.AssetKey([main.name, str(name)])
    return pipes_training_asset(key, MODELS_GROUP, datasets, description, run_config, nproc_per_node)


def _evaluation_asset(
    config: ProjectConfig, main: TaskConfig, task: TaskConfig, *, chunk_sizes: bool
) -> dg.AssetsDefinition:
    deps = [key(task, StageTable.CONTEB_DATASET), *(dg.AssetKey([main.name, str(name)]) for name in MODELS)]
    if task.chunk_contexts:
        deps.append(key(task, StageTable.CHUNK_CONTEXTS))

    @dg.asset(
        key=dg.AssetKey([task.name, EVALUATION]),
        group_name=EVALUATION_GROUP,
        deps=deps,
        kinds={"python", "numpy"},
        description="Every baseline and the experiment's trained models on the test split, on all queries and "
        "on the needs_context subset; chunk-size study on the test documents.",
    )
    def experiment_evaluation(context: dg.AssetExecutionContext, settings: ConTEBSettings) -> dg.MaterializeResult:
        from evaluation.experiment import experiment_evaluation as evaluation_config
        from evaluation.experiment import experiment_systems
        from evaluation.load import CorpusError
        from evaluation.reports.publish import dagster_markdown_task
        from evaluation.targets import EvalTarget, evaluate_and_report, load_target

        block, data = config.reproduce, settings.data_path
        profile = block.settings
        # The test split's documents only, also for the chunk-size study (split_by_document).
        target = EvalTarget(
            name=task.name,
            path=str(dataset_dir(data, task.name)),
            split=task.evaluation_split,
            data_dir=data,
            split_by_document=True,
            chunk_contexts=task.chunk_contexts,
            validation_split=task.validation_split,
        )
        systems = experiment_systems(
            experiment_models_dir(data),
            profile.base_model,
            anchor_share=block.window_share,
            window_overlap_chunks=profile.window_overlap_chunks,
            query_prefix=profile.query_prefix,
            document_prefix=profile.document_prefix,
            device=profile.device,
            contextual=task.chunk_contexts,
        )
        evaluation_settings = evaluation_config(config.evaluation, systems, profile.chunk_sizes if chunk_sizes else ())
        try:
            loaded = load_target(target, evaluation_settings)
        except CorpusError as error:
            raise dg.Failure(description=f"{task.name}: {error}") from error
        reported = evaluate_and_report(loaded, evaluation_settings, data, log=context.log.info)
        evaluation, paths = reported.evaluation, reported.paths
        metadata: dict[str, object] = {
            "split": target.split,
            **run_metadata(evaluation),
            "report": dg.MetadataValue.md(dagster_markdown_task(evaluation)),
            **{f"path/{name}": dg.MetadataValue.path(str(path)) for name, path in paths.items()},
        }
        failed = [run for run in evaluation.runs if run.status == "failed"]
        if failed:
            raise dg.Failure(description="; ".join(f"{r.system}: {r.reason}" for r in failed), metadata=metadata)
        return dg.MaterializeResult(metadata=metadata)

    return experiment_evaluation


def titles_declared(task: TaskConfig) -> bool | None:
    """Whether ``task``'s source declares that its titles name its subject: a controlled source says so
    (``titles``); every other source says nothing (None: the report measures it)."""
    source = task.source
    return source.titles == "informative" if isinstance(source, ControlledSource) else None


def _comparison_asset(
    block: ReproduceConfig, tasks: Sequence[tuple[ExperimentTask, TaskConfig]]
) -> dg.AssetsDefinition:
    main = tasks[0][1]
    evaluated = [task for about, task in tasks if about.evaluates]

    @dg.asset(
        key=dg.AssetKey([main.name, COMPARISON]),
        group_name=EVALUATION_GROUP,
        deps=[dg.AssetKey([task.name, EVALUATION]) for task in evaluated],
        kinds={"python", "markdown", "html"},
        description="The paper's headline effects beside ours, with CIs, paired tests and a verdict per effect, and "
        "the experiment's target on every evaluated task (data/reports/reproduce/).",
    )
    def paper_comparison(context: dg.AssetExecutionContext, settings: ConTEBSettings) -> dg.MaterializeResult:
        from conteb.published import config_shards
        from evaluation.reports.families import ReportInputs, one_family_per_task
        from evaluation.reports.markdown import render_markdown
        from evaluation.reports.pipeline_target import pipeline_target_sentences, verdict_words
        from evaluation.reports.reproduce import (
            build_comparison,
            build_pipeline_targets,
            build_targets,
            reproduce_document,
            write_reproduce_report,
        )
        from evaluation.reports.target import target_sentences
        from evaluation.run_files import load_evaluation

        data = settings.data_path

        def queries_of(task: TaskConfig) -> Path | None:
            files = config_shards(dataset_dir(data, task.name), "queries", task.evaluation_split)
            return files[0] if files else None

        comparison, evaluation = build_comparison(reports_dir(data), main.name, queries_of(main))
        targets = build_targets(
            reports_dir(data), [(task.name, about.about, queries_of(task)) for about, task in tasks if about.evaluates]
        )
        evaluations = [
            e for about, task in tasks if about.evaluates and (e := load_evaluation(reports_dir(data), task.name))
        ]
        pipeline_targets = build_pipeline_targets(
            reports_dir(data),
            [(task.name, queries_of(task), titles_declared(task)) for about, task in tasks if about.evaluates],
        )
        setup = setup_lines(block, tasks, trained_models(experiment_models_dir(data)), evaluations)
        selections = [(e.task, e.selection) for e in evaluations if e.selection is not None]
        # one Holm family per task: a comparison reads the same wherever the report states it
        stated = one_family_per_task(ReportInputs(evaluation, comparison, targets, pipeline_targets))
        evaluation, comparison = stated.evaluation, stated.comparison
        targets, pipeline_targets = stated.targets, stated.pipeline_targets
        paths = write_reproduce_report(
            comparison, evaluation, reports_dir(data), setup, targets, pipeline_targets, selections
        )
        for line in comparison.summary:
            context.log.info(line)
        for target in targets:
            for line in target_sentences(target):
                context.log.info(line)
        for pipeline in pipeline_targets:
            for line in pipeline_target_sentences(pipeline):
                context.log.info(line)
        document = reproduce_document(comparison, evaluation, setup, {}, targets, pipeline_targets, selections)
        metadata: dict[str, object] = {
            "report": dg.MetadataValue.md(render_markdown(document)),
            **{f"path/{name}": dg.MetadataValue.path(str(path)) for name, path in paths.items()},
        }
        for pipeline in pipeline_targets:
            metadata[f"pipeline_target/{pipeline.task}"] = verdict_words(pipeline)
            metadata[f"recommended/{pipeline.task}"] = pipeline.pipeline or "none"
        for target in targets:
            metadata[f"target/{target.task}"] = {True: "met", False: "missed", None: "not measured"}[target.met]
        for result in comparison.effects:
            metadata[f"verdict/{result.effect}/{result.subset}"] = result.verdict
            if result.points is not None:
                metadata[f"points/{result.effect}/{result.subset}"] = dg.MetadataValue.float(round(result.points, 3))
        return dg.MaterializeResult(metadata=metadata)

    return paper_comparison
