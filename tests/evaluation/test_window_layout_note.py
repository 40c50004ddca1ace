"""evaluation.systems.embedders.window_layout_note: a trained model evaluated with other windows than it trained with
is said so (the layout stays the system's own)."""

from pathlib import Path

import pytest

from evaluation.systems.embedders import window_layout_note


def _yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "insent_model.train.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("trained", "policy", "overlap", "expected"),
    [
        ("context: late\nwindow_policy: anchored\nwindow_overlap_chunks: 0\n", "anchored", 0, None),
        ("context: late\nwindow_policy: anchored\n", "plain", 0, "trained with anchored windows, evaluated with plain"),
        ("context: late\nwindow_overlap_chunks: 2\n", "plain", 0, "trained with a 2-chunk overlap, evaluated with 0"),
        ("context: independent\nwindow_policy: plain\n", "anchored", 0, None),  # the control: no windows trained
    ],
)
def test_the_note_names_each_difference(
    tmp_path: Path, trained: str, policy: str, overlap: int, expected: str | None
) -> None:
    assert window_layout_note(_yaml(tmp_path, trained), policy, overlap) == expected


def test_no_training_yaml_no_note(tmp_path: Path) -> None:
    assert window_layout_note(None, "plain", 0) is None
    assert window_layout_note(tmp_path / "missing.train.yaml", "plain", 0) is None
    assert window_layout_note(_yaml(tmp_path, ": not yaml ["), "plain", 0) is None
