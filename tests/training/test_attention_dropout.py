"""``set_attention_dropout`` rebuilds the transformer with new attention dropout and the same weights;
``hf_backbone`` finds that transformer."""

from __future__ import annotations

import pytest
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Normalize

from embedding.models import hf_backbone, load_offline_minilm, set_attention_dropout
from tests.support.tiny_models import tiny_modernbert


def test_backbone_is_the_first_modules_transformer() -> None:
    model = tiny_modernbert(seed=0, device="cpu")
    assert hf_backbone(model) is model[0].model
    with pytest.raises(TypeError, match=r"Normalize .* holds no Hugging Face transformer"):
        hf_backbone(SentenceTransformer(modules=[Normalize()], device="cpu"))


@pytest.mark.parametrize("build", ["minilm", "modernbert"])
def test_same_weights_new_dropout(build: str) -> None:
    model = load_offline_minilm(device="cpu") if build == "minilm" else tiny_modernbert(seed=0, device="cpu")
    model.train()
    before = {name: value.clone() for name, value in model[0].model.state_dict().items()}
    attention = model[0].model.config._attn_implementation
    previous = set_attention_dropout(model, 0.0)
    backbone = model[0].model
    assert backbone.training and backbone.config._attn_implementation == attention
    for key, value in previous.items():
        assert getattr(backbone.config, key) == 0.0 and value == (0.1 if build == "minilm" else 0.0)
    after = backbone.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    if build == "minilm":
        assert all(module.attention.self.dropout.p == 0.0 for module in backbone.encoder.layer), (
            "the attention-probability dropout modules were built with the new value"
        )
    model.eval()
    with torch.inference_mode():
        vectors = model.encode(["He became emperor in 1804."], convert_to_tensor=True)
    assert vectors.shape[0] == 1 and torch.isfinite(vectors).all()
