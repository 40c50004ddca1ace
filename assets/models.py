"""Training assets: ``insent_model`` (late chunking + InSeNT) and ``finetune_control_model``
(the paper's "+Training" control: the same data, chunks encoded without context), launched
through Dagster Pipes so training runs in its own process (or pod) and streams logs back.

Locally the launcher is ``PipesSubprocessClient`` running ``python -m pipelines.pipes_train``;
on a cluster swap the resource for ``PipesK8sClient`` with a GPU pod spec (see the README).
"""

import sys
from pathlib import Path

import dagster as dg
import yaml

from assets.keys import CONTEB_DATASET
from conteb.config import ProjectConfig
from conteb.storage import atomic_path, dataset_dir, models_dir
from pipelines.resources import ConTEBSettings

VARIANTS = {
    "insent_model": {
        "context": "late",
        "description": "Late chunking + InSeNT loss (in-sequence and in-batch negatives).",
    },
    "finetune_control_model": {
        "context": "independent",
        "description": "Control: the same base model and data, each chunk encoded alone (no context).",
    },
}


def training_config(config: ProjectConfig, data_path: Path, name: str) -> dict:
    """The YAML handed to ``python -m training`` for model ``name`` (see training/config.py)."""
    settings = dict(config.training.settings)
    settings.update(
        data=[str(dataset_dir(data_path, task)) for task in config.training.tasks],
        output=str(models_dir(data_path) / name),
        context=VARIANTS[name]["context"],
    )
    return settings


def build_model_assets(config: ProjectConfig) -> list[dg.AssetsDefinition]:
    """One asset per trained model (none when ``training.tasks`` is empty)."""
    if not config.training.tasks:
        return []
    names = ["insent_model"] + (["finetune_control_model"] if config.training.control else [])
    deps = [dg.AssetKey([task, CONTEB_DATASET]) for task in config.training.tasks]
    return [_model_asset(config, name, deps) for name in names]


def _model_asset(config: ProjectConfig, name: str, deps: list[dg.AssetKey]) -> dg.AssetsDefinition:
    @dg.asset(
        name=name,
        group_name="training",
        kinds={"pytorch", "sentence_transformers"},
        deps=deps,
        description=VARIANTS[name]["description"],
    )
    def model(
        context: dg.AssetExecutionContext, settings: ConTEBSettings, pipes_subprocess_client: dg.PipesSubprocessClient
    ) -> dg.MaterializeResult:
        run_config = training_config(config, settings.data_path, name)
        config_file = models_dir(settings.data_path) / f"{name}.train.yaml"
        config_file.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(config_file) as tmp:
            tmp.write_text(yaml.safe_dump(run_config, sort_keys=False))
        context.log.info(f"{name}: training on {run_config['data']} -> {run_config['output']}")
        invocation = pipes_subprocess_client.run(
            command=[sys.executable, "-m", "pipelines.pipes_train", "--config", str(config_file)],
            context=context,
            extras={"model": name},
        )
        return invocation.get_materialize_result()

    return model
