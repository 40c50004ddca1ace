"""What a model folder holds besides its weights: the card's front matter and ``training_data.json``.

Training writes them (:mod:`training.card`); evaluation reads them (:mod:`evaluation.leakage`, the systems' models),
so the format has its owner here, below both.

Next to it, :data:`TRAINING_DATA_FILE` (``training_data.json``) records the documents the model saw
(training and validation), per task folder and split, machine-readable. Format :data:`TRAINING_DATA_FORMAT` (2)::

    {"format": 2,
     "content": {"rule": "conteb-content-v1", "min_words": 20, "passage_words": 50, "passage_window": 11},
     "tasks": [{"folder": ..., "task": <folder name>, "split": ..., "doc_ids": [...],
                "documents": [{"doc_id": ..., "text": <print or null>,
                               "chunks": {<chunk_id>: [<print of og_chunk>, <print of chunk, when it differs>]},
                               "passages": [<passage prints>]}]}]}

The prints are :mod:`conteb.content`'s (one rule for training and evaluation; ``content`` is its
:data:`~conteb.content.RULE_SETTINGS`, and prints are compared only under the same settings). Format 1 (no
``format`` key, written before content was recorded) has only the ``doc_ids``; it is still read
(:attr:`TrainingRecord.has_content` is then false). :mod:`evaluation.leakage` refuses to evaluate the model on a
corpus that shares documents, chunks or passages with what is recorded here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from conteb.content import RULE_SETTINGS
from conteb.yaml_text import load_yaml

TRAINING_DATA_FILE = "training_data.json"
TRAINING_DATA_FORMAT = 2


def read_front_matter(path: Path) -> dict[str, Any]:
    """The YAML front matter of a Markdown file (``{}`` when absent or unreadable)."""
    if not path.is_file():
        return {}
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return {}
    end = text.find("\n---", 3)
    if end < 0:
        return {}
    try:
        data = load_yaml(text[3:end])
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) else {}


def write_training_data(folder: Path, training_data: list[dict[str, Any]]) -> Path:
    """Write ``folder/training_data.json`` in format :data:`TRAINING_DATA_FORMAT` (module docstring).

    An entry's ``documents`` (its content prints, :func:`training.data.documents_seen`) are written when it has them;
    an entry without them is read back as recording ids only.
    """
    path = Path(folder) / TRAINING_DATA_FILE
    tasks = []
    for e in training_data:
        entry = {"folder": str(e["folder"]), "task": e["task"], "split": e["split"], "doc_ids": list(e["doc_ids"])}
        if "documents" in e:
            entry["documents"] = list(e["documents"])
        tasks.append(entry)
    record = {"format": TRAINING_DATA_FORMAT, "content": RULE_SETTINGS, "tasks": tasks}
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return path


@dataclass(frozen=True)
class TrainingRecord:
    """A parsed ``training_data.json``: its format, its content settings (None in format 1) and its entries."""

    path: Path
    format: int
    content: dict[str, Any] | None
    tasks: list[dict[str, Any]]

    @property
    def has_content(self) -> bool:
        """Whether every entry records content prints under this version's rule (:data:`RULE_SETTINGS`)."""
        return self.content == RULE_SETTINGS and all("documents" in entry for entry in self.tasks)

    def missing_content(self) -> str:
        """Why :attr:`has_content` is false, in words ("" when it is true)."""
        if self.format == 1:
            return "format 1: document ids only, no content fingerprints"
        if self.content != RULE_SETTINGS:
            return f"content fingerprints of another rule ({self.content}; this version computes {RULE_SETTINGS})"
        bare = [entry["task"] for entry in self.tasks if "documents" not in entry]
        return f"no content fingerprints for task(s) {bare}" if bare else ""


def _documents_problem(documents: Any) -> str | None:
    if not isinstance(documents, list):
        return "documents: expected a list"
    for index, document in enumerate(documents):
        if not (
            isinstance(document, dict)
            and isinstance(document.get("doc_id"), str)
            and (document.get("text") is None or isinstance(document.get("text"), str))
            and isinstance(document.get("chunks"), dict)
            and all(isinstance(prints, list) for prints in document["chunks"].values())
            and isinstance(document.get("passages"), list)
        ):
            return (
                f"documents[{index}]: expected doc_id (string), text (string or null), chunks (object of lists), "
                "passages (list)"
            )
    return None


def read_training_record(folder: Path) -> TrainingRecord | None:
    """``folder/training_data.json`` parsed (:func:`parse_training_record`), or None when the file is absent."""
    path = Path(folder) / TRAINING_DATA_FILE
    if not path.is_file():
        return None
    return parse_training_record(path, path.read_bytes())


def parse_training_record(path: Path, raw: bytes) -> TrainingRecord:
    """The ``training_data.json`` at ``path`` from its bytes ``raw`` (format 1 or 2, module docstring).

    Raises ``ValueError`` naming the file when it is not in a documented format.
    """
    try:
        data = json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not valid JSON: {error}") from None
    tasks = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(tasks, list):
        raise ValueError(f"{path}: expected {{'tasks': [...]}}")
    version = data.get("format", 1)
    if version not in (1, TRAINING_DATA_FORMAT):
        raise ValueError(
            f"{path}: format {version!r} is not one this version reads (1 or {TRAINING_DATA_FORMAT}); "
            "update conteb-pipeline or retrain the model"
        )
    content = data.get("content")
    if version == TRAINING_DATA_FORMAT and not isinstance(content, dict):
        raise ValueError(f"{path}: format {version} without its 'content' settings")
    for index, entry in enumerate(tasks):
        if not (
            isinstance(entry, dict) and isinstance(entry.get("task"), str) and isinstance(entry.get("doc_ids"), list)
        ):
            raise ValueError(f"{path}: tasks[{index}]: expected task (string), split and doc_ids (list)")
        problem = _documents_problem(entry["documents"]) if "documents" in entry else None
        if problem:
            raise ValueError(f"{path}: tasks[{index}]: {problem}")
    return TrainingRecord(path, version, content if version != 1 else None, tasks)


def read_training_data(folder: Path) -> list[dict[str, Any]] | None:
    """The ``tasks`` entries of ``folder/training_data.json`` (:func:`read_training_record`), or None when absent."""
    record = read_training_record(folder)
    return None if record is None else record.tasks
