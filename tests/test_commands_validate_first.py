"""Every command validates the registry before it works: ``make evaluate``, ``make reproduce`` and every ``conteb
review ...`` print the registry's problem on one line with a suggestion (exit status 2 from make, 1 from conteb),
never a traceback; review typos (subcommands, ``--task``, ``--kind``) get "did you mean"."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import main
from conteb.config import ConfigError
from conteb.storage import review_store_path
from curation.review_items import review_item, review_items_table
from project.config import load_config
from review.store import ReviewStore
from tests.conftest import ROOT, SAMPLE_DIR
from tests.support.make import user_make_env

GOOD = f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n    reformulation: true\n"

BROKEN = {
    # the code location validated the experiment's tasks, `conteb validate` did not: a 77-line traceback
    "controlled domain": (
        GOOD + "reproduce:\n  controlled: {train_domains: [geografy, sport, things]}\n",
        "reproduce: controlled: source.domains: unknown domain 'geografy' (did you mean 'geography'?); known: "
        "geography, sport, organisations, people, things",
    ),
    "evaluation key": (
        GOOD + "evaluation:\n  chunk_size: {sizes: [1000]}\n",
        "evaluation: unknown key 'chunk_size' (did you mean 'chunk_sizes'?)",
    ),
    "system kind": (
        GOOD + "evaluation:\n  systems: [{name: x, kind: dens}]\n",
        "evaluation.systems[0]: Input tag 'dens' found using 'kind' does not match any of the expected tags: "
        "'bm25', 'dense', 'contextual', 'late_interaction', 'hybrid', 'fusion' (did you mean 'dense'?)",
    ),
    "system context": (
        GOOD + "evaluation:\n  systems: [{name: x, kind: dense, context: lat}]\n",
        "evaluation.systems[0].context: Input should be 'independent', 'late' or 'title' (did you mean 'late'?)",
    ),
    "training setting": (
        GOOD + "training:\n  settings: {epoch: 2}\n",
        "training.settings: unknown key 'epoch' (did you mean 'epochs'?)",
    ),
    "profile training setting": (
        GOOD + "reproduce:\n  profiles: {cpu: {training: {lamda_seq: 0.1}}}\n",
        "reproduce.profiles.cpu.training: unknown key 'lamda_seq' (did you mean 'lambda_seq'?)",
    ),
}


def write(folder: Path, body: str) -> Path:
    path = folder / "conteb.yaml"
    path.write_text(body, encoding="utf-8")
    return path


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_the_registry_loader_reports_each_problem_on_one_line_with_a_suggestion(tmp_path: Path, case: str) -> None:
    body, expected = BROKEN[case]
    with pytest.raises(ConfigError) as raised:
        load_config(write(tmp_path, body))
    (line,) = str(raised.value).splitlines()
    assert line.startswith(str(tmp_path / "conteb.yaml")) and line.endswith(expected), line


MAKE_CASES = [
    ("evaluate", "controlled domain"),
    ("reproduce", "controlled domain"),
    ("evaluate", "evaluation key"),
    ("reproduce", "system kind"),
]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize(("target", "case"), MAKE_CASES)
def test_make_evaluate_and_reproduce_stop_at_the_registry_without_a_traceback(
    tmp_path: Path, isolated_env: Path, target: str, case: str
) -> None:
    body, expected = BROKEN[case]
    env = user_make_env({"CONTEB_CONFIG": str(write(tmp_path, body))})
    # -o: never rebuild the venv stamp (the project is installed already); validation stops it before Dagster starts
    run = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", target], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    output = run.stdout + run.stderr
    assert run.returncode == 2, output
    assert "Traceback" not in output
    problems = [line for line in run.stderr.splitlines() if not line.startswith("make:")]
    assert problems == [f"{tmp_path / 'conteb.yaml'}: {expected}"], output


@pytest.fixture
def store_registry(tmp_path: Path, isolated_env: Path) -> Path:
    """A registry whose review store holds one queue, demo/reformulation, of two pending items."""
    path = write(tmp_path, GOOD)
    items = [review_item("demo", "reformulation", f"doc_{i}", "doc", f"rewrite {i}", "llm", title="Doc",
                         original=f"original {i}") for i in range(2)]  # fmt: skip
    ReviewStore(review_store_path(isolated_env)).push(review_items_table(items))
    return path


REVIEW_COMMANDS = [
    ["list"],
    ["stats"],
    ["show", "demo:reformulation:doc_0"],
    ["accept", "--task", "demo", "--reviewer", "ana"],
    ["reject", "--task", "demo", "--reviewer", "ana"],
    ["export", "--task", "demo"],
    ["check", "--quick"],
    ["serve"],
]


@pytest.mark.parametrize("command", REVIEW_COMMANDS, ids=lambda command: command[0])
def test_every_review_command_reports_a_bad_registry_on_one_line(tmp_path: Path, isolated_env: Path, command) -> None:
    body, expected = BROKEN["controlled domain"]
    config = write(tmp_path, body)
    result = CliRunner().invoke(main, ["--config", str(config), "review", *command])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # not an error escaping as a traceback
    assert result.output.splitlines() == [f"{config}: {expected}"]


def test_import_reports_a_bad_registry_on_one_line(tmp_path: Path, isolated_env: Path) -> None:
    body, expected = BROKEN["training setting"]
    config = write(tmp_path, body)
    decisions = tmp_path / "decisions.jsonl"
    decisions.write_text("")
    result = CliRunner().invoke(main, ["--config", str(config), "review", "import", str(decisions)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert result.output.splitlines() == [f"{config}: {expected}"]


def _review(config: Path, *args: str):
    return CliRunner().invoke(main, ["--config", str(config), "review", *args])


def test_a_misspelt_review_subcommand_gets_a_suggestion(store_registry: Path) -> None:
    result = _review(store_registry, "lst")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "Error: No such command 'lst'. Did you mean 'list'?" in result.output


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["list", "--task", "dem"], "no review queue for task 'dem' (did you mean 'demo'?); known tasks: demo"),
        (["accept", "--task", "demo", "--kind", "reformulaton", "--reviewer", "ana"],
         "no review queue 'reformulaton' of task 'demo' (did you mean 'reformulation'?); known kinds: reformulation"),
        (["stats", "--task", "Demo"], "no review queue for task 'Demo' (did you mean 'demo'?)"),
        (["export", "--task", "xyzzy"], "no review queue for task 'xyzzy'; known tasks: demo"),
    ],
)  # fmt: skip
def test_a_misspelt_task_or_queue_kind_gets_a_suggestion(store_registry: Path, args: list[str], expected: str) -> None:
    result = _review(store_registry, *args)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert expected in " ".join(result.output.split()), result.output  # click wraps long messages


def test_conteb_evaluate_suggests_the_system_meant(store_registry: Path) -> None:
    result = CliRunner().invoke(main, ["--config", str(store_registry), "evaluate", "--system", "late-chunkin"])
    assert result.exit_code == 2
    assert "unknown system(s) ['late-chunkin'] (did you mean 'late-chunking' for 'late-chunkin'?)" in result.output
