"""The model card (``README.md``) of a trained InSeNT model folder, rendered from the Jinja template
``training/templates/model_card.md.j2``.

sentence-transformers writes its own README on ``model.save``; :func:`write_model_card` replaces it,
keeping the front-matter fields that matter (``library_name``, ``pipeline_tag``) and adding
``base_model`` and the tags ``insent``, ``late-chunking``, ``conteb``.

Next to it, ``training_data.json`` (:mod:`embedding.model_folder`) records the documents the model saw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from conteb.content import CONTENT_RULE
from embedding.model_folder import TRAINING_DATA_FILE, read_front_matter, write_training_data
from training.config import TrainingConfig
from training.result import TrainResult

TAGS = ["insent", "late-chunking", "conteb"]
_KEPT_FRONT_MATTER = ("library_name", "pipeline_tag", "language", "license")


TEMPLATE = "model_card.md.j2"
"""The card's Jinja template, in ``training/templates/`` (package data)."""
_ENVIRONMENT = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    autoescape=False,  # Markdown, not HTML
)


def _score(scores: dict[str, float], key: str) -> str:
    value = scores.get(key)
    return "n/a" if value is None or value != value else f"{value:.4f}"


def _scores(scores: dict[str, float]) -> dict[str, str]:
    return {"in_document": _score(scores, "ndcg10_in_document"), "in_batch": _score(scores, "ndcg10_in_batch")}


def _loss_rows(history: list[dict[str, float]], points: int = 20) -> list[dict[str, float]]:
    """About ``points`` rows of ``history``, evenly strided, the last step always among them."""
    if not history:
        return []
    stride = max(1, len(history) // points)
    chosen = history[::stride]
    if chosen[-1] is not history[-1]:
        chosen.append(history[-1])
    return chosen


def _split_note(splits: dict[str, str | None], folder: Path) -> str:
    key = str(folder)
    if key not in splits:
        return ""
    split = splits[key]
    return f" (split `{split}`)" if split is not None else " (every split)"


def _settings(config: TrainingConfig) -> dict[str, Any]:
    """The settings table of the card."""
    return {
        "context": config.context,
        "window_policy": config.window_policy,
        "header": config.header,
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


def render_model_card(config: TrainingConfig, result: TrainResult, front: dict[str, Any] | None = None) -> str:
    """The card's Markdown text (front matter + body), from :data:`TEMPLATE`."""
    front = {key: value for key, value in (front or {}).items() if key in _KEPT_FRONT_MATTER}
    front.setdefault("library_name", "sentence-transformers")
    front.setdefault("pipeline_tag", "sentence-similarity")
    front["base_model"] = config.base_model
    front["tags"] = TAGS
    stats = result.stats
    return _ENVIRONMENT.get_template(TEMPLATE).render(
        front_matter=yaml.safe_dump(front, sort_keys=False, allow_unicode=True).strip(),
        config=config,
        stats=stats,
        result=result,
        split_notes=[_split_note(stats.splits, folder) for folder in config.data],
        filtered=", ".join(f"{reason}: {count}" for reason, count in sorted(stats.filtered.items())) or "none",
        training_data=result.training_data,
        content_rule=CONTENT_RULE,
        training_data_file=TRAINING_DATA_FILE,
        hyper=_settings(config),
        before=_scores(result.validation_before),
        after=_scores(result.validation),
        loss_rows=_loss_rows(result.loss_history),
    )


def write_model_card(folder: Path, config: TrainingConfig, result: TrainResult) -> Path:
    """Overwrite ``folder/README.md`` with the InSeNT card, and write ``training_data.json`` next to it."""
    path = Path(folder) / "README.md"
    text = render_model_card(config, result, read_front_matter(path))
    path.write_text(text, encoding="utf-8")
    write_training_data(Path(folder), result.training_data)
    return path
