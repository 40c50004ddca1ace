"""A trained model is evaluated by default with the windows and header it was trained with (its training YAML,
``<models>/<trained>.train.yaml``); a system that sets them otherwise keeps its own and says so (the log, the run's
description and its ``window_layout_note``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conteb.names import TrainedModel
from evaluation.config import DenseSystem, LateInteractionSystem
from evaluation.systems.dispatch import prepare_system
from evaluation.systems.embedders import as_trained, window_layout_note
from tests.evaluation.toy import save_tiny_model, toy_corpus

INSENT = DenseSystem(kind="dense", name="insent", trained=TrainedModel.INSENT, context="late")
CONTROL = DenseSystem(kind="dense", name="control", trained=TrainedModel.FINETUNE_CONTROL, context="independent")
TEMPLATE = "Title: {title}\n{chunk}"


def _trained(models: Path, name: str, **settings: object) -> Path:
    path = models / f"{name}.train.yaml"
    path.write_text(yaml.safe_dump({"lr": 5e-5, **settings}))
    return path


def test_unset_layout_and_header_come_from_the_training_yaml(tmp_path: Path) -> None:
    _trained(
        tmp_path, "insent_model", context="late", window_policy="anchored", header="title", title_template=TEMPLATE
    )
    resolved = as_trained(INSENT, tmp_path)
    assert (resolved.window_policy, resolved.header, resolved.title_template) == ("anchored", "title", TEMPLATE)
    explicit = DenseSystem(
        kind="dense", name="insent", trained="insent_model", context="late", window_policy="plain", header=None
    )
    assert as_trained(explicit, tmp_path) == explicit  # what the system sets is kept
    late_interaction = LateInteractionSystem(kind="late_interaction", name="li", trained="insent_model")
    assert as_trained(late_interaction, tmp_path).window_policy == "anchored"


def test_the_control_trained_with_the_header_reads_each_chunk_under_its_title(tmp_path: Path) -> None:
    _trained(tmp_path, "finetune_control_model", context="independent", window_policy="anchored", header="title")
    resolved = as_trained(CONTROL, tmp_path)
    assert resolved.context == "title" and resolved.window_policy == "plain"  # no windows when chunks are alone


@pytest.mark.parametrize(
    "settings",
    [{}, {"context": "late", "window_policy": "plain", "header": None}, {"context": "late"}],
)
def test_a_model_trained_plain_or_without_a_yaml_is_unchanged(tmp_path: Path, settings: dict) -> None:
    if settings:
        _trained(tmp_path, "insent_model", **settings)
    assert as_trained(INSENT, tmp_path) == INSENT
    assert as_trained(DenseSystem(kind="dense", name="x", context="late"), tmp_path).trained is None


def test_the_note_names_a_header_difference(tmp_path: Path) -> None:
    path = _trained(tmp_path, "insent_model", context="late", window_policy="anchored", header="title")
    assert window_layout_note(path, "anchored", 1, "title") is None
    assert window_layout_note(path, "plain", 1, None) == (
        "trained with anchored windows, evaluated with plain; trained with the title header, evaluated without one"
    )
    control = _trained(tmp_path, "control", context="independent")
    assert (
        window_layout_note(control, "plain", 1, "title") == "trained without a header, evaluated with the title header"
    )


def test_evaluation_uses_the_trained_layout_and_notes_an_override(tmp_path: Path) -> None:
    save_tiny_model(tmp_path / "insent_model")
    _trained(tmp_path, "insent_model", context="late", window_policy="anchored", header="title")
    corpus = toy_corpus()
    logged: list[str] = []
    default = prepare_system(INSENT, corpus, tmp_path, log=logged.append)
    assert default.details["window_policy"] == "anchored" and default.details["header"] == "title"
    assert "window_layout_note" not in default.details and "each chunk under its title" in default.description
    assert not any("trained with" in line for line in logged)
    plain = DenseSystem(
        kind="dense", name="insent-plain", trained="insent_model", context="late", window_policy="plain"
    )
    indexed = prepare_system(plain, corpus, tmp_path, log=logged.append)
    note = "trained with anchored windows, evaluated with plain"
    assert indexed.details["window_policy"] == "plain" and indexed.details["window_layout_note"] == note
    assert note in indexed.description and f"insent-plain: {note}" in logged


def test_late_interaction_says_it_reads_a_header_trained_model_without_the_header(tmp_path: Path) -> None:
    save_tiny_model(tmp_path / "insent_model")
    _trained(tmp_path, "insent_model", context="late", window_policy="anchored", header="title")
    logged: list[str] = []
    system = LateInteractionSystem(kind="late_interaction", name="li", trained="insent_model")
    indexed = prepare_system(system, toy_corpus(), tmp_path, log=logged.append)
    note = "trained with the title header, evaluated without one"  # late interaction has no header option
    assert indexed.details["window_policy"] == "anchored" and indexed.details["window_layout_note"] == note
    assert note in indexed.description and f"li: {note}" in logged
