"""evaluation.experiment: the controlled experiment's systems, comparisons, training settings and test sources."""

from __future__ import annotations

from pathlib import Path

from embedding.windows import DEFAULT_WINDOW_OVERLAP_CHUNKS
from evaluation.comparisons import comparison_plan
from evaluation.config import EvaluationConfig
from evaluation.experiment import (
    experiment_evaluation,
    experiment_systems,
    model_folder,
    training_settings,
)


def test_systems_untrained_baselines_and_trained_folders(tmp_path: Path) -> None:
    systems = {s.name: s for s in experiment_systems(tmp_path, "offline-minilm", anchor_share=0.3, query_prefix="")}
    assert list(systems) == [
        "bm25", "bm25-title", "independent", "title-prefix", "late-chunking", "late-chunking-anchored",
        "late-chunking-title", "late-chunking-anchored-title", "hybrid", "hybrid-title",
        "insent", "insent-anchored", "insent-anchored-title", "finetune-control", "fused-insent",
        "fused-insent-anchored", "fused-insent-anchored-title",
    ]  # fmt: skip
    fused = systems["fused-insent-anchored"]
    assert fused.kind == "fusion" and fused.systems == ("bm25-title", "insent-anchored") and fused.fitted
    assert systems["hybrid"].systems == ("bm25", "independent") and systems["bm25-title"].context == "title"
    assert systems["hybrid-title"].systems == ("bm25-title", "title-prefix")
    header = systems["late-chunking-anchored-title"]
    assert header.header == "title" and header.window_policy == "anchored" and header.anchor_share == 0.3
    assert systems["late-chunking-title"].header == "title" and systems["late-chunking-title"].model == "offline-minilm"
    assert systems["late-chunking-anchored"].window_policy == "anchored"
    assert systems["late-chunking-anchored"].anchor_share == 0.3
    assert systems["late-chunking"].window_policy == "plain" and systems["late-chunking"].model == "offline-minilm"
    assert systems["insent"].model == str(tmp_path / "insent-plain") and systems["insent"].context == "late"
    assert systems["insent-anchored"].window_policy == "anchored" and systems["insent-anchored"].anchor_share == 0.3
    titled = systems["insent-anchored-title"]  # trained with the header, evaluated with it (the folder's own name)
    assert (titled.header, titled.window_policy, titled.anchor_share) == ("title", "anchored", 0.3)
    assert titled.role == "tested"
    assert titled.model == str(model_folder(tmp_path, "insent-anchored-title")) != systems["insent-anchored"].model
    assert systems["finetune-control"].context == "independent"
    assert systems["finetune-control"].model == str(model_folder(tmp_path, "finetune-control"))
    assert all(getattr(s, "query_prefix", "") == "" for s in systems.values())
    with_contexts = experiment_systems(tmp_path, "offline-minilm", anchor_share=0.4, contextual=True)
    assert with_contexts[-1].name == "contextual"
    assert {type(s.name) for s in with_contexts} == {str}  # plain strings, not SystemName members
    config = experiment_evaluation(EvaluationConfig(), with_contexts, (1000, 300))
    names = [n for pair in config.significance.comparisons for n in pair] + list(config.chunk_sizes.systems)
    # every system is a candidate of the choice on validation, but the fine-tuned control
    assert "finetune-control" not in config.select
    assert {"fused-insent", "contextual", "bm25-title"} <= set(config.select)
    names += [*config.select, *(n for s in config.systems if s.kind == "fusion" for n in s.systems)]
    assert {type(n) for n in names} == {str}
    # The trained models are read from folders (model:), which the comparison rule cannot tell from an untrained
    # model: they are declared tested, so the control never counts as a cheap baseline.
    plan = comparison_plan(config)
    assert plan.baselines == ("bm25", "bm25-title", "independent", "title-prefix", "hybrid", "hybrid-title")
    assert {"insent", "insent-anchored", "finetune-control", "contextual", "late-chunking-title"} <= set(plan.tested)


def test_evaluation_config_keeps_statistics_and_sets_comparisons(tmp_path: Path) -> None:
    base = EvaluationConfig(bootstrap={"resamples": 300})
    systems = experiment_systems(tmp_path, "offline-minilm", anchor_share=0.4)
    config = experiment_evaluation(base, systems, (1000, 300))
    assert config.bootstrap.resamples == 300
    assert ("insent", "finetune-control") in config.significance.comparisons
    assert ("contextual", "independent") not in config.significance.comparisons  # not in the system set
    assert config.chunk_sizes.sizes == (1000, 300) and "insent-anchored" in config.chunk_sizes.systems
    assert {"bm25", "bm25-title", "hybrid"} <= set(config.chunk_sizes.systems)
    assert ("late-chunking-title", "late-chunking") in config.significance.comparisons
    assert not experiment_evaluation(base, systems, ()).chunk_sizes.enabled


def test_training_settings_per_model(tmp_path: Path) -> None:
    common = {"epochs": 2, "batch_docs": 2}
    args = {"data": [tmp_path / "task"], "base_model": "offline-minilm", "anchor_share": 0.4}
    plain = training_settings(common, output=tmp_path / "a", system="insent", **args)
    anchored = training_settings(common, output=tmp_path / "b", system="insent-anchored", **args)
    control = training_settings(common, output=tmp_path / "c", system="finetune-control", **args)
    titled = training_settings(common, output=tmp_path / "d", system="insent-anchored-title", **args)
    assert (titled["context"], titled["window_policy"], titled["header"], titled["anchor_share"]) == (
        "late", "anchored", "title", 0.4
    )  # fmt: skip
    assert plain["header"] is None and anchored["header"] is None and control["header"] is None
    assert plain["context"] == "late" and plain["window_policy"] == "plain" and "anchor_share" not in plain
    assert anchored["window_policy"] == "anchored" and anchored["anchor_share"] == 0.4
    assert control["context"] == "independent"
    assert {plain["split"], anchored["split"], control["split"]} == {"train"}
    assert (
        plain["data"] == [str(tmp_path / "task")] and plain["epochs"] == 2 and common == {"epochs": 2, "batch_docs": 2}
    )


def test_window_overlap_reaches_every_late_system_and_the_training(tmp_path: Path) -> None:
    systems = {
        s.name: s for s in experiment_systems(tmp_path, "offline-minilm", anchor_share=0.4, window_overlap_chunks=0)
    }
    late = [name for name, s in systems.items() if getattr(s, "context", None) == "late"]
    assert late == [
        "late-chunking", "late-chunking-anchored", "late-chunking-title", "late-chunking-anchored-title",
        "insent", "insent-anchored", "insent-anchored-title",
    ]  # fmt: skip
    assert all(systems[name].window_overlap_chunks == 0 for name in late)
    default = {s.name: s for s in experiment_systems(tmp_path, "offline-minilm", anchor_share=0.4)}
    assert default["late-chunking"].window_overlap_chunks == DEFAULT_WINDOW_OVERLAP_CHUNKS
    args = {"data": [tmp_path / "task"], "base_model": "offline-minilm", "anchor_share": 0.4}
    settings = training_settings({}, output=tmp_path / "a", system="insent", window_overlap_chunks=0, **args)
    assert settings["window_overlap_chunks"] == 0
    assert "window_overlap_chunks" not in training_settings({}, output=tmp_path / "b", system="insent", **args)
