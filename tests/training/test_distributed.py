"""What training/distributed.py's docstring says of the models it wraps, in one process (the torchrun runs are
tests/training/test_ddp.py's): which parameters need ``find_unused_parameters``, and that no buffer changes in a
training step (so DDP need not sync buffers at each forward)."""

from __future__ import annotations

import torch
from transformers import BertConfig, BertModel

from embedding.models import offline_minilm_path
from tests.support.tiny_models import tiny_modernbert
from training.distributed import unused_parameters


def test_unused_parameters_are_those_the_token_states_do_not_reach() -> None:
    config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    bert = BertModel(config)  # its pooler reads the [CLS] state: no token state depends on it
    assert unused_parameters(bert, bert, pad_id=0) == ["pooler.dense.weight", "pooler.dense.bias"]
    tiny = tiny_modernbert(offline_minilm_path(), device="cpu")
    assert unused_parameters(tiny, tiny[0].auto_model, pad_id=0) == []
    dense = torch.nn.ModuleDict({"model": tiny, "dense": torch.nn.Linear(64, 8)})  # a Dense module after pooling
    assert unused_parameters(dense, tiny[0].auto_model, pad_id=0) == ["dense.weight", "dense.bias"]


def test_a_training_step_changes_no_buffer() -> None:
    tiny = tiny_modernbert(offline_minilm_path(), device="cpu")
    assert not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in tiny.modules())
    before = {name: buffer.clone() for name, buffer in tiny.named_buffers()}
    tiny.train()
    features = tiny.tokenize(["a query", "a longer document about rivers and towns"])
    tiny(features)["sentence_embedding"].sum().backward()
    assert before and all(torch.equal(buffer, before[name]) for name, buffer in tiny.named_buffers())
