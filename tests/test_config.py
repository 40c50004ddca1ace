from pathlib import Path

import pytest

from conteb.config import ConfigError, SampleSource
from project.config import load_config
from tests.conftest import ROOT


def write_config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "conteb.yaml"
    path.write_text(body, encoding="utf-8")
    return path


def test_default_registry_declares_the_sample() -> None:
    config = load_config(ROOT / "conteb.yaml")
    assert [task.name for task in config.tasks] == ["sample"]
    task = config.tasks[0]
    assert isinstance(task.source, SampleSource)
    assert task.source.path == (ROOT / "data" / "sample").resolve()
    assert (task.chunking.chunk_size, task.chunking.chunk_overlap) == (1000, 0)
    assert config.llm.model == "gpt-4o"


def test_paths_resolve_relative_to_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "corpus").mkdir()
    config = load_config(
        write_config(tmp_path, "tasks:\n  - name: mine\n    source: {kind: text_folder, path: corpus}\n")
    )
    assert config.tasks[0].source.path == (tmp_path / "corpus").resolve()


def test_config_env_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_config(tmp_path, "tasks: []\n")
    monkeypatch.setenv("CONTEB_CONFIG", str(path))
    assert load_config().config_path == path.resolve()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "tasks:\n  - name: squad\n    source: {kind: pdf_folder, path: x}\n",
            r"task 'squad' \(tasks\[0\]\): source(\.kind)?: .*pdf_folder",
        ),
        (
            "tasks:\n  - name: squad\n    source: {kind: squad_json, path: missing.json.gz}\n",
            r"task 'squad' \(tasks\[0\]\): source.path: no such file or folder: .*missing.json.gz",
        ),
        (
            "tasks:\n  - name: a\n    source: {kind: sample}\n  - name: a\n    source: {kind: sample}\n",
            r"task 'a' \(tasks\[1\]\): name: duplicate task name, already declared at tasks\[0\]",
        ),
        (
            "tasks:\n  - name: Bad_Name\n    source: {kind: sample}\n",
            r"task 'Bad_Name' \(tasks\[0\]\): name: String should match pattern",
        ),
        (
            "tasks:\n  - name: t\n    source: {kind: sample}\n    chunking: {chunk_size: 100, chunk_overlap: 100}\n",
            r"task 't' \(tasks\[0\]\): chunking: chunk_overlap \(100\) must be smaller than chunk_size \(100\)",
        ),
        (
            "tasks:\n  - name: t\n    source: {kind: sample}\n    chunkng: {chunk_size: 10}\n",
            r"task 't' \(tasks\[0\]\): unknown key 'chunkng' \(did you mean 'chunking'\?\)",
        ),
        (
            "tasks:\n  - name: t\n    source: {kind: sample}\n    pairing: fuzzy\n",
            r"task 't' \(tasks\[0\]\): pairing: Input should be 'span', 'llm' or 'both'",
        ),
        (
            "tasks:\n  - name: t\n    source: {kind: sample}\n    splits: {train: 0.6, test: 0.6, seed: 0}\n",
            r"task 't' \(tasks\[0\]\): splits: fractions must sum to 1, got 1.2",
        ),
        (
            "tasks:\n  - name: t\n    source: {kind: sample}\n    splits: {train: 1.0, seed: zero}\n",
            r"task 't' \(tasks\[0\]\): splits.seed: Input should be a valid integer",
        ),
        ("llm:\n  mode: turbo\ntasks: []\n", r"llm.mode: Input should be 'online' or 'batch'"),
        ("tasks: [unclosed\n", r"not valid YAML"),
        ("- just\n- a list\n", r"top level must be a mapping"),
    ],
)
def test_bad_registry_names_task_and_field(tmp_path: Path, body: str, expected: str) -> None:
    (tmp_path / "data" / "sample").mkdir(parents=True)
    with pytest.raises(ConfigError, match=expected):
        load_config(write_config(tmp_path, body))


def test_source_path_of_wrong_type(tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ConfigError, match=r"task 't'.*source.path: .*file.txt is not a folder"):
        load_config(write_config(tmp_path, "tasks:\n  - name: t\n    source: {kind: text_folder, path: file.txt}\n"))


def test_missing_registry_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ("llm: {max_retry_after_s: .inf}", "llm.max_retry_after_s"),
        ("llm: {timeout_s: .inf}", "llm.timeout_s"),
        ("llm: {backoff_max_s: .nan}", "llm.backoff_max_s"),
        ("llm: {batch_timeout_s: .inf}", "llm.batch_timeout_s"),
        ("llm: {temperature: .nan}", "llm.temperature"),
        ("llm: {prices: {gpt-4o: {prompt: .inf, completion: 10}}}", "llm.prices.gpt-4o.prompt"),
        ("llm: {prices: {gpt-4o: {prompt: 1, completion: 1, cached_prompt: .nan}}}", "llm.prices.gpt-4o.cached_prompt"),
        ("evaluation: {systems: [{kind: bm25, name: b, k1: .inf}]}", "evaluation.systems[0].k1"),
        ("evaluation: {systems: [{kind: bm25, name: b, b: -.inf}]}", "evaluation.systems[0].b"),
        ("reproduce: {window_share: .nan}", "reproduce.window_share"),
        ("reproduce: {splits: {train: .nan, test: 0.5}}", "reproduce.splits.fractions.train"),
    ],
)
def test_non_finite_numbers_are_refused_everywhere(tmp_path: Path, block: str, field: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(write_config(tmp_path, f"tasks: []\n{block}\n"))
    assert str(refused.value) == f"{tmp_path / 'conteb.yaml'}: {field}: Input should be a finite number"
