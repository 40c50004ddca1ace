"""Train/test leakage: a trained model is refused on a split that shares documents with its training data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conteb.storage import dataset_dir, models_dir
from curation.chunking import chunk_documents
from curation.dataset import publish_task
from curation.pairing import pair_by_span
from curation.sources.sample import load_sample
from embedding.model_folder import TRAINING_DATA_FILE
from embedding.models import offline_minilm_path
from evaluation.config import DenseSystem
from evaluation.leakage import training_overlap_problem
from evaluation.systems.dispatch import requirement_problem
from evaluation.targets import evaluate_target, find_target
from project.config import load_config
from tests.conftest import SAMPLE_DIR
from tests.support.tiny_models import tiny_modernbert

REGISTRY = f"""tasks:
  - name: demo
    source: {{kind: sample, path: {SAMPLE_DIR}}}
    splits: {{train: 0.5, test: 0.5, seed: 0}}
evaluation:
  systems:
    - {{name: bm25, kind: bm25}}
    - {{name: insent, kind: dense, trained: insent_model, context: late}}
  chunk_sizes: {{enabled: false, systems: []}}
"""


@pytest.fixture
def project(tmp_path: Path):
    """A registry with a split task, its published folder and the documents of each split."""
    (tmp_path / "conteb.yaml").write_text(REGISTRY)
    config = load_config(tmp_path / "conteb.yaml")
    task = config.tasks[0]
    data_dir = tmp_path / "data"
    source = load_sample(SAMPLE_DIR)
    chunks = chunk_documents(source.documents_table(), task.chunking).chunks
    queries = pair_by_span(source.queries_table(), source.documents_table(), chunks).table()
    published = publish_task(dataset_dir(data_dir, "demo"), task, "sample", chunks, queries, {})
    by_split = {s: sorted(d for d, split in published.assignment.items() if split == s) for s in ("train", "test")}
    return config, data_dir, by_split


def save_model(folder: Path, tasks: list[dict] | None) -> Path:
    """A saved (tiny, random) sentence-transformers model, with a training_data.json when ``tasks`` is given."""
    tiny_modernbert(offline_minilm_path(), seed=0, device="cpu").save(str(folder))
    if tasks is not None:
        (folder / TRAINING_DATA_FILE).write_text(json.dumps({"tasks": tasks}))
    return folder


def record(folder: str, split: str, doc_ids: list[str], task: str = "demo") -> dict:
    return {"folder": folder, "task": task, "split": split, "doc_ids": doc_ids}


def test_overlap_is_refused_naming_task_split_and_documents(project, tmp_path: Path) -> None:
    config, data_dir, by_split = project
    target = find_target(config.tasks, config.evaluation, data_dir, "demo")
    assert target.split == "test"  # registry tasks are evaluated on their evaluation split by default
    corpus = target.load()
    assert set(corpus.document_order) == set(by_split["test"])
    folder = tmp_path / "m"
    folder.mkdir()
    leaked = by_split["test"][:2]
    (folder / TRAINING_DATA_FILE).write_text(
        json.dumps({"tasks": [record(target.path, "train", by_split["train"] + leaked)]})
    )
    problem = training_overlap_problem(folder, corpus)
    assert problem.startswith("refused: m was trained on 2 documents of task 'demo' (split 'train')")
    assert "also in the evaluated split 'test'" in problem and repr(leaked[0]) in problem and "splits:" in problem
    (folder / TRAINING_DATA_FILE).write_text(json.dumps({"tasks": [record(target.path, "train", by_split["train"])]}))
    assert training_overlap_problem(folder, corpus) is None
    # another task's documents do not count, even with the same ids; the folder path alone identifies the task
    (folder / TRAINING_DATA_FILE).write_text(json.dumps({"tasks": [record("/elsewhere", "test", leaked, "other")]}))
    assert training_overlap_problem(folder, corpus) is None
    (folder / TRAINING_DATA_FILE).write_text(json.dumps({"tasks": [record(target.path, None, leaked, "renamed")]}))
    assert "(split every split)" in training_overlap_problem(folder, corpus)
    (folder / TRAINING_DATA_FILE).write_text("[]")
    assert training_overlap_problem(folder, corpus).startswith("refused: cannot tell which documents m was trained on")
    (folder / TRAINING_DATA_FILE).unlink()
    assert training_overlap_problem(folder, corpus) is None  # nothing recorded: nothing to refuse


def test_requirement_problem_covers_trained_and_model_folders(project, tmp_path: Path) -> None:
    config, data_dir, by_split = project
    corpus = find_target(config.tasks, config.evaluation, data_dir, "demo").load()
    models = models_dir(data_dir)
    folder = models / "insent_model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / TRAINING_DATA_FILE).write_text(json.dumps({"tasks": [record("x", "test", by_split["test"])]}))
    trained = DenseSystem(kind="dense", name="insent", trained="insent_model", context="late")
    assert requirement_problem(trained, corpus, models).startswith("refused: insent_model was trained on")
    by_path = DenseSystem(kind="dense", name="mine", model=str(folder), context="late")
    assert requirement_problem(by_path, corpus, models).startswith("refused: insent_model was trained on")
    plain = DenseSystem(kind="dense", name="independent", model="offline-minilm")
    assert requirement_problem(plain, corpus, models) is None


def test_the_runner_reports_a_refused_model_as_not_run_and_runs_a_disjoint_one(project, tmp_path: Path) -> None:
    config, data_dir, by_split = project
    target = find_target(config.tasks, config.evaluation, data_dir, "demo")
    folder = save_model(models_dir(data_dir) / "insent_model", [record(target.path, "test", by_split["test"][:1])])
    evaluation = evaluate_target(target, config.evaluation, data_dir, chunk_sizes=False, log=lambda _: None)
    insent = evaluation.run("insent")
    assert insent.status == "not_run" and insent.reason.startswith("refused: insent_model was trained on 1 document ")
    assert evaluation.run("bm25").status == "ok" and evaluation.split == "test"

    (folder / TRAINING_DATA_FILE).write_text(json.dumps({"tasks": [record(target.path, "train", by_split["train"])]}))
    evaluation = evaluate_target(
        target, config.evaluation, data_dir, systems=["insent"], chunk_sizes=False, log=lambda _: None
    )
    assert evaluation.run("insent").status == "ok"
