"""TrainingConfig: YAML and CLI round trip; errors name the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from training.config import (
    TrainingConfig,
    TrainingConfigError,
    dump_training_config,
    from_cli,
    load_training_config,
    make_config,
)


def task_folder(root: Path, name: str = "task") -> Path:
    folder = root / name
    (folder / "documents").mkdir(parents=True)
    return folder


def test_defaults_follow_the_paper(tmp_path: Path) -> None:
    config = make_config({"data": [task_folder(tmp_path)], "output": tmp_path / "out"})
    assert (config.lr, config.warmup_ratio, config.epochs, config.batch_docs) == (5e-5, 0.05, 2, 4)
    assert (config.lambda_seq, config.scale, config.mode, config.loss) == (0.1, 20.0, "single", "weighted")
    assert config.base_model == "offline-minilm" and config.max_steps is None
    assert config.bf16 == "auto" and config.gradient_checkpointing == "auto"


def test_yaml_round_trip_and_relative_paths(tmp_path: Path) -> None:
    folder = task_folder(tmp_path)
    (tmp_path / "train.yaml").write_text(
        yaml.safe_dump({"data": ["task"], "output": "out", "lambda_seq": 0.3, "mode": "tokens", "bf16": False})
    )
    config = load_training_config(tmp_path / "train.yaml")
    assert config.data == [folder] and config.output == tmp_path / "out"
    assert (config.lambda_seq, config.mode, config.bf16) == (0.3, "tokens", False)
    again = load_training_config(dump_training_config(config, tmp_path / "dumped.yaml"))
    assert again == config


def test_cli_without_file(tmp_path: Path) -> None:
    a, b = task_folder(tmp_path, "a"), task_folder(tmp_path, "b")
    config = from_cli(
        [
            "--data",
            str(a),
            str(b),
            "--base-model",
            "some/model",
            "--output",
            str(tmp_path / "o"),
            "--epochs",
            "3",
            "--max-steps",
            "7",
            "--lambda-seq",
            "0.5",
            "--batch-docs",
            "2",
            "--mode",
            "tokens",
        ]
    )
    assert config.data == [a, b] and config.base_model == "some/model"
    assert (config.epochs, config.max_steps, config.lambda_seq, config.batch_docs, config.mode) == (
        3,
        7,
        0.5,
        2,
        "tokens",
    )


def test_cli_overrides_file(tmp_path: Path) -> None:
    task_folder(tmp_path)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"data": "task", "output": "out", "epochs": 5, "seed": 4}))
    config = from_cli(["--config", str(tmp_path / "c.yaml"), "--epochs", "1", "--bf16", "true"])
    assert (config.epochs, config.seed, config.bf16) == (1, 4, True)


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"lambda_seq": 1.5}, "lambda_seq"),
        ({"mode": "pairs"}, "mode"),
        ({"batch_docs": 0}, "batch_docs"),
        ({"lr": -1}, "lr"),
        ({"learning_rate": 1e-4}, "learning_rate"),
        ({"data": ["/nonexistent/task"]}, "data"),
    ],
)
def test_errors_name_the_field(tmp_path: Path, values: dict, field: str) -> None:
    raw = {"data": [task_folder(tmp_path)], "output": tmp_path / "out", **values}
    with pytest.raises(TrainingConfigError, match=field):
        make_config(raw)


def test_cli_requires_data_and_output(tmp_path: Path) -> None:
    with pytest.raises(TrainingConfigError, match="--output"):
        from_cli(["--data", str(task_folder(tmp_path))])


def test_yaml_error_names_the_field(tmp_path: Path) -> None:
    task_folder(tmp_path)
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"data": ["task"], "output": "o", "epochs": "many"}))
    with pytest.raises(TrainingConfigError, match="epochs"):
        load_training_config(tmp_path / "bad.yaml")
    assert TrainingConfig.model_fields["epochs"].default == 2


def test_window_policy_loss_average_and_split_options(tmp_path: Path) -> None:
    folder = task_folder(tmp_path)
    base = ["--data", str(folder), "--output", str(tmp_path / "o")]
    config = from_cli([*base, "--window-policy", "anchored", "--loss-average", "document", "--split", "dev"])
    assert (config.window_policy, config.loss_average, config.split) == ("anchored", "document", "dev")
    defaults = from_cli(base)
    assert (defaults.window_policy, defaults.anchor_share, defaults.loss_average) == ("plain", 0.4, "query")
    assert defaults.split == "train"
    with pytest.raises(TrainingConfigError, match="anchor_share"):
        make_config({"data": [folder], "output": tmp_path / "o", "anchor_share": 1.0})
    with pytest.raises(SystemExit):
        from_cli([*base, "--window-policy", "sliding"])


@pytest.mark.parametrize("field", ["lr", "scale", "max_grad_norm", "weight_decay", "warmup_ratio"])
def test_non_finite_numbers_are_refused(tmp_path: Path, field: str) -> None:
    folder = task_folder(tmp_path)
    for value in (float("inf"), float("nan")):
        with pytest.raises(TrainingConfigError, match=f"{field}.*finite number"):
            make_config({"data": [folder], "output": tmp_path / "o", field: value})


def test_the_training_split_follows_the_registrys_split_rule(tmp_path: Path) -> None:
    folder = task_folder(tmp_path)
    with pytest.raises(TrainingConfigError, match="split name 'my-test' must match"):
        make_config({"data": [folder], "output": tmp_path / "o", "split": "my-test"})
    assert make_config({"data": [folder], "output": tmp_path / "o", "split": None}).split is None
