"""The model card (``README.md``) of a trained InSeNT model folder.

sentence-transformers writes its own README on ``model.save``; :func:`write_model_card` replaces it,
keeping the front-matter fields that matter (``library_name``, ``pipeline_tag``) and adding
``base_model`` and the tags ``insent``, ``late-chunking``, ``conteb``.

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

from conteb.content import CONTENT_RULE, RULE_SETTINGS
from training.config import TrainingConfig
from training.result import TrainResult

TAGS = ["insent", "late-chunking", "conteb"]
TRAINING_DATA_FILE = "training_data.json"
TRAINING_DATA_FORMAT = 2
_KEPT_FRONT_MATTER = ("library_name", "pipeline_tag", "language", "license")


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
        data = yaml.safe_load(text[3:end])
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) else {}


def _score(scores: dict[str, float], key: str) -> str:
    value = scores.get(key)
    return "n/a" if value is None or value != value else f"{value:.4f}"


def _loss_curve(history: list[dict[str, float]], points: int = 20) -> str:
    if not history:
        return "No optimizer step was taken."
    stride = max(1, len(history) // points)
    chosen = history[::stride]
    if chosen[-1] is not history[-1]:
        chosen.append(history[-1])
    rows = "\n".join(
        f"| {r['step']} | {r['loss']:.4f} | {r['in_sequence']:.4f} | {r['in_batch']:.4f} | {r['lr']:.3g} |"
        for r in chosen
    )
    return "| step | loss | L_seq | L_batch | lr |\n|---|---|---|---|---|\n" + rows


def _split_note(splits: dict[str, str | None], folder: Path) -> str:
    key = str(folder)
    if key not in splits:
        return ""
    split = splits[key]
    return f" (split `{split}`)" if split is not None else " (every split)"


def _warnings(messages: list[str]) -> str:
    return "".join(f"\n**Warning**: {message}\n" for message in messages)


def _documents_seen(training_data: list[dict[str, Any]]) -> str:
    if not training_data:
        return "Not recorded."
    rows = "\n".join(
        f"| {entry['task']} | {entry['split'] if entry['split'] is not None else '(every split)'} | "
        f"{len(entry['doc_ids'])} |"
        for entry in training_data
    )
    return (
        "The documents this model saw (training and validation), by task and split; their ids and the\n"
        f"fingerprints of their texts, chunks and passages (rule `{CONTENT_RULE}`) are in `{TRAINING_DATA_FILE}`.\n"
        "Evaluating it on a corpus that shares documents, chunks or passages with these is refused, whatever the\n"
        "corpus is called.\n\n"
        f"| task | split | documents |\n|---|---|---|\n{rows}"
    )


def _usage(mode: str) -> str:
    if mode == "tokens":
        return (
            "Trained as a late-interaction model: score a query against a chunk with MaxSim over the chunk's token\n"
            "embeddings taken from one pass over the whole document (`training.encoder.LateChunkingEncoder`\n"
            "`forward_document_tokens`). The saved pooling module (mean) is not what it was trained for."
        )
    return (
        "Encode documents by late chunking (the chunks of a document joined with the separator token in one\n"
        "sequence, each chunk's vector the mean of its tokens; `training.encoder.LateChunkingEncoder`):\n"
        "independent chunk encoding does not use what this model was trained for."
    )


def render_model_card(config: TrainingConfig, result: TrainResult, front: dict[str, Any] | None = None) -> str:
    """The card's Markdown text (front matter + body)."""
    front = {key: value for key, value in (front or {}).items() if key in _KEPT_FRONT_MATTER}
    front.setdefault("library_name", "sentence-transformers")
    front.setdefault("pipeline_tag", "sentence-similarity")
    front["base_model"] = config.base_model
    front["tags"] = TAGS
    stats = result.stats
    data = "\n".join(f"- `{folder}`{_split_note(stats.splits, folder)}" for folder in config.data)
    filtered = ", ".join(f"{reason}: {count}" for reason, count in sorted(stats.filtered.items())) or "none"
    hyper = {
        "mode": config.mode,
        "loss": config.loss,
        "lambda_seq": config.lambda_seq,
        "scale": config.scale,
        "lr": config.lr,
        "weight_decay": config.weight_decay,
        "warmup_ratio": config.warmup_ratio,
        "schedule": "cosine with warm-up",
        "epochs": config.epochs,
        "max_steps": config.max_steps,
        "batch_docs": config.batch_docs,
        "grad_accumulation": config.grad_accumulation,
        "max_length": config.max_length,
        "window_overlap_chunks": config.window_overlap_chunks,
        "seed": config.seed,
        "include_synthetic": config.include_synthetic,
    }
    hyper_rows = "\n".join(f"| {key} | `{value}` |" for key, value in hyper.items())
    before, after = result.validation_before, result.validation
    return f"""---
{yaml.safe_dump(front, sort_keys=False, allow_unicode=True).strip()}
---

# InSeNT contextual embedder (late chunking) fine-tuned from `{config.base_model}`

Trained with InSeNT (Conti et al., 2025): each batch holds whole documents with all their chunks
(embedded together by late chunking) and all their queries; the loss is
`λ_seq · L_seq + (1 − λ_seq) · L_batch` with **λ_seq = {config.lambda_seq}** (loss variant `{config.loss}`,
scoring mode `{config.mode}`, similarity scale {config.scale}).

{_usage(config.mode)}

## Data

ConTEB task folders:

{data}

| what | count |
|---|---|
| documents | {stats.documents} |
| chunks | {stats.chunks} |
| queries (incl. synthetic) | {stats.queries} |
| synthetic queries | {stats.synthetic_queries} |
| documents without queries (in-batch negatives only) | {stats.documents_without_queries} |
| documents longer than the window (embedded in windows) | {stats.windowed_documents} |
| training documents / queries | {stats.train_documents} / {stats.train_queries} |
| validation documents / queries | {stats.validation_documents} / {stats.validation_queries} |

Filtered queries: {filtered}.
{_warnings(stats.warnings)}
### Documents seen

{_documents_seen(result.training_data)}

## Training

| setting | value |
|---|---|
{hyper_rows}

Optimizer steps: {result.steps}; device `{result.device}`; wall time {result.wall_s:.1f} s.

## Validation (held-out documents, nDCG@10)

| | before training | after training |
|---|---|---|
| in-document | {_score(before, "ndcg10_in_document")} | {_score(after, "ndcg10_in_document")} |
| in-batch ({config.batch_docs} documents) | {_score(before, "ndcg10_in_batch")} | {_score(after, "ndcg10_in_batch")} |

In-document: each validation query ranks the chunks of its own document. In-batch: it ranks all
chunks of a group of {config.batch_docs} validation documents.

## Loss curve

{_loss_curve(result.loss_history)}
"""


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


def write_model_card(folder: Path, config: TrainingConfig, result: TrainResult) -> Path:
    """Overwrite ``folder/README.md`` with the InSeNT card, and write ``training_data.json`` next to it."""
    path = Path(folder) / "README.md"
    text = render_model_card(config, result, read_front_matter(path))
    path.write_text(text, encoding="utf-8")
    write_training_data(Path(folder), result.training_data)
    return path
