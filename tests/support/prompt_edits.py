"""Test code: a real edit of a prompt file (in a copy of the prompts a test controls, never ``llm/prompts/``)."""

from __future__ import annotations

from pathlib import Path


def edit_prompt(folder: Path, name: str) -> None:
    """A real edit: a new version with one more sentence in the system message."""
    path = folder / f"{name}.yaml"
    text = path.read_text(encoding="utf-8")
    version = next(line for line in text.splitlines() if line.startswith("version:"))
    number = int(version.split(":", 1)[1])
    text = text.replace(version, f"version: {number + 1}").replace("system: |\n", "system: |\n  Be brief.\n", 1)
    assert "Be brief." in text
    path.write_text(text, encoding="utf-8")
