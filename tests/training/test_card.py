"""The model card and ``training_data.json``: which documents a trained model saw, per task and split."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conteb.content import RULE_SETTINGS
from embedding.model_folder import TRAINING_DATA_FILE, TRAINING_DATA_FORMAT, read_training_data
from embedding.models import offline_minilm_path
from tests.conftest import published_table
from tests.support.tiny_models import tiny_modernbert
from tests.training.test_data import build_sample_conteb
from training.card import render_model_card, write_model_card
from training.config import make_config
from training.data import DataStats
from training.loop import train
from training.result import TrainResult


def _result(tmp_path: Path, training_data: list[dict]) -> TrainResult:
    stats = DataStats(splits={str(tmp_path / "sample"): "train"}, warnings=["sample: something to know"])
    return TrainResult(
        steps=0,
        final_loss=None,
        validation={},
        validation_before={},
        wall_s=0.0,
        device="cpu",
        model_path=tmp_path / "model",
        stats=stats,
        training_data=training_data,
    )


def test_card_and_training_data_file(tmp_path: Path) -> None:
    folder = build_sample_conteb(tmp_path / "sample", splits={"train": 0.5, "test": 0.5})
    config = make_config({"data": [folder], "output": tmp_path / "model"})
    seen = [{"folder": str(folder), "task": "sample", "split": "train", "doc_ids": ["b", "a"]}]
    (tmp_path / "model").mkdir()
    write_model_card(tmp_path / "model", config, _result(tmp_path, seen))
    text = (tmp_path / "model" / "README.md").read_text()
    assert f"- `{folder}` (split `train`)" in text
    assert "| sample | train | 2 |" in text and TRAINING_DATA_FILE in text
    assert "**Warning**: sample: something to know" in text
    data = json.loads((tmp_path / "model" / TRAINING_DATA_FILE).read_text())
    assert data == {"format": TRAINING_DATA_FORMAT, "content": RULE_SETTINGS, "tasks": seen}  # versioned
    assert read_training_data(tmp_path / "model") == seen
    assert read_training_data(tmp_path) is None  # no file: nothing recorded
    assert "Not recorded." in render_model_card(config, _result(tmp_path, []))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"docs": []}', "expected {'tasks'"),
        ('{"tasks": [{"task": 3}]}', "tasks\\[0\\]"),
    ],
)
def test_a_malformed_training_data_file_is_named(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / TRAINING_DATA_FILE).write_text(content)
    with pytest.raises(ValueError, match=rf"{TRAINING_DATA_FILE}: .*{message}"):
        read_training_data(tmp_path)


def test_a_trained_model_records_the_train_documents_it_saw(tmp_path: Path) -> None:
    folder = build_sample_conteb(tmp_path / "sample", splits={"train": 0.5, "test": 0.5})
    base = tmp_path / "tiny"
    tiny_modernbert(offline_minilm_path(), seed=0, device="cpu").save(str(base))
    config = make_config(
        {
            "data": [folder],
            "base_model": str(base),
            "output": tmp_path / "model",
            "max_steps": 1,
            "eval_every": 0,
            "checkpoint_every": 0,
            "validation_fraction": 0.2,
            "device": "cpu",
        }
    )
    result = train(config)
    train_docs = sorted(set(published_table(folder, "documents", "train")["doc_id"].to_pylist()))
    [entry] = result.training_data
    assert {key: entry[key] for key in ("folder", "task", "split", "doc_ids")} == {
        "folder": str(folder),
        "task": "sample",
        "split": "train",
        "doc_ids": train_docs,
    }
    assert [document["doc_id"] for document in entry["documents"]] == train_docs  # with their content prints
    assert result.stats.validation_documents > 0  # validation documents are recorded too: they are in train_docs
    recorded = read_training_data(tmp_path / "model")
    assert recorded == result.training_data
    test_docs = set(published_table(folder, "documents", "test")["doc_id"].to_pylist())
    assert test_docs.isdisjoint(recorded[0]["doc_ids"])


def test_the_card_says_what_was_trained_and_counts_pseudo_queries(tmp_path: Path) -> None:
    folder = build_sample_conteb(tmp_path / "sample", splits={"train": 0.5, "test": 0.5})
    result = _result(tmp_path, [])
    result.stats.pseudo_queries = 7
    anchored = render_model_card(
        make_config({"data": [folder], "output": tmp_path / "m", "window_policy": "anchored"}), result
    )
    assert "# InSeNT contextual embedder (late chunking, anchored windows) fine-tuned from" in anchored
    assert "| pseudo-queries (offline inverse cloze, pairing `pseudo`) | 7 |" in anchored
    control = render_model_card(
        make_config({"data": [folder], "output": tmp_path / "m", "context": "independent"}), result
    )
    assert '# The "+Training" control (each chunk encoded alone) fine-tuned from' in control
    assert "by late chunking" not in control and "Encode each chunk alone" in control
