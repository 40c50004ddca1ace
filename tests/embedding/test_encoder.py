"""Late-chunking encoder: layouts, pooling against hand computations, windows, modes, gradients; model loading."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # module-scoped fixtures load models before the autouse env fixture

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformer

import embedding.encoder as encoder_module
from embedding.encoder import LateChunkingEncoder
from embedding.models import ModelIntegrityError, load_model, load_offline_minilm, pick_device, verify_sha256
from embedding.windows import PoolingPolicy, Window
from tests.support.tiny_models import tiny_modernbert

CHUNKS = ["Hello world.", "It is big.", "The end"]
LONG_DOC = [
    f"Paragraph {i} talks about topic number {i} and then continues with several more words to fill space."
    for i in range(12)
]


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformer:
    return load_offline_minilm(device="cpu").eval()


@pytest.fixture(scope="module")
def modernbert() -> SentenceTransformer:
    return tiny_modernbert(seed=0, device="cpu").eval()


def ids(model: SentenceTransformer, text: str) -> list[int]:
    return model.tokenizer(text, add_special_tokens=False)["input_ids"]


def hand_vectors(model: SentenceTransformer, window: Window, chunks: list[int], with_cls: bool) -> torch.Tensor:
    """Mean of the transformer's last hidden states over each chunk's span (plus [CLS] for the window's first)."""
    transformer = model[0].auto_model
    with torch.no_grad():
        hidden = transformer(
            input_ids=torch.tensor([window.input_ids]), attention_mask=torch.ones(1, len(window.input_ids))
        ).last_hidden_state[0]
    out = []
    for chunk in chunks:
        k = window.chunk_ids.index(chunk)
        start, end = window.spans[k]
        positions = list(range(start, end))
        if with_cls and k == 0:
            positions = [0, *positions]
        out.append(F.normalize(hidden[positions].mean(0), dim=-1))
    return torch.stack(out)


# ---------------------------------------------------------------- layout


@pytest.mark.parametrize("boundaries", ["separator", "offsets"])
def test_layout_exact_ids_and_spans(minilm: SentenceTransformer, boundaries: str) -> None:
    enc = LateChunkingEncoder(minilm, PoolingPolicy(boundaries=boundaries))
    (window,) = enc.layout(CHUNKS)
    c1, c2, c3 = (ids(minilm, c) for c in CHUNKS)
    assert c1 == [7592, 2088, 1012]  # hello world .
    cls, sep = minilm.tokenizer.cls_token_id, minilm.tokenizer.sep_token_id
    assert window.input_ids == [cls, *c1, sep, *c2, sep, *c3, sep]
    assert window.spans == [(1, 4), (5, 9), (10, 12)]
    assert window.chunk_ids == [0, 1, 2] and window.owned == [0, 1, 2]
    assert window.cls_in_first  # [CLS] pooled into the first chunk only; separators lie outside every span
    for start, end in window.spans:
        assert sep not in window.input_ids[start:end] and cls not in window.input_ids[start:end]


def test_offsets_keep_tokenization_of_the_joined_text(minilm: SentenceTransformer) -> None:
    enc = LateChunkingEncoder(minilm, PoolingPolicy(boundaries="offsets"))
    chunks = ["Café au lait,", "naïve résumé"]
    (window,) = enc.layout(chunks)
    joined = minilm.tokenizer(minilm.tokenizer.sep_token.join(chunks))["input_ids"]
    assert window.input_ids == joined
    (_a, b), (c, d) = window.spans
    assert window.input_ids[b] == minilm.tokenizer.sep_token_id and c == b + 1 and d == len(joined) - 1


def test_prefix_and_exclude_special(minilm: SentenceTransformer) -> None:
    enc = LateChunkingEncoder(minilm, document_prefix="search_document: ")
    (window,) = enc.layout(CHUNKS)
    prefix = ids(minilm, "search_document: ")
    assert window.input_ids[1 : 1 + len(prefix)] == prefix
    assert window.spans[0] == (1 + len(prefix), 1 + len(prefix) + 3)
    # Public code with a prefix: [CLS] and the prefix are cut off before pooling, so chunk 0 has no [CLS].
    assert not window.cls_in_first
    got = enc.encode_documents([CHUNKS])[0]
    np.testing.assert_allclose(got, hand_vectors(minilm, window, [0, 1, 2], with_cls=False).numpy(), atol=1e-5)
    with_cls = hand_vectors(minilm, window, [0], with_cls=True)[0].numpy()
    assert np.abs(got[0] - with_cls).max() > 1e-3  # the rule is observable
    (tokens,) = enc.forward_document_tokens([CHUNKS])
    assert tokens[0].shape[0] == 3  # chunk 0's own tokens only
    kept = LateChunkingEncoder(minilm, PoolingPolicy(cls_with_prefix=True), document_prefix="search_document: ")
    (window,) = kept.layout(CHUNKS)
    assert window.cls_in_first
    np.testing.assert_allclose(kept.encode_documents([CHUNKS])[0][0], with_cls, atol=1e-5)

    plain = LateChunkingEncoder(minilm, PoolingPolicy(exclude_special=True))
    (window,) = plain.layout(CHUNKS)
    assert not window.cls_in_first
    got = plain.encode_documents([CHUNKS])[0]
    np.testing.assert_allclose(got, hand_vectors(minilm, window, [0, 1, 2], with_cls=False).numpy(), atol=1e-5)


# ---------------------------------------------------------------- pooling


@pytest.mark.parametrize("name", ["minilm", "modernbert"])
def test_pooled_vectors_equal_hand_mean(name: str, request: pytest.FixtureRequest) -> None:
    model = request.getfixturevalue(name)
    enc = LateChunkingEncoder(model)
    (window,) = enc.layout(LONG_DOC[:4])
    expected = hand_vectors(model, window, [0, 1, 2, 3], with_cls=True)
    np.testing.assert_allclose(enc.encode_documents([LONG_DOC[:4]])[0], expected.numpy(), atol=1e-5)
    trained = enc.forward_documents([LONG_DOC[:4]])[0]
    np.testing.assert_allclose(trained.detach().numpy(), expected.numpy(), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(enc.encode_documents([LONG_DOC[:4]])[0], axis=1), 1.0, atol=1e-5)


# ---------------------------------------------------------------- windows


def test_windows_cover_each_chunk_once_and_match_hand_mean(minilm: SentenceTransformer) -> None:
    enc = LateChunkingEncoder(minilm, max_length=64, window_overlap_chunks=2)
    enc.planner.ownership = "balanced"  # the rule checked at the end (every rule: test_ownership_rules_...)
    windows = enc.layout(LONG_DOC)
    assert len(windows) > 1
    assert all(len(w.input_ids) <= 64 for w in windows)
    owned = sorted(c for w in windows for c in w.owned)
    assert owned == list(range(len(LONG_DOC)))
    for before, after in itertools.pairwise(windows):  # consecutive windows share whole chunks
        assert after.chunk_ids[0] <= before.chunk_ids[-1]
    vectors = enc.encode_documents([LONG_DOC])[0]
    assert vectors.shape == (len(LONG_DOC), 384)
    for window in windows:
        expected = hand_vectors(minilm, window, window.owned, with_cls=True)
        np.testing.assert_allclose(vectors[window.owned], expected.numpy(), atol=1e-5)
    # Ownership rule "balanced": the window where the chunk has the most context on its poorer side.
    for chunk in range(len(LONG_DOC)):
        contexts = [
            (min(w.spans[w.chunk_ids.index(chunk)][0], len(w.input_ids) - w.spans[w.chunk_ids.index(chunk)][1]), -i)
            for i, w in enumerate(windows)
            if chunk in w.chunk_ids
        ]
        assert chunk in windows[-max(contexts)[1]].owned


@pytest.mark.parametrize("policy", ["plain", "anchored"])
def test_ownership_rules_pick_the_window_they_say(minilm: SentenceTransformer, policy: str) -> None:
    """earliest: the first window holding the chunk; head: a window holding the document's head (the first, or an
    anchored one), then the most context on the poorer side; balanced: that context alone. Ties: the earlier."""
    picked = {}
    for rule in ("balanced", "earliest", "head"):
        enc = LateChunkingEncoder(minilm, max_length=96, window_overlap_chunks=2, window_policy=policy)
        enc.planner.ownership = rule
        windows = enc.layout(LONG_DOC, title="Topics")
        assert sorted(c for w in windows for c in w.owned) == list(range(len(LONG_DOC)))
        picked[rule] = {c: i for i, w in enumerate(windows) for c in w.owned}

        def context(w: Window, chunk: int) -> int:
            start, end = w.spans[w.chunk_ids.index(chunk)]
            return min(start, len(w.input_ids) - end)

        for chunk in range(len(LONG_DOC)):
            holders = [i for i, w in enumerate(windows) if chunk in w.chunk_ids]
            if rule == "earliest":
                expected = holders[0]
            else:
                with_head = [i for i in holders if i == 0 or windows[i].head is not None]
                pool = with_head if rule == "head" and with_head else holders
                expected = max(pool, key=lambda i: (context(windows[i], chunk), -i))
            assert picked[rule][chunk] == expected, (rule, chunk, holders)
    assert picked["earliest"] != picked["balanced"]  # the rules differ on this document
    if policy == "plain":
        first = {c for c, i in picked["earliest"].items() if i == 0}
        assert first == {c for c, i in picked["head"].items() if i == 0}  # plain: only the first window has the head


def test_single_window_equals_one_pass(minilm: SentenceTransformer) -> None:
    doc = LONG_DOC[:5]
    one_pass = LateChunkingEncoder(minilm, max_length=512)
    (window,) = one_pass.layout(doc)
    exact = LateChunkingEncoder(minilm, max_length=len(window.input_ids))  # fits exactly: still one window
    assert len(exact.layout(doc)) == 1
    np.testing.assert_array_equal(exact.encode_documents([doc])[0], one_pass.encode_documents([doc])[0])
    assert len(LateChunkingEncoder(minilm, max_length=len(window.input_ids) - 1).layout(doc)) == 2


def test_oversize_chunk_is_truncated_and_counted(minilm: SentenceTransformer) -> None:
    enc = LateChunkingEncoder(minilm, max_length=64)
    doc = ["short start.", "word " * 200, "short end."]
    windows = enc.layout(doc)
    assert enc.truncated_chunks == 1
    assert all(len(w.input_ids) <= 64 for w in windows)
    assert sorted(c for w in windows for c in w.owned) == [0, 1, 2]
    assert enc.encode_documents([doc])[0].shape == (3, 384)


# ---------------------------------------------------------------- anchored windows


def anchored(model: SentenceTransformer, **kwargs) -> LateChunkingEncoder:
    return LateChunkingEncoder(model, window_policy="anchored", **kwargs)


def test_anchored_layout_positions(minilm: SentenceTransformer) -> None:
    enc = anchored(minilm, max_length=64, anchor_share=0.4)
    plain = LateChunkingEncoder(minilm, max_length=64).layout(LONG_DOC)
    windows = enc.layout(LONG_DOC, title="Topic survey")
    cls, sep = minilm.tokenizer.cls_token_id, minilm.tokenizer.sep_token_id
    head = [*ids(minilm, "Topic survey"), *ids(minilm, LONG_DOC[0])][: int(0.4 * 64)]
    assert len(head) == 20 and enc.head_cap == 25  # 2 title + 18 chunk tokens, under the cap
    first = windows[0]  # the window from chunk 0 is exactly the plain one
    assert (first.input_ids, first.spans, first.chunk_ids, first.head) == (
        plain[0].input_ids,
        plain[0].spans,
        plain[0].chunk_ids,
        None,
    )
    assert first.cls_in_first and len(windows) > 2
    for window in windows[1:]:
        assert window.chunk_ids[0] > 0 and not window.cls_in_first
        assert window.head == (1, 1 + len(head))
        assert window.input_ids[: 2 + len(head)] == [cls, *head, sep]
        assert len(window.input_ids) <= 64
        cursor = 2 + len(head)
        for chunk, (start, end) in zip(window.chunk_ids, window.spans, strict=True):
            assert start == cursor and window.input_ids[start:end] == ids(minilm, LONG_DOC[chunk])
            assert window.input_ids[end] == sep
            cursor = end + 1
        assert cursor == len(window.input_ids)
    assert sorted(c for w in windows for c in w.owned) == list(range(len(LONG_DOC)))
    assert enc.anchor_tokens == len(head) * (len(windows) - 1)


def test_anchored_head_is_attended_never_pooled(minilm: SentenceTransformer) -> None:
    enc = anchored(minilm, max_length=64)
    windows = enc.layout(LONG_DOC, title="Topic survey")
    vectors = enc.encode_documents([LONG_DOC], titles=["Topic survey"])[0]
    plain_vectors = LateChunkingEncoder(minilm, max_length=64).encode_documents([LONG_DOC])[0]
    for window in windows:
        expected = hand_vectors(minilm, window, window.owned, with_cls=window.cls_in_first)
        np.testing.assert_allclose(vectors[window.owned], expected.numpy(), atol=1e-5)
    window = windows[3]
    a, b = window.head
    assert all(end <= a or start >= b for start, end in window.spans)  # head outside every pooled span
    # Pooling the head too would give another vector: the check above can fail.
    transformer = minilm[0].auto_model
    with torch.no_grad():
        hidden = transformer(input_ids=torch.tensor([window.input_ids])).last_hidden_state[0]
    k = window.chunk_ids.index(window.owned[0])
    start, end = window.spans[k]
    with_head = F.normalize(hidden[[*range(a, b), *range(start, end)]].mean(0), dim=-1).numpy()
    assert np.abs(vectors[window.owned[0]] - with_head).max() > 1e-3
    # The head is attended to: later chunks differ from the plain windows' vectors.
    assert np.abs(vectors[5:] - plain_vectors[5:]).max() > 1e-3
    np.testing.assert_array_equal(vectors[windows[0].owned], plain_vectors[windows[0].owned])


@pytest.mark.parametrize("name", ["minilm", "modernbert"])
def test_anchored_one_window_equals_plain_bitwise(name: str, request: pytest.FixtureRequest) -> None:
    model = request.getfixturevalue(name)
    docs, titles = [LONG_DOC[:4], CHUNKS], ["A title", None]
    plain = LateChunkingEncoder(model)
    enc = anchored(model)
    assert all(len(enc.layout(d, title=t)) == 1 for d, t in zip(docs, titles, strict=True))
    for got, want in zip(enc.encode_documents(docs, titles=titles), plain.encode_documents(docs), strict=True):
        np.testing.assert_array_equal(got, want)
    got_tokens = enc.encode_document_tokens(docs, titles=titles)
    for got, want in zip(got_tokens, plain.encode_document_tokens(docs), strict=True):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
    assert enc.anchor_tokens == 0


def test_anchored_title_absent_blank_and_cap(minilm: SentenceTransformer) -> None:
    chunk0 = ids(minilm, LONG_DOC[0])
    no_title = anchored(minilm, max_length=64).layout(LONG_DOC)
    blank = anchored(minilm, max_length=64).layout(LONG_DOC, title="  ")
    titled = anchored(minilm, max_length=64).layout(LONG_DOC, title="Topic survey")
    a, b = no_title[1].head
    assert no_title[1].input_ids[a:b] == chunk0 and blank[1].input_ids == no_title[1].input_ids
    a, b = titled[1].head
    assert titled[1].input_ids[a:b][:2] == ids(minilm, "Topic survey")
    small = anchored(minilm, max_length=64, anchor_share=0.1)  # cap floor(6.4) = 6 tokens
    windows = small.layout(LONG_DOC, title="Topic survey")
    assert all(w.head == (1, 7) for w in windows[1:])
    assert windows[1].input_ids[1:7] == [*ids(minilm, "Topic survey"), *chunk0][:6]
    # The plain policy ignores titles.
    plain = LateChunkingEncoder(minilm, max_length=64)
    assert [w.input_ids for w in plain.layout(LONG_DOC, title="Topic survey")] == [
        w.input_ids for w in plain.layout(LONG_DOC)
    ]


def test_anchored_head_cut_next_to_a_long_chunk(minilm: SentenceTransformer) -> None:
    enc = anchored(minilm, max_length=64, anchor_share=0.5)
    long_chunk = "word " * 50  # fits a plain window, not next to a full head
    doc = [LONG_DOC[0], LONG_DOC[1], long_chunk, "short end."]
    n_long = len(ids(minilm, long_chunk))
    assert n_long <= 62 and n_long + 3 + len(ids(minilm, LONG_DOC[0])) > 64
    windows = enc.layout(doc)
    assert all(len(w.input_ids) <= 64 for w in windows)
    holder = next(w for w in windows if w.chunk_ids == [2])
    assert holder.head is not None and holder.head[1] - holder.head[0] == 64 - 3 - n_long  # head cut to what fits
    assert len(holder.input_ids) == 64 and windows[-1].head == (1, 1 + len(ids(minilm, LONG_DOC[0])))
    assert sorted(c for w in windows for c in w.owned) == [0, 1, 2, 3]
    assert enc.truncated_chunks == 0


def test_anchored_token_mode_positions(minilm: SentenceTransformer) -> None:
    enc = anchored(minilm, max_length=64)
    windows = enc.layout(LONG_DOC, title="Topic survey")
    (per_chunk,) = enc.forward_document_tokens([LONG_DOC], titles=["Topic survey"])
    transformer = minilm[0].auto_model
    for window in windows:
        with torch.no_grad():
            hidden = transformer(input_ids=torch.tensor([window.input_ids])).last_hidden_state[0]
        for chunk in window.owned:
            k = window.chunk_ids.index(chunk)
            start, end = window.spans[k]
            positions = [0, *range(start, end)] if k == 0 and window.cls_in_first else list(range(start, end))
            expected = F.normalize(hidden[positions], dim=-1)
            np.testing.assert_allclose(per_chunk[chunk].detach().numpy(), expected.numpy(), atol=1e-5)


def test_anchored_training_path_and_counters(modernbert: SentenceTransformer) -> None:
    enc = anchored(modernbert, max_length=48)
    vectors = enc.forward_documents([LONG_DOC[:6], CHUNKS], titles=["Topics", None])
    assert [v.shape for v in vectors] == [(6, 64), (3, 64)] and vectors[0].requires_grad
    layout = enc.layout(LONG_DOC[:6], title="Topics")
    assert len(layout) > 1 and all(w.head for w in layout[1:])
    assert enc.forwarded_windows == len(layout) + 1
    assert enc.forwarded_tokens == sum(len(w.input_ids) for w in layout) + len(enc.layout(CHUNKS)[0].input_ids)
    with pytest.raises(ValueError, match="titles"):
        enc.encode_documents([CHUNKS], titles=["a", "b"])
    with pytest.raises(ValueError, match="window_policy"):
        LateChunkingEncoder(modernbert, window_policy="sliding")  # type: ignore[arg-type]
    for share in (0.0, 1.0):
        with pytest.raises(ValueError, match="anchor_share"):
            anchored(modernbert, anchor_share=share)


# ---------------------------------------------------------------- modes, order, batching


def test_independent_equals_model_encode(minilm: SentenceTransformer) -> None:
    enc = LateChunkingEncoder(minilm)
    got = enc.encode_documents([CHUNKS, LONG_DOC[:3]], mode="independent")
    np.testing.assert_allclose(got[0], minilm.encode(CHUNKS), atol=1e-5)
    np.testing.assert_allclose(got[1], minilm.encode(LONG_DOC[:3]), atol=1e-5)
    # "policy": a one-chunk document pooled by the late-chunking rules ([CLS] + chunk tokens, no [SEP]).
    policy = LateChunkingEncoder(minilm, PoolingPolicy(independent_pool="policy"))
    single = policy.encode_documents([CHUNKS], mode="independent")[0]
    for i, chunk in enumerate(CHUNKS):
        (window,) = policy.layout([chunk])
        np.testing.assert_allclose(single[i], hand_vectors(minilm, window, [0], with_cls=True)[0].numpy(), atol=1e-5)


def test_order_restored_across_sorted_batches(minilm: SentenceTransformer) -> None:
    docs = [LONG_DOC[:1], LONG_DOC[:6], CHUNKS, LONG_DOC[2:4], ["one"]]
    enc = LateChunkingEncoder(minilm, token_budget=200)  # several batches, sorted by length
    together = enc.encode_documents(docs)
    for doc, got in zip(docs, together, strict=True):
        np.testing.assert_allclose(got, enc.encode_documents([doc])[0], atol=1e-5)
    assert [len(x) for x in together] == [len(d) for d in docs]
    lengths = [130, 20, 70, 90, 10]
    for batch in enc._batches(lengths):
        assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= 200
    flags = [m.training for m in minilm.modules()]
    minilm.train()  # inference restores each module's own flag afterwards
    enc.encode_documents([CHUNKS])
    assert all(m.training for m in minilm.modules())
    for module, flag in zip(minilm.modules(), flags, strict=True):
        module.training = flag
    queries = ["short", "a much longer query about something", "mid length one"]
    np.testing.assert_allclose(enc.encode_queries(queries, batch_size=2), minilm.encode(queries), atol=1e-5)


# ---------------------------------------------------------------- training paths


def test_forward_documents_has_gradients(modernbert: SentenceTransformer) -> None:
    enc = LateChunkingEncoder(modernbert, max_length=48)
    vectors = enc.forward_documents([LONG_DOC[:4], CHUNKS])
    assert [v.shape for v in vectors] == [(4, 64), (3, 64)]
    queries = enc.forward_queries(["what topic?", "hello"])
    assert queries.shape == (2, 64) and queries.requires_grad
    loss = (queries[0] @ vectors[0].T).sum() + (queries[1] @ vectors[1].T).sum()
    modernbert.zero_grad()
    loss.backward()
    grads = [p.grad for p in modernbert.parameters() if p.requires_grad]
    assert all(g is not None for g in grads) and sum(float(g.abs().sum()) for g in grads) > 0


def test_token_mode_shapes_and_masks(minilm: SentenceTransformer) -> None:
    enc = LateChunkingEncoder(minilm)
    (per_chunk,) = enc.forward_document_tokens([CHUNKS])
    # First chunk: [CLS] + its 3 tokens; others: their own tokens only.
    assert [t.shape[0] for t in per_chunk] == [4, 4, 2]
    assert all(t.shape[1] == 384 for t in per_chunk)
    np.testing.assert_allclose(torch.cat(per_chunk).norm(dim=-1).detach().numpy(), 1.0, atol=1e-5)
    pooled = F.normalize(per_chunk[1].detach().mean(0), dim=-1)  # not the same as pooling normalised tokens
    assert pooled.shape == (384,)
    tokens, mask = enc.forward_query_tokens(["hi there", "a longer query here"])
    assert tokens.shape[:2] == mask.shape == (2, 6)
    assert mask.sum(1).tolist() == [4, 6]
    assert float(tokens[0, 4:].detach().abs().sum()) == 0.0


def test_empty_document_and_a_chunk_without_owner(minilm: SentenceTransformer) -> None:
    enc = LateChunkingEncoder(minilm)
    assert enc.dimension == 384
    assert [v.shape for v in enc.encode_documents([[], CHUNKS])] == [(0, 384), (3, 384)]
    (window,) = enc.layout(CHUNKS)
    window.owned[:] = [2]  # chunks 0 and 1 owned by no window: a planner bug, never a silent gap
    with pytest.raises(RuntimeError, match="2 chunk"):
        enc._run([[window]], tokens=False)


# ---------------------------------------------------------------- models


def test_cpu_when_no_cuda(monkeypatch: pytest.MonkeyPatch, minilm: SentenceTransformer) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick_device() == torch.device("cpu")
    assert pick_device("cuda") == torch.device("cpu")
    assert minilm.device.type == "cpu" and minilm.max_seq_length == 512
    assert LateChunkingEncoder(minilm).max_length == 512


def test_checksum_mismatch_names_the_file(tmp_path: Path) -> None:
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"not the weights")
    with pytest.raises(ModelIntegrityError, match=r"model\.safetensors"):
        verify_sha256(weights, "0" * 64)


def test_load_model_and_tiny_modernbert_round_trip(tmp_path: Path, modernbert: SentenceTransformer) -> None:
    assert load_model("offline-minilm", max_seq_length=128).max_seq_length == 128
    config = modernbert[0].auto_model.config
    tok = modernbert.tokenizer
    assert config.vocab_size == len(tok)
    assert (config.cls_token_id, config.sep_token_id, config.pad_token_id) == (
        tok.cls_token_id,
        tok.sep_token_id,
        tok.pad_token_id,
    )
    assert config._attn_implementation == "sdpa"
    modernbert.save(str(tmp_path / "tiny"))
    reloaded = SentenceTransformer(str(tmp_path / "tiny"), device="cpu")
    np.testing.assert_allclose(reloaded.encode(CHUNKS), modernbert.encode(CHUNKS), atol=1e-6)
    same_seed = tiny_modernbert(seed=0, device="cpu")
    np.testing.assert_array_equal(same_seed.encode(CHUNKS), modernbert.encode(CHUNKS))


def test_progress_bars_say_label_then_phase_or_the_phase_alone(
    minilm: SentenceTransformer, monkeypatch: pytest.MonkeyPatch
) -> None:
    descs: list[str] = []

    def recording(iterable, desc: str, disable: bool):  # the bar's description, whatever shows it
        descs.append(desc)
        return iterable

    monkeypatch.setattr(encoder_module, "tqdm", recording)
    enc = LateChunkingEncoder(minilm)
    enc.encode_documents([CHUNKS], show_progress=True)  # a direct library call: no system to name
    enc.encode_documents([CHUNKS], mode="independent", show_progress=True, progress_label="independent")
    enc.encode_queries(["a query"], show_progress=True, progress_label="title-prefix")
    enc.encode_query_tokens(["a query"], show_progress=True)
    assert descs == ["documents", "independent: chunks", "title-prefix: queries", "query tokens"]
