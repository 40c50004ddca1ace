"""YAML nested thousands of levels deep (issue 25): on today's main a registry nested 5,000 levels gave a
``RecursionError`` traceback from ``conteb validate``, ``make run`` and the Dagster code location's load. The one
reader of users' YAML (:func:`conteb.yaml_text.load_yaml`) bounds the nesting; each of them now says, on one line,
which file is nested too deeply; so do training YAML and prompt files."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cli.main import main
from conteb.config import ConfigError
from conteb.yaml_text import MAX_YAML_DEPTH, YAMLNestingError, load_yaml
from llm.prompts import load_prompt
from project.config import load_config
from tests.conftest import ROOT, SAMPLE_DIR
from tests.support.make import user_make_env
from training.config import TrainingConfigError, load_training_config

LEVELS = 5000
DEEP = {
    "flow": "tasks: " + "[" * LEVELS + "]" * LEVELS + "\n",
    "block": "tasks:\n" + "".join("  " * (level + 1) + "a:\n" for level in range(LEVELS)),
}
TOO_DEEP = f"nested too deeply (more than {MAX_YAML_DEPTH} levels"


@pytest.mark.parametrize("style", sorted(DEEP))
def test_load_yaml_refuses_deep_nesting_in_one_line_and_reads_the_rest_as_safe_load(style: str) -> None:
    with pytest.raises(RecursionError):
        yaml.safe_load(DEEP[style])  # what every reader did before
    with pytest.raises(YAMLNestingError) as refused:
        load_yaml(DEEP[style])
    assert isinstance(refused.value, yaml.YAMLError) and "\n" not in str(refused.value)
    assert str(refused.value).startswith(TOO_DEEP) and "line " in str(refused.value)
    just_fits = "[" * (MAX_YAML_DEPTH - 1) + "]" * (MAX_YAML_DEPTH - 1)
    assert load_yaml(f"a: {just_fits}") == yaml.safe_load(f"a: {just_fits}")
    text = "a: [1, {b: x}]\nc: !!str 2\n"
    assert load_yaml(text) == yaml.safe_load(text) and load_yaml("") is None
    with pytest.raises(yaml.constructor.ConstructorError):
        load_yaml("a: !!python/object:os.system x")  # still the safe loader


@pytest.fixture
def deep_registry(tmp_path: Path) -> Path:
    path = tmp_path / "conteb.yaml"
    path.write_text(DEEP["flow"])
    return path


def test_the_registry_loader_says_which_file_is_too_deep(deep_registry: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(deep_registry)
    assert str(refused.value).startswith(f"{deep_registry}: {TOO_DEEP}") and "\n" not in str(refused.value)
    monkeypatch.setenv("CONTEB_CONFIG", str(deep_registry))
    result = CliRunner().invoke(main, ["validate", "--no-sources"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert result.output.splitlines() == [str(refused.value)]


def test_the_code_location_load_says_which_file_is_too_deep(deep_registry: Path, tmp_path: Path) -> None:
    env = {"CONTEB_CONFIG": str(deep_registry), "PATH": str(Path(sys.executable).parent), "DAGSTER_HOME": str(tmp_path)}
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    run = subprocess.run(
        [sys.executable, "-c", "import pipelines.definitions"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert run.returncode != 0
    assert "RecursionError" not in run.stderr and f"{deep_registry}: {TOO_DEEP}" in run.stderr, run.stderr[-2000:]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_stops_at_a_deep_registry_in_one_line(deep_registry: Path, isolated_env: Path) -> None:
    env = user_make_env({"CONTEB_CONFIG": str(deep_registry)})
    run = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", "run"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    output = run.stdout + run.stderr
    assert run.returncode == 2 and "Traceback" not in output, output[-2000:]
    problems = [line for line in run.stderr.splitlines() if not line.startswith("make:")]
    assert len(problems) == 1 and problems[0].startswith(f"{deep_registry}: {TOO_DEEP}"), output[-2000:]


def test_training_yaml_and_prompt_files_too(tmp_path: Path) -> None:
    training = tmp_path / "train.yaml"
    training.write_text(f"data: {SAMPLE_DIR}\nlr: " + "[" * LEVELS + "]" * LEVELS + "\n")
    with pytest.raises(TrainingConfigError) as refused:
        load_training_config(training)
    assert str(training) in str(refused.value) and TOO_DEEP in str(refused.value)
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "deep.yaml").write_text("name: deep\nversion: 1\nsystem: s\nuser: " + "[" * LEVELS + "]" * LEVELS)
    with pytest.raises(ValueError, match=re.escape(f"deep.yaml: not valid YAML: {TOO_DEEP}")):
        load_prompt("deep", prompts)
