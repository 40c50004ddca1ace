"""Training from Dagster: `insent_model` and its no-context control run through Dagster Pipes
(a real subprocess), stream logs, and report steps, loss, scores, device, path and a plot."""

import warnings
from pathlib import Path

import dagster as dg
import pytest
import yaml
from sentence_transformers import SentenceTransformer

from assets.models import training_config
from conteb.names import TrainedModel
from conteb.storage import reports_dir
from evaluation.results import from_json
from evaluation.run_files import evaluation_path
from pipelines.definitions import build_definitions
from project.config import load_config
from tests.conftest import SAMPLE_DIR
from tests.support.tiny_models import tiny_modernbert
from tests.training.test_supervision import held_elsewhere
from training.supervision import in_use_message


def test_train_insent_job_trains_both_models_through_pipes(
    tmp_path: Path, isolated_env: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "tiny-base"
    tiny_modernbert().save(str(base))
    config_path = tmp_path / "conteb.yaml"
    config_path.write_text(
        f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n"
        "    splits: {train: 0.5, test: 0.5, seed: 0}\n"
        "training:\n  tasks: [demo]\n  control: true\n"
        f"  settings: {{base_model: {base}, max_steps: 2, batch_docs: 2, eval_every: 2, checkpoint_every: 2,\n"
        "              window_policy: anchored, header: title}\n"
        "evaluation:\n  systems:\n"
        "    - {name: insent, kind: dense, trained: insent_model, context: late}\n"
        "    - {name: finetune-control, kind: dense, trained: finetune_control_model, context: independent}\n"
        "  chunk_sizes: {enabled: false, systems: []}\n"
    )
    defs = build_definitions(load_config(config_path))
    instance = dg.DagsterInstance.ephemeral()
    assert defs.resolve_job_def("build_conteb").execute_in_process(instance=instance).success
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = defs.resolve_job_def("train_insent").execute_in_process(instance=instance)
    assert result.success
    # the terminal says only what matters: no Dagster Pipes PreviewWarning, no transformers "Writing model shards" bar
    assert not [w for w in caught if issubclass(w.category, dg.PreviewWarning)], [str(w.message) for w in caught]
    printed = capfd.readouterr()
    assert "Writing model shards" not in printed.err + printed.out

    for name, context in (("insent_model", "late"), ("finetune_control_model", "independent")):
        event = instance.get_latest_materialization_event(dg.AssetKey([name]))
        metadata = {k: v.value for k, v in event.asset_materialization.metadata.items()}
        assert metadata["steps"] == 2 and metadata["device"] == "cpu"
        assert metadata["final_loss"] > 0
        assert "validation/ndcg10_in_document" in metadata
        assert metadata["loss_curve"].startswith("![loss curve](data:image/png;base64,")
        model_path = Path(metadata["model_path"])
        assert model_path == isolated_env / "models" / name
        assert SentenceTransformer(str(model_path), device="cpu").encode(["a query"]).shape[1] == 64
        recorded = yaml.safe_load((isolated_env / "models" / f"{name}.train.yaml").read_text())
        assert (recorded["context"], recorded["window_policy"], recorded["header"]) == (context, "anchored", "title")
    logs = "\n".join(e.message for e in instance.all_logs(result.run_id) if e.message)
    assert "step step=1" in logs  # the child's progress reached the Dagster run log

    # The trained folders are what the evaluation's `trained:` systems load (lineage: models -> evaluation).
    asset = defs.resolve_asset_graph().get(dg.AssetKey(["demo", "evaluation"]))
    assert {dg.AssetKey("insent_model"), dg.AssetKey("finetune_control_model")} <= set(asset.parent_keys)
    assert defs.resolve_job_def("evaluate_conteb").execute_in_process(instance=instance).success
    event = instance.get_latest_materialization_event(dg.AssetKey(["demo", "evaluation"]))
    metadata = event.asset_materialization.metadata
    assert 0.0 <= metadata["ndcg@10/insent"].value <= 1.0
    assert 0.0 <= metadata["ndcg@10/finetune-control"].value <= 1.0
    assert "p_value/insent_vs_finetune-control" in metadata
    # evaluated as trained (the systems set neither windows nor header): anchored windows under the title header; the
    # control reads each chunk alone under its title
    runs = {run.system: run for run in from_json(evaluation_path(reports_dir(isolated_env), "demo").read_text()).runs}
    insent, control = runs["insent"].details, runs["finetune-control"].details
    assert (insent["window_policy"], insent["header"], insent["context"]) == ("anchored", "title", "late")
    assert control["context"] == "title" and "window_layout_note" not in insent | control


def test_every_training_yaml_records_the_window_policy_and_header(tmp_path: Path) -> None:
    config_path = tmp_path / "conteb.yaml"
    config_path.write_text(
        f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n"
        "training:\n  tasks: [demo]\n  settings: {epochs: 1}\n"
    )
    values = training_config(load_config(config_path), tmp_path, TrainedModel.INSENT)
    assert (values["window_policy"], values["header"], values["epochs"]) == ("plain", None, 1)


def test_a_model_folder_in_use_fails_the_asset_in_one_line(tmp_path: Path, isolated_env: Path) -> None:
    """``make train`` beside a live training of the same model: the asset fails at once with the one line naming
    the folder and the pid holding it, before it writes the training YAML or launches anything."""
    config_path = tmp_path / "conteb.yaml"
    config_path.write_text(
        f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n"
        "training:\n  tasks: [demo]\n  control: false\n  settings: {base_model: unused, max_steps: 1}\n"
    )
    output = isolated_env / "models" / "insent_model"
    with held_elsewhere(output) as holder:
        result = (
            build_definitions(load_config(config_path))
            .resolve_job_def("train_insent")
            .execute_in_process(instance=dg.DagsterInstance.ephemeral(), raise_on_error=False)
        )
    assert not result.success
    (failure,) = [event for event in result.all_events if event.is_step_failure]
    assert failure.step_failure_data.error.message.strip().endswith(in_use_message(output, str(holder.pid)))
    assert not (isolated_env / "models" / "insent_model.train.yaml").exists()
