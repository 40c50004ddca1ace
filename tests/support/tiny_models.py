"""Tiny randomly initialised models for mechanics tests and benchmarks (never shipped in the package).

``from tests.support.tiny_models import tiny_modernbert`` (``tests/`` is a package; scripts under ``bench/`` put the
repository root on ``sys.path`` first).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
from transformers import AutoTokenizer, ModernBertConfig, ModernBertModel

from embedding.models import offline_minilm_path, pick_device

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
"""The tokenizer files copied from ``tokenizer_path`` (those present)."""


def tiny_modernbert(
    tokenizer_path: str | Path | None = None,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 2,
    intermediate: int = 128,
    max_position: int = 512,
    seed: int = 0,
    device: str | None = None,
) -> SentenceTransformer:
    """A randomly initialised ModernBERT (Transformer + mean Pooling + Normalize) for mechanics tests.

    Uses the tokenizer files found in ``tokenizer_path`` (default: the offline MiniLM folder): vocab size and the
    [CLS]/[SEP]/[PAD]/[MASK] ids of the config are the tokenizer's. Same ``seed`` → same weights. The model saves
    with ``model.save(path)`` and reloads with ``SentenceTransformer(path)``.
    """
    source = Path(tokenizer_path) if tokenizer_path is not None else offline_minilm_path()
    with tempfile.TemporaryDirectory(prefix="tiny-modernbert-") as tmp:
        folder = Path(tmp)
        for name in TOKENIZER_FILES:
            if (source / name).is_file():
                shutil.copy2(source / name, folder / name)
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        config = ModernBertConfig(
            vocab_size=len(tokenizer),
            hidden_size=hidden,
            intermediate_size=intermediate,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            max_position_embeddings=max_position,
            pad_token_id=tokenizer.pad_token_id,
            cls_token_id=tokenizer.cls_token_id,
            bos_token_id=tokenizer.cls_token_id,
            sep_token_id=tokenizer.sep_token_id,
            eos_token_id=tokenizer.sep_token_id,
            mask_token_id=tokenizer.mask_token_id,
        )
        config._attn_implementation = "sdpa"
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            ModernBertModel(config).save_pretrained(str(folder))
        transformer = Transformer(
            str(folder), max_seq_length=max_position, model_kwargs={"attn_implementation": "sdpa"}
        )
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), "mean"), Normalize()]
    model = SentenceTransformer(modules=modules, device=str(pick_device(device)))
    model.max_seq_length = max_position
    return model
