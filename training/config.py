"""Training configuration: one pydantic model, read from YAML and/or the command line.

``python -m training --config FILE`` reads a YAML mapping of :class:`TrainingConfig` fields;
options given on the command line next to ``--config`` override the file's values. Without a
file, ``--data DIR [DIR ...] --base-model NAME_OR_PATH --output DIR`` is enough.
Validation errors are raised as :class:`TrainingConfigError`, whose message names the field.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, ConfigDict, Field, ValidationError, field_validator

from conteb.config import StrictModel, valid_split_name
from conteb.yaml_text import load_yaml
from embedding.windows import DEFAULT_WINDOW_OVERLAP_CHUNKS
from evaluation.config import DEFAULT_TITLE_TEMPLATE, TitleTemplate


class TrainingConfigError(ValueError):
    """An invalid training configuration; the message names the offending field(s)."""


class TrainingConfig(StrictModel):
    """Everything a training run needs (defaults follow the InSeNT paper where it says). The registry's rules
    (:class:`conteb.config.StrictModel`: unknown keys refused, every number finite), but not frozen: values are
    validated again when assigned."""

    model_config = ConfigDict(frozen=False, validate_assignment=True)

    data: list[Path] = Field(min_length=1)  # ConTEB task folders
    # the split read from each folder (training.data.resolve_split: a folder without it but with a
    # single split reads that one, with a warning); None: every shard of every split
    split: Annotated[str, AfterValidator(valid_split_name)] | None = "train"
    base_model: str = "offline-minilm"  # "offline-minilm", a local folder, or a hub name
    # the folder the trained model is saved to (sentence-transformers format, with a card)
    output: Path
    mode: Literal["single", "tokens"] = "single"  # single vector (cosine) | late interaction (MaxSim)
    # late: chunks encoded in their document (late chunking, InSeNT); independent: each chunk alone,
    # the paper's "+Training" control (same data and loss, no context)
    context: Literal["late", "independent"] = "late"
    # weighted: the InSeNT mix lambda_seq * L_seq + (1 - lambda_seq) * L_batch; single_softmax: one softmax over in-
    # sequence and in-batch negatives together
    loss: Literal["weighted", "single_softmax"] = "weighted"
    # the weight of the in-sequence loss in the weighted loss (the paper's default 0.1)
    lambda_seq: float = Field(0.1, ge=0.0, le=1.0)
    # the similarity scale of the InfoNCE losses (20: temperature 0.05)
    scale: float = Field(20.0, gt=0.0)
    # AdamW learning rate
    lr: float = Field(5e-5, gt=0.0)
    # AdamW weight decay
    weight_decay: float = Field(0.01, ge=0.0)
    # share of the optimizer steps spent warming up before the cosine decay
    warmup_ratio: float = Field(0.05, ge=0.0, le=1.0)
    # passes over the training documents (unless `max_steps` is set)
    epochs: int = Field(2, ge=1)
    max_steps: int | None = Field(None, ge=1)  # optimizer steps; overrides epochs when set
    batch_docs: int = Field(4, ge=1)  # documents per batch per device
    # batches whose gradients add up into one optimizer step
    grad_accumulation: int = Field(1, ge=1)
    # gradient norm clipping threshold
    max_grad_norm: float = Field(1.0, gt=0.0)
    max_length: int | None = Field(None, ge=8)  # tokens per window; None: the model's context
    window_overlap_chunks: int = Field(DEFAULT_WINDOW_OVERLAP_CHUNKS, ge=0)  # embedding/windows.py: measured
    # plain windows, or anchored: every window after the first starts with the document's head (title + first
    # chunk, at most floor(anchor_share * max_length) tokens), attended to but never pooled (embedding.encoder)
    window_policy: Literal["plain", "anchored"] = "plain"
    # anchored windows: the head takes at most this share of a window's tokens
    anchor_share: float = Field(0.4, gt=0.0, lt=1.0)
    # title: each chunk is read as title_template filled with its document's title and the chunk, the text evaluation's
    # ``header: title`` (late) and ``context: title`` (independent) give it (evaluation.systems.headers.header_text);
    # anchored windows then take the first chunk's header text as their head. None: the chunks as published
    header: Literal["title"] | None = None
    # how a title and a chunk make the text read with `header: title` ({title}, {chunk})
    title_template: TitleTemplate = DEFAULT_TITLE_TEMPLATE
    # weighted loss: mean over queries (ours) or over documents of per-document means (the public code)
    loss_average: Literal["query", "document"] = "query"
    # share of the training documents held out to measure the loss during training
    validation_fraction: float = Field(0.1, ge=0.0, lt=1.0)
    eval_every: int = Field(50, ge=0)  # 0: evaluate only before and after training
    # optimizer steps between two logged loss lines
    log_every: int = Field(1, ge=1)
    checkpoint_every: int = Field(100, ge=0)  # 0: no intermediate checkpoints
    # intermediate checkpoints kept on disk (the oldest are removed)
    keep_checkpoints: int = Field(2, ge=1)
    # seed of shuffling, the held-out documents and initialisation: the same seed, the same run
    seed: int = 0
    # bf16 autocast of the encoder: auto on CUDA where supported; true on any device (CPU: torch.autocast("cpu"))
    bf16: bool | Literal["auto"] = "auto"
    gradient_checkpointing: bool | Literal["auto"] = "auto"  # auto: on CUDA only
    # dropout on attention probabilities while training; None: the model's own (MiniLM 0.1, ModernBERT 0.0).
    # On CPU, PyTorch SDPA with dropout falls back to the unfused attention kernel (embedding.models)
    attention_dropout: float | None = Field(None, ge=0.0, lt=1.0)
    # also train on the task's synthetic queries (when it has them)
    include_synthetic: bool = True
    # cuda, cpu or a device name; null: CUDA when present, else CPU
    device: str | None = None
    # text put before every query (e.g. search_query: for nomic-style models)
    query_prefix: str = ""
    # text put before every document sequence (e.g. search_document: )
    document_prefix: str = ""
    # padded tokens per forward batch (bounds the memory of one step)
    token_budget: int = Field(16384, ge=1)

    @field_validator("data")
    @classmethod
    def _folders_exist(cls, folders: list[Path]) -> list[Path]:
        missing = [str(folder) for folder in folders if not (Path(folder) / "documents").is_dir()]
        if missing:
            raise ValueError(f"not ConTEB task folders (no documents/ subfolder): {missing}")
        return folders


def _format_errors(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"]) or "<config>"
        lines.append(f"{field}: {item['msg']}")
    return "invalid training config: " + "; ".join(lines)


def make_config(values: dict[str, Any]) -> TrainingConfig:
    """Validate ``values`` into a config; errors name the field (``TrainingConfigError``)."""
    try:
        return TrainingConfig.model_validate(values)
    except ValidationError as error:
        raise TrainingConfigError(_format_errors(error)) from None


def load_training_config(path: Path | str, overrides: dict[str, Any] | None = None) -> TrainingConfig:
    """Read a YAML config file; relative data/output paths are resolved against the file's folder."""
    path = Path(path)
    try:
        raw = load_yaml(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise TrainingConfigError(f"invalid training config: {path}: {' '.join(str(error).split())}") from None
    if not isinstance(raw, dict):
        raise TrainingConfigError(f"invalid training config: {path} must hold a YAML mapping of fields")
    if isinstance(raw.get("data"), str | Path):
        raw["data"] = [raw["data"]]
    base = path.resolve().parent
    if isinstance(raw.get("data"), list):
        raw["data"] = [str(base / item) if not Path(str(item)).is_absolute() else item for item in raw["data"]]
    if isinstance(raw.get("output"), str) and not Path(raw["output"]).is_absolute():
        raw["output"] = str(base / raw["output"])
    raw.update(overrides or {})
    return make_config(raw)


def dump_training_config(config: TrainingConfig, path: Path | str) -> Path:
    """Write ``config`` as YAML (absolute paths), readable by :func:`load_training_config`."""
    path = Path(path)
    path.write_text(yaml.safe_dump(config_to_dict(config), sort_keys=False), encoding="utf-8")
    return path


def config_to_dict(config: TrainingConfig) -> dict[str, Any]:
    """A plain, YAML/JSON-friendly dict of ``config``."""
    return config.model_dump(mode="json")


def _bool_or_auto(text: str) -> bool | str:
    lowered = text.lower()
    if lowered == "auto":
        return "auto"
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise argparse.ArgumentTypeError(f"expected true, false or auto, got {text!r}")


# The config fields settable by a command-line option of the same name (``--max-steps`` -> ``max_steps``); every
# option defaults to None so that only given options override.
_CLI_FIELDS = (
    "data",
    "base_model",
    "output",
    "epochs",
    "max_steps",
    "lambda_seq",
    "batch_docs",
    "mode",
    "context",
    "loss",
    "lr",
    "grad_accumulation",
    "max_length",
    "eval_every",
    "checkpoint_every",
    "seed",
    "device",
    "bf16",
    "gradient_checkpointing",
    "attention_dropout",
    "validation_fraction",
    "window_policy",
    "header",
    "loss_average",
    "split",
)


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m training`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="python -m training",
        description="Train an InSeNT contextual embedder (late chunking) on ConTEB task folders.",
    )
    parser.add_argument("--config", type=Path, help="YAML file of TrainingConfig fields")
    parser.add_argument("--data", nargs="+", help="ConTEB task folder(s)")
    parser.add_argument("--base-model", help="offline-minilm, a local model folder, or a hub name")
    parser.add_argument("--output", help="where the trained sentence-transformers model is saved")
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--max-steps", type=int)
    parser.add_argument("--lambda-seq", type=float)
    parser.add_argument("--batch-docs", type=int)
    parser.add_argument("--mode", choices=["single", "tokens"])
    parser.add_argument(
        "--context", choices=["late", "independent"], help="independent: the no-context control (+Training)"
    )
    parser.add_argument("--loss", choices=["weighted", "single_softmax"])
    parser.add_argument(
        "--window-policy", choices=["plain", "anchored"], help="anchored: later windows start with the document's head"
    )
    parser.add_argument(
        "--header", choices=["title"], help="title: each chunk read under its document's title (as evaluation's header)"
    )
    parser.add_argument(
        "--loss-average", choices=["query", "document"], help="document: per-document means (the public code)"
    )
    parser.add_argument("--lr", type=float)
    parser.add_argument("--grad-accumulation", type=int)
    parser.add_argument("--max-length", type=int)
    parser.add_argument("--eval-every", type=int)
    parser.add_argument("--checkpoint-every", type=int)
    parser.add_argument("--validation-fraction", type=float)
    parser.add_argument("--split", help="the split read from each task folder (default: train)")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--device")
    parser.add_argument("--bf16", type=_bool_or_auto)
    parser.add_argument("--gradient-checkpointing", type=_bool_or_auto)
    parser.add_argument(
        "--attention-dropout", type=float, help="attention-probability dropout while training (default: the model's)"
    )
    parser.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --output")
    parser.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    return parser


def from_cli(args: argparse.Namespace | list[str]) -> TrainingConfig:
    """A config from parsed (or raw) command-line arguments: ``--config`` file plus overrides."""
    if isinstance(args, list):
        args = build_parser().parse_args(args)
    overrides = {field: getattr(args, field) for field in _CLI_FIELDS}
    overrides = {field: value for field, value in overrides.items() if value is not None}
    if args.config is not None:
        return load_training_config(args.config, overrides)
    missing = [f"--{name.replace('_', '-')}" for name in ("data", "output") if name not in overrides]
    if missing:
        raise TrainingConfigError(f"invalid training config: {', '.join(missing)} required without --config")
    return make_config(overrides)
