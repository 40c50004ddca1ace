"""The one ``Definitions`` of conteb-pipeline.

Reads the task registry (``$CONTEB_CONFIG`` or ``conteb.yaml``) when the code location loads, and
builds one asset per (task, stage) with key prefix = the task, in the group of the stage's family
(``<task>_sources``, ``<task>_queries``, ...: ``conteb.names.stage_group``). A bad registry fails
here, with a message naming the task and the field.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from assets.answerability import build_answerability_asset
from assets.benchmark import build_dataset_asset, build_dataset_checks
from assets.chunks import build_chunks_asset
from assets.contexts import build_contexts_asset
from assets.evaluation import build_evaluation_assets
from assets.models import build_model_assets
from assets.pairs import build_llm_pairs_asset, build_pairs_asset
from assets.pseudo_queries import build_pseudo_queries_asset
from assets.reformulations import build_reformulation_asset
from assets.reproduce import build_reproduce_assets
from assets.resources import ConTEBSettings, LLMResource, ReviewStoreResource, StageTableIOManager
from assets.review import build_queue_asset, build_review_sensor, build_reviewed_asset
from assets.sources import build_source_asset
from assets.synthetic_queries import build_synthetic_queries_asset
from conteb.config import TaskConfig
from conteb.environment import keep_caches_in
from conteb.storage import llm_cache_path, resolve_data_dir, review_store_path
from pipelines.console_logger import console_logger
from pipelines.jobs import build_conteb_job, build_evaluate_job, build_reproduce_job, build_train_job, choose_executor
from pipelines.pipes_messages import WholeLineTempFileMessageReader
from project.config import ExecutionConfig, ProjectConfig, load_config


def task_assets(
    task: TaskConfig, shard_documents: int = ExecutionConfig().shard_documents
) -> tuple[list[dg.AssetsDefinition], list[dg.AssetChecksDefinition]]:
    """Every stage asset of one task (by its settings) and the checks of its published dataset; the LLM stages
    run in shards of ``shard_documents`` documents (``execution.shard_documents``)."""
    assets = [build_source_asset(task), build_chunks_asset(task), build_dataset_asset(task)]
    if task.uses_span_pairing:
        assets.append(build_pairs_asset(task))
    if task.uses_llm_pairing:
        assets.append(build_llm_pairs_asset(task, shard_documents))
    if task.reformulation:
        assets.append(build_reformulation_asset(task, shard_documents))
    if task.synthetic_queries:
        assets.append(build_synthetic_queries_asset(task, shard_documents))
    if task.pseudo_queries:
        assets.append(build_pseudo_queries_asset(task))
    if task.chunk_contexts:
        assets.append(build_contexts_asset(task, shard_documents))
    if task.answerability is not False:
        assets.append(build_answerability_asset(task, shard_documents))
    for kind in task.review_kinds:
        assets += [build_queue_asset(task, kind), build_reviewed_asset(task, kind)]
    return assets, [build_dataset_checks(task)]


def llm_configured(config: ProjectConfig) -> bool:
    """Whether the LLM stages can run: an API key in the environment or an endpoint in the registry."""
    return bool(os.environ.get("OPENAI_API_KEY") or config.llm.base_url or os.environ.get("OPENAI_BASE_URL"))


def build_definitions(config: ProjectConfig) -> dg.Definitions:
    """Assets, checks, job and resources for ``config``."""
    data_dir = str(resolve_data_dir(config.config_dir))
    assets, checks = [], []
    for task in config.tasks:
        task_defs, task_checks = task_assets(task, config.execution.shard_documents)
        assets += task_defs
        checks += task_checks
    # The paper's controlled experiment: its own tasks and groups, outside build_conteb and evaluate_conteb.
    experiment = config.reproduce_tasks(llm_configured(config))
    for _, task in experiment:
        experiment_defs, experiment_checks = task_assets(task, config.execution.shard_documents)
        assets += experiment_defs
        checks += experiment_checks
    assets += build_reproduce_assets(config, experiment)
    assets += build_model_assets(config)
    evaluation_assets, evaluation_checks = build_evaluation_assets(config, Path(data_dir))
    assets += evaluation_assets
    checks += evaluation_checks
    sensor = build_review_sensor(config)
    return dg.Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=[
            build_conteb_job(config),
            *([build_train_job()] if config.training.tasks else []),
            *([build_evaluate_job(config)] if evaluation_assets else []),
            build_reproduce_job([task.dagster_name for _, task in experiment]),
        ],
        sensors=[sensor] if sensor else [],
        loggers={"console": console_logger},  # Dagster's, less the review gate's stack trace
        # Runs launched from the UI ("Materialize all", a selection) get build_conteb's executor choice too.
        executor=choose_executor(config),
        resources={
            "settings": ConTEBSettings(config_path=str(config.config_path), data_dir=data_dir),
            "stage_io_manager": StageTableIOManager(data_dir=data_dir),
            "review": ReviewStoreResource(path=str(review_store_path(Path(data_dir)))),
            "pipes_subprocess_client": dg.PipesSubprocessClient(message_reader=WholeLineTempFileMessageReader()),
            "llm": LLMResource(
                settings_json=config.llm.model_dump_json(),
                # EnvVar: resolved at run time, shown by name (never by value) in the UI.
                api_key=dg.EnvVar("OPENAI_API_KEY") if os.environ.get("OPENAI_API_KEY") else None,
                cache_path=str(llm_cache_path(Path(data_dir))),
            ),
        },
    )


CONFIG = load_config()
"""The registry this code location was built from."""
keep_caches_in(CONFIG.config_dir)
defs = build_definitions(CONFIG)
