"""Training assets (names: :class:`conteb.names.TrainedModel`): ``insent_model`` (late chunking + InSeNT) and
``finetune_control_model``
(the paper's "+Training" control: the same data, chunks encoded without context), launched
through Dagster Pipes so training runs in its own process (or pod) and streams logs back.

Locally the launcher is ``PipesSubprocessClient`` running ``python -m pipelines.pipes_train``;
on a cluster swap the resource for ``PipesK8sClient`` with a GPU pod spec (see the README).
"""

import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import yaml

from assets.resources import ConTEBSettings
from conteb.names import StageTable, TrainedModel
from conteb.storage import atomic_path, dataset_dir, models_dir
from project.config import ProjectConfig
from training.supervision import SUPERVISOR_ENV, folder_holder, in_use_message, supervisor_value

VARIANTS = {
    TrainedModel.INSENT: {
        "context": "late",
        "description": "Late chunking + InSeNT loss (in-sequence and in-batch negatives).",
    },
    TrainedModel.FINETUNE_CONTROL: {
        "context": "independent",
        "description": "Control: the same base model and data, each chunk encoded alone (no context).",
    },
}


def training_config(config: ProjectConfig, data_path: Path, name: str) -> dict:
    """The YAML handed to ``python -m training`` for model ``name`` (see training/config.py). It always records the
    ``window_policy`` and ``header`` (the training defaults where the settings leave them out): evaluation reads them
    to evaluate the model as it was trained (:func:`evaluation.systems.embedders.as_trained`)."""
    settings = {**recorded_defaults(), **config.training.settings}
    settings.update(
        data=[str(dataset_dir(data_path, task)) for task in config.training.tasks],
        output=str(models_dir(data_path) / name),
        context=VARIANTS[name]["context"],
    )
    return settings


def recorded_defaults() -> dict[str, object]:
    """The training defaults every training YAML records (``window_policy``, ``header``), from
    :class:`training.config.TrainingConfig`."""
    from training.config import TrainingConfig

    return {name: TrainingConfig.model_fields[name].default for name in ("window_policy", "header")}


def build_model_assets(config: ProjectConfig) -> list[dg.AssetsDefinition]:
    """One asset per trained model (none when ``training.tasks`` is empty)."""
    if not config.training.tasks:
        return []
    names = [TrainedModel.INSENT] + ([TrainedModel.FINETUNE_CONTROL] if config.training.control else [])
    deps = [dg.AssetKey([task, StageTable.CONTEB_DATASET]) for task in config.training.tasks]
    return [_model_asset(config, name, deps) for name in names]


def _model_asset(config: ProjectConfig, name: str, deps: list[dg.AssetKey]) -> dg.AssetsDefinition:
    return pipes_training_asset(
        key=dg.AssetKey(str(name)),  # a plain string: Dagster refuses enum members in asset keys
        group="training",
        deps=deps,
        description=VARIANTS[name]["description"],
        run_config=lambda data_path: training_config(config, data_path, name),
        nproc_per_node=config.training.nproc_per_node,
    )


def launch_command(config_file: Path, nproc_per_node: int) -> list[str]:
    """The command Pipes runs: ``python -m pipelines.pipes_train``, under ``torchrun`` for more than one process
    (``python -m training.launch``: torchrun, found without relying on PATH, that stops with the Dagster process)."""
    train = ["-m", "pipelines.pipes_train", "--config", str(config_file)]
    if nproc_per_node <= 1:
        return [sys.executable, *train]
    launcher = ["-m", "training.launch", "--standalone", f"--nproc-per-node={nproc_per_node}"]
    return [sys.executable, *launcher, *train]


def pipes_training_asset(
    key: dg.AssetKey,
    group: str,
    deps: list[dg.AssetKey],
    description: str,
    run_config: Callable[[Path], dict],
    nproc_per_node: int = 1,
) -> dg.AssetsDefinition:
    """An asset that trains one model through Dagster Pipes (``python -m pipelines.pipes_train``; under ``torchrun``
    with ``nproc_per_node`` processes above 1, :func:`launch_command`).

    ``run_config(data_path)`` gives the training YAML (``training/config.py`` fields); it is written beside the
    model folder as ``<output>.train.yaml`` (evaluation reads the prefixes from it). A rerun continues the folder's
    unfinished run from its last checkpoint (``pipelines.pipes_train``); a folder another live training holds is
    refused in one line (:mod:`training.supervision`), and the training stops when this process dies.
    """
    model_name = key.path[-1]

    @dg.asset(key=key, group_name=group, kinds={"pytorch", "sentence_transformers"}, deps=deps, description=description)
    def model(
        context: dg.AssetExecutionContext, settings: ConTEBSettings, pipes_subprocess_client: dg.PipesSubprocessClient
    ) -> dg.MaterializeResult:
        values = run_config(settings.data_path)
        output = Path(values["output"])
        holder = folder_holder(output)
        if holder is not None:  # before the training YAML beside it is rewritten
            raise dg.Failure(description=in_use_message(output, holder))
        config_file = output.parent / f"{output.name}.train.yaml"
        config_file.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(config_file) as tmp:
            tmp.write_text(yaml.safe_dump(values, sort_keys=False))
        context.log.info(f"{key.to_user_string()}: training on {values['data']} -> {output}")
        with warnings.catch_warnings():
            # Dagster 1.13's own Pipes session reads PipesMessageReader.expected_writer_count, which it marks as
            # preview: a PreviewWarning on every launch that says nothing about this project (filtered here only)
            warnings.simplefilter("ignore", dg.PreviewWarning)
            invocation = pipes_subprocess_client.run(
                command=launch_command(config_file, nproc_per_node),
                context=context,
                extras={"model": model_name},
                env={SUPERVISOR_ENV: supervisor_value()},  # the parent the training process watches
            )
        return invocation.get_materialize_result()

    return model
