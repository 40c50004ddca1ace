"""Training with the title header (``header: title``): the chunk texts the encoder reads, the header's tokens inside
each chunk's span of the late-chunking sequence (pooled with the chunk), the anchored head, and what the trained model
records. Checked against the real MiniLM tokenizer and model, no stand-ins."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from embedding.encoder import LateChunkingEncoder
from embedding.models import load_model
from evaluation.config import DEFAULT_TITLE_TEMPLATE
from evaluation.systems.headers import header_text
from tests.training.test_data import build_sample_conteb
from training.config import TrainingConfigError, from_cli, make_config
from training.data import TrainingSample, chunk_texts, encoder_inputs, load_samples


@pytest.fixture(scope="module")
def sample_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_sample_conteb(tmp_path_factory.mktemp("header") / "sample", splits={"train": 0.5, "test": 0.5})


@pytest.fixture(scope="module")
def minilm():
    return load_model("offline-minilm", device="cpu")


def _encoder(model, policy: str) -> LateChunkingEncoder:
    return LateChunkingEncoder(model, max_length=512, window_overlap_chunks=0, window_policy=policy)


def _longest(folder: Path) -> TrainingSample:
    samples, _ = load_samples([folder], split="train")
    return max((s for s in samples if s.title), key=lambda s: sum(len(c) for c in s.chunks))


def test_the_config_takes_the_evaluation_header_option(sample_folder: Path, tmp_path: Path) -> None:
    config = make_config({"data": [sample_folder], "output": tmp_path / "m", "header": "title"})
    assert config.header == "title" and config.title_template == DEFAULT_TITLE_TEMPLATE
    assert from_cli(["--data", str(sample_folder), "--output", str(tmp_path), "--header", "title"]).header == "title"
    with pytest.raises(TrainingConfigError, match="header"):
        make_config({"data": [sample_folder], "output": tmp_path / "m", "header": "summary"})
    with pytest.raises(TrainingConfigError, match="title_template"):
        make_config({"data": [sample_folder], "output": tmp_path / "m", "title_template": "{title} only"})


def test_chunk_texts_are_the_evaluation_header_texts(sample_folder: Path) -> None:
    sample = _longest(sample_folder)
    assert chunk_texts(sample, None, DEFAULT_TITLE_TEMPLATE) == sample.chunks
    texts = chunk_texts(sample, "title", DEFAULT_TITLE_TEMPLATE)
    assert texts == [header_text(DEFAULT_TITLE_TEMPLATE, sample.title, chunk) for chunk in sample.chunks]
    assert all(text.startswith(f"{sample.title}\n\n") for text in texts)
    untitled = TrainingSample("x", ["one chunk", "two"], title="  ")
    assert chunk_texts(untitled, "title", DEFAULT_TITLE_TEMPLATE) == ["one chunk", "two"]  # blank title: as is
    docs, titles = encoder_inputs([sample, untitled], "title", DEFAULT_TITLE_TEMPLATE)
    assert docs[0] == texts and titles is None  # the anchored head is the first chunk's header text
    assert encoder_inputs([sample], None, DEFAULT_TITLE_TEMPLATE) == ([sample.chunks], [sample.title])


@pytest.mark.parametrize("policy", ["plain", "anchored"])
def test_each_chunk_span_carries_the_title_tokens_and_pools_them(sample_folder: Path, minilm, policy: str) -> None:
    sample = _longest(sample_folder)
    encoder = _encoder(minilm, policy)
    tokenizer = minilm.tokenizer
    title_ids = tokenizer(sample.title.strip(), add_special_tokens=False)["input_ids"]
    docs, titles = encoder_inputs([sample], "title", DEFAULT_TITLE_TEMPLATE)
    windows = encoder.layout(docs[0], None if titles is None else titles[0])
    assert len(windows) > 1, "the test needs a document read in several windows"
    for window in windows:
        for chunk, (start, end) in zip(window.chunk_ids, window.spans, strict=True):
            chunk_ids = tokenizer(sample.chunks[chunk], add_special_tokens=False)["input_ids"]
            assert window.input_ids[start:end] == title_ids + chunk_ids  # the header, then the chunk: one span
    later = windows[1:]
    if policy == "anchored":
        first_ids = tokenizer(sample.chunks[0], add_special_tokens=False)["input_ids"]
        head = (title_ids + first_ids)[: encoder.head_cap]  # the first chunk's header text, the title once
        for window in later:
            assert window.head is not None and window.input_ids[slice(*window.head)] == head
    else:
        assert all(window.head is None for window in later)

    # pooled with the chunk: the vector of a chunk of a later window is the mean of the model's hidden states over
    # its whole span, the title's tokens included (not over the chunk's own tokens alone); a window's [CLS] goes with
    # its first chunk where the window says so (plain windows)
    window = later[0]
    k = window.chunk_ids.index(window.owned[0])
    start, end = window.spans[k]
    minilm.eval()
    with torch.inference_mode():
        vectors = encoder.forward_documents(docs, mode="late", titles=titles)[0]
        hidden = minilm[0].auto_model(input_ids=torch.tensor([window.input_ids])).last_hidden_state[0]

    cls = [0] if k == 0 and window.cls_in_first else []

    def pooled(positions: range) -> np.ndarray:
        mean = hidden[cls + list(positions)].mean(0)
        return (mean / mean.norm()).numpy()

    got = vectors[window.owned[0]].float().numpy()
    np.testing.assert_allclose(got, pooled(range(start, end)), atol=1e-4)
    assert not np.allclose(got, pooled(range(start + len(title_ids), end)), atol=1e-3)


def test_the_model_folder_records_how_it_was_trained(sample_folder: Path, tmp_path: Path) -> None:
    from embedding.models import offline_minilm_path
    from tests.support.tiny_models import tiny_modernbert
    from training.loop import train

    base = tmp_path / "tiny"
    tiny_modernbert(offline_minilm_path(), seed=0, device="cpu").save(str(base))
    config = make_config(
        {
            "data": [sample_folder],
            "base_model": str(base),
            "output": tmp_path / "model",
            "max_steps": 1,
            "eval_every": 0,
            "checkpoint_every": 0,
            "batch_docs": 2,
            "window_policy": "anchored",
            "header": "title",
            "device": "cpu",
        }
    )
    result = train(config)
    assert result.steps == 1 and np.isfinite(result.final_loss)
    card = (tmp_path / "model" / "README.md").read_text()
    assert "| header | `title` |" in card and "| window_policy | `anchored` |" in card
    assert "Each chunk was read under its document's title (`header: title`" in card
    front = yaml.safe_load(card.split("---")[1])
    assert front["base_model"] == str(base)
