"""The model card (``README.md``) of a trained InSeNT model folder.

sentence-transformers writes its own README on ``model.save``; :func:`write_model_card` replaces it,
keeping the front-matter fields that matter (``library_name``, ``pipeline_tag``) and adding
``base_model`` and the tags ``insent``, ``late-chunking``, ``conteb``.

Next to it, ``training_data.json`` (:mod:`embedding.model_folder`) records the documents the model saw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from conteb.content import CONTENT_RULE
from embedding.model_folder import TRAINING_DATA_FILE, read_front_matter, write_training_data
from training.config import TrainingConfig
from training.result import TrainResult

TAGS = ["insent", "late-chunking", "conteb"]
_KEPT_FRONT_MATTER = ("library_name", "pipeline_tag", "language", "license")


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


def _title(config: TrainingConfig) -> str:
    if config.context == "independent":
        return 'The "+Training" control (each chunk encoded alone)'
    return f"InSeNT contextual embedder (late chunking, {config.window_policy} windows)"


def _how(config: TrainingConfig) -> str:
    """How a batch is encoded: late chunking, or each chunk alone for the control (the same data and loss)."""
    if config.context == "independent":
        return (
            "The paper's control for InSeNT (Conti et al., 2025): the same data and loss, but each chunk is encoded\n"
            "alone, without its document; each batch holds whole documents with all their chunks and queries;"
        )
    return (
        "Trained with InSeNT (Conti et al., 2025): each batch holds whole documents with all their chunks\n"
        "(embedded together by late chunking) and all their queries;"
    )


def _usage(config: TrainingConfig) -> str:
    if config.context == "independent":
        return (
            "Encode each chunk alone (`SentenceTransformer.encode`), as it was trained: the baseline against which\n"
            "InSeNT's gain from context is measured."
        )
    if config.mode == "tokens":
        return (
            "Trained as a late-interaction model: score a query against a chunk with MaxSim over the chunk's token\n"
            "embeddings taken from one pass over the whole document (`embedding.encoder.LateChunkingEncoder`\n"
            "`forward_document_tokens`). The saved pooling module (mean) is not what it was trained for."
        )
    return (
        "Encode documents by late chunking (the chunks of a document joined with the separator token in one\n"
        "sequence, each chunk's vector the mean of its tokens; `embedding.encoder.LateChunkingEncoder`):\n"
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

# {_title(config)} fine-tuned from `{config.base_model}`

{_how(config)} the loss is
`λ_seq · L_seq + (1 − λ_seq) · L_batch` with **λ_seq = {config.lambda_seq}** (loss variant `{config.loss}`,
scoring mode `{config.mode}`, similarity scale {config.scale}).

{_usage(config)}

## Data

ConTEB task folders:

{data}

| what | count |
|---|---|
| documents | {stats.documents} |
| chunks | {stats.chunks} |
| queries (incl. synthetic) | {stats.queries} |
| synthetic queries | {stats.synthetic_queries} |
| pseudo-queries (offline inverse cloze, pairing `pseudo`) | {stats.pseudo_queries} |
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


def write_model_card(folder: Path, config: TrainingConfig, result: TrainResult) -> Path:
    """Overwrite ``folder/README.md`` with the InSeNT card, and write ``training_data.json`` next to it."""
    path = Path(folder) / "README.md"
    text = render_model_card(config, result, read_front_matter(path))
    path.write_text(text, encoding="utf-8")
    write_training_data(Path(folder), result.training_data)
    return path
