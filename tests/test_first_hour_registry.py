"""The first hour with a registry: a bad ``conteb.yaml`` is reported on one line naming the file, the place and
the fix (``conteb validate`` and ``make run``), and ``conteb validate`` opens every source it declares."""

from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import main
from conteb.config import ConfigError, TaskConfig
from curation.sources import load_source
from curation.splits import assign_splits
from project.config import load_config
from tests.conftest import ROOT, squad_article, write_squad
from tests.support.make import user_make_env


def write_config(folder: Path, body: str) -> Path:
    path = folder / "conteb.yaml"
    path.write_text(body, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "tasks:\n  - name: t\n    source: {kind: sample}\n    chunkng: {chunk_size: 10}\n",
            "task 't' (tasks[0]): unknown key 'chunkng' (did you mean 'chunking'?)",
        ),
        (
            "tasks:\n  - name: t\n    source: {kind: sample, pth: data/sample}\n",
            "task 't' (tasks[0]): source: unknown key 'pth' (did you mean 'path'?)",
        ),
        ("llm: {modl: gpt-4o}\ntasks: []\n", "llm: unknown key 'modl' (did you mean 'model'?)"),
        ("evalution: {}\ntasks: []\n", "unknown key 'evalution' (did you mean 'evaluation'?)"),
        (
            "evaluation:\n  systems: [{name: b, kind: bm25, tokenzier: model}]\ntasks: []\n",
            "evaluation.systems[0]: unknown key 'tokenzier' (did you mean 'tokenizer'?)",
        ),
    ],
)
def test_an_unknown_key_is_one_line_naming_the_key_and_the_likely_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, expected: str
) -> None:
    (tmp_path / "data" / "sample").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as raised:
        load_config(write_config(tmp_path, body))
    message = str(raised.value)
    assert message == f"conteb.yaml: {expected}"  # relative to the working folder, one line, no pydantic wording


def test_an_unknown_key_with_no_close_match_lists_the_allowed_keys(tmp_path: Path) -> None:
    (tmp_path / "data" / "sample").mkdir(parents=True)
    with pytest.raises(ConfigError) as raised:
        load_config(write_config(tmp_path, "tasks:\n  - name: t\n    source: {kind: sample}\n    xyzzy: 1\n"))
    allowed = ", ".join(sorted(TaskConfig.model_fields))
    assert str(raised.value).endswith(f"task 't' (tasks[0]): unknown key 'xyzzy' (allowed: {allowed})")


def test_every_problem_gets_its_own_self_contained_line(tmp_path: Path) -> None:
    (tmp_path / "data" / "sample").mkdir(parents=True)
    body = "tasks:\n  - name: t\n    source: {kind: sample}\n    chunkng: 1\n    pairing: fuzzy\n"
    with pytest.raises(ConfigError) as raised:
        load_config(write_config(tmp_path, body))
    lines = str(raised.value).splitlines()
    assert len(lines) == 2 and all(
        line.startswith(f"{tmp_path / 'conteb.yaml'}: task 't' (tasks[0]): ") for line in lines
    )


def test_a_missing_relative_path_is_named_as_written_with_the_folder_it_was_resolved_against(tmp_path: Path) -> None:
    (tmp_path / "registry").mkdir()
    body = "tasks:\n  - name: squad\n    source: {kind: squad_json, path: corpora/dev.json.gz}\n"
    with pytest.raises(ConfigError) as raised:
        load_config(write_config(tmp_path / "registry", body))
    message = str(raised.value)
    assert "source.path: no such file or folder: 'corpora/dev.json.gz'" in message
    assert f"relative to {tmp_path / 'registry'}" in message
    assert str(tmp_path / "registry" / "corpora" / "dev.json.gz") in message


def test_validate_opens_the_sources_and_refuses_a_truncated_gz(tmp_path: Path) -> None:
    good = write_squad(
        tmp_path / "dev.json.gz", [squad_article("Ana", [("Ana is a city.", [("q1", "What?", "city", 9)])])]
    )
    data = good.read_bytes()
    (tmp_path / "cut.json.gz").write_bytes(data[: len(data) // 2])
    body = (
        "tasks:\n  - name: good\n    source: {kind: squad_json, path: dev.json.gz}\n"
        "  - name: cut\n    source: {kind: squad_json, path: cut.json.gz}\n"
    )
    config = write_config(tmp_path, body)
    result = CliRunner().invoke(main, ["--config", str(config), "validate"])
    assert result.exit_code == 1, result.output
    assert "OK" not in result.output
    [line] = [line for line in result.output.splitlines() if "cut.json.gz" in line]
    assert "task 'cut' (tasks[1]): source:" in line and "cannot read" in line
    assert gzip.decompress(data)  # the good file is fine: only the truncated one is reported
    assert not any("task 'good'" in line for line in result.output.splitlines())


def test_validate_says_what_each_source_holds(tmp_path: Path) -> None:
    write_squad(tmp_path / "dev.json.gz", [squad_article("Ana", [("Ana is a city.", [("q1", "What?", "city", 9)])])])
    config = write_config(tmp_path, "tasks:\n  - name: good\n    source: {kind: squad_json, path: dev.json.gz}\n")
    result = CliRunner().invoke(main, ["--config", str(config), "validate"])
    assert result.exit_code == 0, result.output
    assert "good: source: documents 1, queries 1" in result.output


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_reports_a_bad_registry_on_one_line_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "data" / "sample").mkdir(parents=True)
    config = write_config(tmp_path, "tasks:\n  - name: t\n    source: {kind: sample}\n    chunkng: 1\n")
    env = user_make_env({"CONTEB_CONFIG": str(config)})
    # -o: never rebuild the venv stamp (the project is installed already).
    run = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", "run"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    assert f"{config}: task 't' (tasks[0]): unknown key 'chunkng' (did you mean 'chunking'?)" in run.stderr.splitlines()


def test_validate_warns_of_a_validation_split_too_small_to_choose(tmp_path: Path) -> None:
    """issue 33: evaluation.select over a cheap baseline and a model needs >= 5 validation documents for any lead to
    be supported (evaluation/choice.py); validate counts the split from the source with the splits' own rule."""
    articles = [
        squad_article(f"City {i}", [(f"City {i} is a city.", [(f"q{i}", "What?", "city", 10)])]) for i in range(8)
    ]
    write_squad(tmp_path / "dev.json.gz", articles)
    evaluation = (
        "evaluation:\n  systems:\n    - {name: bm25, kind: bm25}\n    - {name: late, kind: dense, context: late}\n"
        "  select: [bm25, late]\n"
    )
    task = (
        "tasks:\n  - name: t\n    source: {kind: squad_json, path: dev.json.gz}\n"
        "    splits: {train: 0.5, validation: 0.25, test: 0.25, seed: 0}\n"
    )
    config = write_config(tmp_path, task + evaluation)
    ids = [d.doc_id for d in load_source(load_config(config).tasks[0].source, tmp_path).documents]
    held = sum(
        1 for s in assign_splits(ids, {"train": 0.5, "validation": 0.25, "test": 0.25}, 0).values() if s == "validation"
    )
    result = CliRunner().invoke(main, ["--config", str(config), "validate"])
    assert result.exit_code == 0, result.output
    [line] = [line for line in result.output.splitlines() if "validation split" in line]
    assert line.startswith(f"  t: warning: validation split has {held} document(s) (counted from the source")
    assert "fewer than the 5 evaluation.select needs to support any lead among ['bm25', 'late']" in line
    unopened = CliRunner().invoke(main, ["--config", str(config), "validate", "--no-sources"]).output
    assert "  t: validation split not counted here (source not opened): evaluation.select needs >= 5" in unopened
    # two cheap baselines: no lead to support, nothing to warn of
    baselines = evaluation.replace(
        "{name: late, kind: dense, context: late}", "{name: late, kind: bm25, context: title}"
    )
    quiet = CliRunner().invoke(main, ["--config", str(write_config(tmp_path, task + baselines)), "validate"]).output
    assert "validation split" not in quiet.replace("splits train", "")
