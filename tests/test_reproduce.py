"""`reproduce_conteb`: the paper's controlled experiment end to end on the sample, with a tiny model.

Curation with document splits and the offline mask (accepted without a person: `auto_accept_methods`), three
models trained through Dagster Pipes on the train split only, every baseline and the trained models evaluated on
the test split with the chunk-size study, and the paper comparison written and shown in Dagster.
"""

import json
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq

from pipelines.definitions import build_definitions
from project.config import load_config
from tests.conftest import SAMPLE_DIR
from tests.support.tiny_models import tiny_modernbert


def _registry(tmp_path: Path, base: Path) -> Path:
    config = tmp_path / "conteb.yaml"
    config.write_text(
        "tasks: []\n"
        "evaluation: {bootstrap: {resamples: 200}, significance: {resamples: 200}, scaling: {points: 2, repeats: 1}}\n"
        "reproduce:\n"
        f"  source: {SAMPLE_DIR}\n"
        "  splits: {train: 0.5, test: 0.5, seed: 0}\n"
        "  profiles:\n"
        f"    cpu: {{base_model: {base}, training: {{max_steps: 1, batch_docs: 2, eval_every: 0, checkpoint_every: 0}},"
        " chunk_sizes: [1000, 300]}\n"
    )
    return config


def test_reproduce_job_end_to_end(tmp_path: Path, isolated_env: Path) -> None:
    base = tmp_path / "tiny-base"
    tiny_modernbert().save(str(base))
    config = load_config(_registry(tmp_path, base))
    defs = build_definitions(config)
    job = defs.resolve_job_def("reproduce_conteb")
    keys = {k.to_user_string() for k in job.asset_layer.selected_asset_keys}
    assert {"reproduce/insent_plain", "reproduce/insent_anchored", "reproduce/finetune_control"} <= keys
    assert {"reproduce/evaluation", "reproduce/paper_comparison", "reproduce/conteb_dataset"} <= keys
    assert not any(
        k.path[0] == "reproduce" for k in defs.resolve_job_def("build_conteb").asset_layer.selected_asset_keys
    )

    instance = dg.DagsterInstance.ephemeral()
    result = job.execute_in_process(instance=instance)
    assert result.success

    dataset = isolated_env / "conteb" / "reproduce"
    train = set(pq.read_table(dataset / "documents" / "train-00000-of-00001.parquet").column("doc_id").to_pylist())
    test = set(pq.read_table(dataset / "documents" / "test-00000-of-00001.parquet").column("doc_id").to_pylist())
    assert train and test and not train & test

    # Each model saw training documents only; its anchored/plain window policy is in its training YAML.
    models = isolated_env / "models" / "reproduce"
    for folder, policy, context in (
        ("insent-plain", "plain", "late"),
        ("insent-anchored", "anchored", "late"),
        ("finetune-control", "plain", "independent"),
    ):
        seen = json.loads((models / folder / "training_data.json").read_text())
        doc_ids = {doc for entry in seen["tasks"] for doc in entry["doc_ids"]}
        assert doc_ids and doc_ids <= train
        settings = (models / f"{folder}.train.yaml").read_text()
        assert f"window_policy: {policy}" in settings and f"context: {context}" in settings

    evaluation = instance.get_latest_materialization_event(dg.AssetKey(["reproduce", "evaluation"]))
    metadata = {k: v.value for k, v in evaluation.asset_materialization.metadata.items()}
    assert metadata["split"] == "test"
    for system in ("bm25", "independent", "title-prefix", "late-chunking", "late-chunking-anchored",
                   "insent", "insent-anchored", "finetune-control"):  # fmt: skip
        assert 0.0 <= metadata[f"ndcg@10/{system}"] <= 1.0, system

    reports = isolated_env / "reports" / "reproduce"
    comparison = json.loads((reports / "comparison.json").read_text())
    assert comparison["split"] == "test" and comparison["subsets"]["all"] == metadata["queries"]
    effects = {(e["effect"], e["subset"]): e for e in comparison["effects"]}
    assert effects[("insent", "all")]["verdict"] in {"reproduces", "opposite", "inconclusive"}
    task_evaluation = json.loads((isolated_env / "reports" / "tasks" / "reproduce" / "evaluation.json").read_text())
    assert {point["chunk_size"] for point in task_evaluation["chunk_sizes"]} == {1000, 300}
    report = (reports / "report.md").read_text()
    assert report.startswith("# The paper's controlled experiment") and "What reproduces here" in report
    assert "the paper reports +9.0" in report and "Scaled down for a 2-core CPU" in report
    assert (reports / "report.html").is_file() and (reports / "effects.png").stat().st_size > 1000
    shown = instance.get_latest_materialization_event(dg.AssetKey(["reproduce", "paper_comparison"]))
    shown_metadata = shown.asset_materialization.metadata
    assert "verdict/late_chunking/all" in shown_metadata and "What reproduces here" in shown_metadata["report"].value
