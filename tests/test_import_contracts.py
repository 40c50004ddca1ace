"""The layering contracts of pyproject.toml ([tool.importlinter]) hold, and a deliberate bad import breaks them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    "conteb",
    "embedding",
    "curation",
    "llm",
    "review",
    "training",
    "evaluation",
    "project",
    "assets",
    "pipelines",
    "cli",
)
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(
    not LINT_IMPORTS.exists(), reason="import-linter is not installed (pip install -e .[dev])"
)


def _lint(project: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(project)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=project, env=env, capture_output=True, text=True, timeout=300
    )


def _copy(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    for package in PACKAGES:
        shutil.copytree(ROOT / package, project / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", project / "pyproject.toml")
    return project


def test_the_project_keeps_its_contracts(tmp_path: Path) -> None:
    result = _lint(_copy(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        ("curation/chunking.py", "import dagster  # deliberate", "import no Dagster"),
        ("training/losses.py", "import assets.keys  # deliberate", "CLI on top"),
        ("conteb/ids.py", "import curation.chunking  # deliberate", "CLI on top"),
        # embedding is a layer below the domain packages that share it
        ("embedding/windows.py", "import training.losses  # deliberate", "CLI on top"),
        # the core's one allowed import of a domain package is the package module's (conteb.mteb_model), no other
        ("conteb/ids.py", "def _late():\n    import evaluation.mteb_model  # deliberate", "CLI on top"),
        ("evaluation/metrics/retrieval.py", "import project.config  # deliberate", "CLI on top"),
        ("pipelines/jobs.py", "import cli.main  # deliberate", "CLI on top"),
        # a function-level import that closes a cycle between two modules of one package
        ("conteb/config.py", "def _late():\n    import conteb.reproduce  # deliberate", "No import cycles"),
        # the cycle of issue 26: the package module imports a module that imports from the package
        (
            "curation/sources/controlled/__init__.py",
            "from curation.sources.controlled.catalog import BY_NAME  # deliberate",
            "curation.sources.controlled imports none of its own modules BROKEN",
        ),
        (
            "curation/themes/__init__.py",
            "def _late():\n    import curation.themes.stage  # deliberate",
            "curation.themes imports none of its own modules BROKEN",
        ),
    ],
)
def test_a_bad_import_breaks_a_contract(tmp_path: Path, module: str, line: str, broken: str) -> None:
    project = _copy(tmp_path)
    path = project / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    result = _lint(project)
    assert result.returncode != 0
    report = " ".join(result.stdout.split())  # lint-imports wraps long contract names
    assert broken in report and "BROKEN" in report
