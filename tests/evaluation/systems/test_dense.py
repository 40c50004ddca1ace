"""Dense and contextual systems (``evaluation.systems.dense``) with the offline MiniLM and a tiny random model."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from conteb.schemas import SOURCE_DOCUMENTS, SOURCE_QUERIES, table_from_rows
from embedding.encoder import LateChunkingEncoder
from embedding.models import pick_device
from embedding.windows import PoolingPolicy
from evaluation.config import ContextualSystem, DenseSystem
from evaluation.indexed import NotRunnable
from evaluation.rechunk import rechunk_corpus
from evaluation.systems import embedders
from evaluation.systems.dense import document_rows, template_problem
from evaluation.systems.dispatch import prepare_system, requirement_problem
from evaluation.systems.embedders import load_cached, model_spec
from evaluation.targets import EvalTarget
from tests.evaluation.toy import DOCUMENTS, all_scores, progress_lines, save_tiny_model, toy_corpus

INDEPENDENT = DenseSystem(kind="dense", name="independent", context="independent")
LATE = DenseSystem(kind="dense", name="late", context="late")


@pytest.fixture(scope="module")
def minilm():
    model, _ = load_cached(model_spec(INDEPENDENT, Path(".")), pick_device(None))
    return model


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def test_independent_scores_equal_model_encode_cosine(minilm, tmp_path):
    corpus = toy_corpus()
    indexed = prepare_system(INDEPENDENT, corpus, tmp_path)
    expected = minilm.encode(corpus.queries) @ minilm.encode(corpus.chunks).T
    np.testing.assert_allclose(all_scores(indexed, corpus.n_queries), expected, atol=1e-5)
    assert indexed.description == "dense · independent chunks · offline-minilm (prefixes: none)"
    assert indexed.details["query_prefix"] == "" and indexed.details["query_prefix_source"] == "none"
    assert indexed.details["truncated_chunks"] == 0 and indexed.details["max_length"] == 512


def test_late_differs_from_independent_only_for_multi_chunk_documents(minilm, tmp_path):
    corpus = toy_corpus()
    independent = all_scores(prepare_system(INDEPENDENT, corpus, tmp_path), corpus.n_queries)
    late = all_scores(prepare_system(LATE, corpus, tmp_path), corpus.n_queries)
    single = corpus.chunk_ids.index("oslo_0")
    multi = [r for r in range(corpus.n_chunks) if r != single]
    assert np.abs(late[:, multi] - independent[:, multi]).min() > 1e-3
    # A one-chunk document has no context: its late vector is the chunk alone under the late-chunking pooling
    # rule ([CLS] + chunk tokens; independent mode also averages the final [SEP], as model.encode does).
    alone = LateChunkingEncoder(minilm, PoolingPolicy(independent_pool="policy")).encode_documents(
        [[corpus.chunks[single]]], mode="independent"
    )[0]
    query_vectors = minilm.encode(corpus.queries)
    np.testing.assert_allclose(late[:, single], query_vectors @ alone[0], atol=1e-5)
    np.testing.assert_allclose(late[:, single], independent[:, single], atol=0.05)


def test_rows_follow_corpus_order_whatever_it_is(tmp_path):
    order = [4, 0, 5, 2, 3, 1]
    straight, shuffled = toy_corpus(), toy_corpus(order=order)
    a = all_scores(prepare_system(LATE, straight, tmp_path), straight.n_queries)
    b = all_scores(prepare_system(LATE, shuffled, tmp_path), shuffled.n_queries)
    np.testing.assert_allclose(b, a[:, order], atol=1e-5)
    groups = document_rows(shuffled)
    assert [[shuffled.chunk_ids[r] for r in rows] for rows in groups] == [
        ["lyon_0", "lyon_1"],
        ["paris_0", "paris_1", "paris_2"],
        ["oslo_0"],
    ]


def test_configured_prefixes_are_applied(minilm, tmp_path):
    corpus = toy_corpus()
    system = DenseSystem(kind="dense", name="p", query_prefix="search_query: ", document_prefix="search_document: ")
    indexed = prepare_system(system, corpus, tmp_path)
    assert indexed.details["query_prefix"] == "search_query: "
    assert indexed.details["document_prefix_source"] == "config"
    assert "'search_query: '" in indexed.description
    plain = all_scores(prepare_system(INDEPENDENT, corpus, tmp_path), corpus.n_queries)
    scores = all_scores(indexed, corpus.n_queries)
    assert np.abs(scores - plain).max() > 1e-3
    expected = (
        minilm.encode(["search_query: " + q for q in corpus.queries])
        @ minilm.encode(["search_document: " + c for c in corpus.chunks]).T
    )
    np.testing.assert_allclose(scores, expected, atol=1e-5)


def test_model_folder_path_works(tiny_folder, tmp_path):
    corpus = toy_corpus()
    system = DenseSystem(kind="dense", name="tiny", model=str(tiny_folder), context="late")
    assert requirement_problem(system, corpus, tmp_path) is None
    indexed = prepare_system(system, corpus, tmp_path)
    scores = all_scores(indexed, corpus.n_queries)
    assert scores.shape == (3, 6) and np.isfinite(scores).all()
    assert indexed.details["model_path"] == str(tiny_folder.resolve())


def test_missing_model_folder_is_not_runnable(tmp_path):
    system = DenseSystem(kind="dense", name="gone", model=str(tmp_path / "nowhere"))
    reason = requirement_problem(system, toy_corpus(), tmp_path)
    assert reason == f"model folder {tmp_path / 'nowhere'} does not exist"
    with pytest.raises(NotRunnable, match="does not exist"):
        prepare_system(system, toy_corpus(), tmp_path)


def test_untrained_model_is_not_runnable(tmp_path):
    system = DenseSystem(kind="dense", name="insent", trained="insent_model", context="late")
    reason = requirement_problem(system, toy_corpus(), tmp_path)
    assert reason == (
        f"not trained yet: {tmp_path / 'insent_model'} does not exist; materialize insent_model (job train_insent)"
    )
    with pytest.raises(NotRunnable) as raised:
        prepare_system(system, toy_corpus(), tmp_path)
    assert str(raised.value) == reason
    (tmp_path / "insent_model" / "checkpoints").mkdir(parents=True)  # training under way: no saved model yet
    assert "holds no saved model" in requirement_problem(system, toy_corpus(), tmp_path)


def test_trained_model_folder_and_its_training_prefixes(tmp_path):
    save_tiny_model(tmp_path / "finetune_control_model")
    (tmp_path / "finetune_control_model.train.yaml").write_text("query_prefix: 'query: '\nlr: 5.0e-05\n")
    system = DenseSystem(kind="dense", name="control", trained="finetune_control_model")
    indexed = prepare_system(system, toy_corpus(), tmp_path)
    assert indexed.details["model"] == "finetune_control_model"
    assert indexed.details["query_prefix"] == "query: "
    assert indexed.details["query_prefix_source"].startswith("training config")
    assert indexed.details["document_prefix"] == ""


def test_hub_model_without_network_is_not_runnable(tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # read at import: set it for real
    system = DenseSystem(kind="dense", name="hub", model="nomic-ai/this-model-is-not-cached")
    assert requirement_problem(system, toy_corpus(), tmp_path) is None  # only loading can tell
    with pytest.raises(NotRunnable, match="cannot load model"):
        prepare_system(system, toy_corpus(), tmp_path)


# ------------------------------------------------------------------ contextual

CONTEXTS = {"paris_2": "From an article about Paris.", "lyon_1": "From an article about Lyon."}


def test_contextual_needs_contexts(tmp_path):
    system = ContextualSystem(kind="contextual", name="contextual")
    reason = requirement_problem(system, toy_corpus(), tmp_path)
    assert reason == "no LLM chunk contexts were given with this corpus"
    with pytest.raises(NotRunnable, match="no LLM chunk contexts"):
        prepare_system(system, toy_corpus(), tmp_path)


def test_the_not_run_reason_says_what_is_missing_for_the_target(tmp_path):
    """The reason is the target's (evaluation/targets.py): a task that sets chunk_contexts but was built without an
    LLM is told what to configure, not to set what it already sets."""
    data = tmp_path / "data"
    built_offline = EvalTarget("t", str(data / "conteb" / "t"), "test", data, chunk_contexts=True)
    reasons = {
        "set, not produced": built_offline.missing_contexts(),
        "not set": EvalTarget("t", "x", "test", data, chunk_contexts=False).missing_contexts(),
        "external": EvalTarget("t", "x", "test").missing_contexts(),
    }
    assert reasons["set, not produced"].startswith("chunk_contexts is set, but no contexts were produced")
    assert "set chunk_contexts" not in reasons["set, not produced"]
    for needed in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "llm.base_url", "make run"):
        assert needed in reasons["set, not produced"]
    assert reasons["not set"].startswith("the task does not set chunk_contexts: true")
    assert reasons["external"].startswith("an external dataset has no LLM chunk contexts")
    system = ContextualSystem(kind="contextual", name="contextual")
    corpus = toy_corpus()
    corpus.contexts_missing = reasons["set, not produced"]
    assert requirement_problem(system, corpus, tmp_path) == reasons["set, not produced"]
    assert corpus.chunks_of(corpus.doc_ids[:1]).contexts_missing == reasons["set, not produced"]  # encode shards


def test_contexts_change_the_vectors_and_missing_ones_are_counted(minilm, tmp_path):
    corpus = toy_corpus(contexts=CONTEXTS)
    indexed = prepare_system(ContextualSystem(kind="contextual", name="contextual"), corpus, tmp_path)
    assert indexed.details["chunks_without_context"] == 4
    assert indexed.description.startswith("contextual retrieval")
    scores = all_scores(indexed, corpus.n_queries)
    plain = all_scores(prepare_system(INDEPENDENT, corpus, tmp_path), corpus.n_queries)
    with_context = [corpus.chunk_ids.index(cid) for cid in CONTEXTS]
    without = [r for r in range(corpus.n_chunks) if r not in with_context]
    np.testing.assert_allclose(scores[:, without], plain[:, without], atol=1e-5)
    assert np.abs(scores[:, with_context] - plain[:, with_context]).min() > 1e-3
    texts = [f"{CONTEXTS[cid]}\n\n{corpus.chunks[corpus.chunk_ids.index(cid)]}" for cid in CONTEXTS]
    expected = minilm.encode(corpus.queries) @ minilm.encode(texts).T
    np.testing.assert_allclose(scores[:, with_context], expected, atol=1e-5)


def test_contextual_template_fields(tiny_folder, tmp_path):
    corpus = toy_corpus(contexts=CONTEXTS)
    system = ContextualSystem(kind="contextual", name="c", model=str(tiny_folder), template="{title}: {chunk}")
    assert prepare_system(system, corpus, tmp_path).details["template"] == "{title}: {chunk}"
    assert "unknown field" in template_problem("{context} {page} {chunk}")
    assert "does not contain {chunk}" in template_problem("{context}")
    bad = ContextualSystem(kind="contextual", name="c", template="{context} {doc}")
    assert "unknown field" in requirement_problem(bad, corpus, tmp_path)


def test_every_document_is_encoded(tmp_path):
    corpus = toy_corpus()
    logs: list[str] = []
    indexed = prepare_system(LATE, corpus, tmp_path, log=logs.append)
    assert any(f"encoded {corpus.n_chunks:,} chunks of {len(DOCUMENTS)} documents" in line for line in logs)
    assert indexed.index_seconds > 0 and indexed.query_seconds > 0


# ------------------------------------------------------------------ title prefix


TITLE = DenseSystem(kind="dense", name="title-prefix", context="title")


def test_title_prefix_embeds_title_then_chunk_and_counts_missing_titles(minilm, tmp_path):
    corpus = toy_corpus()
    corpus.titles[corpus.chunk_ids.index("oslo_0")] = None
    corpus.titles[corpus.chunk_ids.index("lyon_1")] = "  "
    indexed = prepare_system(TITLE, corpus, tmp_path)
    assert indexed.details["chunks_without_title"] == 2 and indexed.details["context"] == "title"
    assert indexed.details["title_template"] == "{title}\n\n{chunk}"
    assert indexed.description.startswith("dense · title + chunk, embedded independently · offline-minilm")
    texts = [
        chunk if not (title and title.strip()) else f"{title}\n\n{chunk}"
        for chunk, title in zip(corpus.chunks, corpus.titles, strict=True)
    ]
    assert texts[0] == "Paris\n\nParis is the capital of France and its largest city."
    expected = minilm.encode(corpus.queries) @ minilm.encode(texts).T
    scores = all_scores(indexed, corpus.n_queries)
    np.testing.assert_allclose(scores, expected, atol=1e-5)
    plain = all_scores(prepare_system(INDEPENDENT, corpus, tmp_path), corpus.n_queries)
    untitled = [corpus.chunk_ids.index(c) for c in ("oslo_0", "lyon_1")]
    titled = [r for r in range(corpus.n_chunks) if r not in untitled]
    np.testing.assert_allclose(scores[:, untitled], plain[:, untitled], atol=1e-5)
    assert np.abs(scores[:, titled] - plain[:, titled]).max(axis=0).min() > 1e-2  # every titled chunk moved


def test_title_template_is_validated_and_used(tiny_folder, tmp_path):
    system = DenseSystem(
        kind="dense", name="t", context="title", model=str(tiny_folder), title_template="{title}: {chunk}"
    )
    assert prepare_system(system, toy_corpus(), tmp_path).details["title_template"] == "{title}: {chunk}"
    for bad, reason in (("{title}", "must contain {chunk}"), ("{context} {chunk}", "unknown: \\['context'\\]")):
        with pytest.raises(ValidationError, match=reason):
            DenseSystem(kind="dense", name="t", context="title", title_template=bad)
    with pytest.raises(ValidationError, match="not a format string"):
        DenseSystem(kind="dense", name="t", context="title", title_template="{chunk")


# ------------------------------------------------------------------ anchored late chunking


def test_anchored_late_chunking_passes_document_titles(minilm, tmp_path):
    corpus = toy_corpus(order=[4, 0, 5, 2, 3, 1])  # rows shuffled: titles must follow documents
    corpus.titles[corpus.chunk_ids.index("lyon_1")] = "not the first chunk's title"
    anchored = DenseSystem(kind="dense", name="a", context="late", window_policy="anchored", max_length=24)
    plain = DenseSystem(kind="dense", name="p", context="late", max_length=24)
    indexed = prepare_system(anchored, corpus, tmp_path)
    details = indexed.details
    assert details["window_policy"] == "anchored" and details["anchor_share"] == 0.4
    assert details["anchor_tokens"] > 0 and details["windows"] > len(DOCUMENTS)
    assert details["tokens_forwarded"] >= details["anchor_tokens"]
    assert "(anchored windows)" in indexed.description
    encoder = LateChunkingEncoder(minilm, max_length=24, window_policy="anchored")
    documents = list(DOCUMENTS.values())
    titles = [doc.title() for doc in DOCUMENTS]  # each document's first chunk's title
    vectors = np.concatenate(encoder.encode_documents(documents, titles=titles))
    rows = [corpus.chunk_ids.index(f"{doc}_{i}") for doc, chunks in DOCUMENTS.items() for i in range(len(chunks))]
    expected = np.zeros_like(vectors)
    expected[rows] = vectors
    np.testing.assert_allclose(
        all_scores(indexed, corpus.n_queries), minilm.encode(corpus.queries) @ expected.T, atol=1e-5
    )
    plain_scores = all_scores(prepare_system(plain, corpus, tmp_path), corpus.n_queries)
    assert np.abs(all_scores(indexed, corpus.n_queries) - plain_scores).max() > 1e-3
    assert prepare_system(plain, corpus, tmp_path).details["anchor_tokens"] == 0


def test_anchored_equals_plain_when_documents_fit(tmp_path):
    corpus = toy_corpus()
    anchored = DenseSystem(kind="dense", name="a", context="late", window_policy="anchored")
    a = all_scores(prepare_system(anchored, corpus, tmp_path), corpus.n_queries)
    np.testing.assert_array_equal(a, all_scores(prepare_system(LATE, corpus, tmp_path), corpus.n_queries))


def test_rechunked_corpus_keeps_titles_for_title_systems(tmp_path):
    text = "Paris is the capital of France. " * 20 + "Its metro opened in 1900 for the fair. " * 10
    documents = table_from_rows(
        [{"doc_id": "paris", "title": "Paris", "text": text, "source": "t", "license": None, "metadata": None}],
        SOURCE_DOCUMENTS,
    )
    start = text.index("1900")
    queries = table_from_rows(
        [
            {
                "query_id": "q0",
                "doc_id": "paris",
                "query": "When did the metro open?",
                "answers": [{"text": "1900", "char_start": start}],
                "source": "t",
                "source_row": "0",
            }
        ],
        SOURCE_QUERIES,
    )
    corpus = rechunk_corpus(documents, queries, 300, name="paris")
    assert corpus.n_chunks > 2 and set(corpus.titles) == {"Paris"}
    assert prepare_system(TITLE, corpus, tmp_path).details["chunks_without_title"] == 0
    anchored = DenseSystem(kind="dense", name="a", context="late", window_policy="anchored", max_length=64)
    assert prepare_system(anchored, corpus, tmp_path).details["anchor_tokens"] > 0


# ------------------------------------------------------------------ header with windows (context: late, header: title)


def header_system(folder: Path, **options) -> DenseSystem:
    return DenseSystem(kind="dense", name="late-title", context="late", header="title", model=str(folder), **options)


def test_header_tokens_are_pooled_into_each_late_chunk(tiny_folder, tmp_path):
    """Against a hand-built layout: ``[CLS] t c_1 [SEP] t c_2 [SEP] ...`` with ``t c_i`` the ``{title}\\n\\n{chunk}``
    text, each chunk's vector the mean of its header-and-chunk token states (the first also [CLS])."""
    import torch
    import torch.nn.functional as F
    from sentence_transformers import SentenceTransformer

    from embedding.models import hf_backbone
    from evaluation.systems.dispatch import encode_system

    corpus = toy_corpus(order=[3, 0, 4, 5, 1, 2])  # rows shuffled: vectors must follow chunk ids
    vectors = encode_system(header_system(tiny_folder), corpus, tmp_path).vectors
    model = SentenceTransformer(str(tiny_folder), device="cpu").eval()
    tokenizer, backbone = model.tokenizer, hf_backbone(model)
    expected = np.zeros_like(vectors)
    for doc, chunks in DOCUMENTS.items():
        ids, spans = [tokenizer.cls_token_id], []
        for chunk in chunks:
            tokens = tokenizer(f"{doc.title()}\n\n{chunk}", add_special_tokens=False)["input_ids"]
            spans.append(range(len(ids), len(ids) + len(tokens)))
            ids += [*tokens, tokenizer.sep_token_id]
        with torch.no_grad():
            hidden = backbone(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids))).last_hidden_state[
                0
            ]
        title_tokens = tokenizer(doc.title(), add_special_tokens=False)["input_ids"]
        for i, span in enumerate(spans):
            assert [ids[p] for p in span][: len(title_tokens)] == title_tokens  # the header is in the pooled span
            positions = [0, *span] if i == 0 else list(span)
            expected[corpus.chunk_ids.index(f"{doc}_{i}")] = F.normalize(hidden[positions].mean(0), dim=-1).numpy()
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    plain = encode_system(
        DenseSystem(kind="dense", name="late", context="late", model=str(tiny_folder)), corpus, tmp_path
    )
    assert np.abs(plain.vectors - vectors).max(axis=1).min() > 1e-3  # every chunk moved, Oslo's single chunk too


def test_header_with_anchored_windows_takes_the_header_text_as_head(tiny_folder, tmp_path):
    from sentence_transformers import SentenceTransformer

    corpus = toy_corpus()
    system = header_system(tiny_folder, window_policy="anchored", max_length=24)
    indexed = prepare_system(system, corpus, tmp_path)
    assert indexed.details["header"] == "title" and indexed.details["windows"] > len(DOCUMENTS)
    assert indexed.details["anchor_tokens"] > 0 and indexed.details["chunks_without_title"] == 0
    assert "(anchored windows), each chunk under its title" in indexed.description
    model = SentenceTransformer(str(tiny_folder), device="cpu").eval()
    encoder = LateChunkingEncoder(model, max_length=24, window_policy="anchored")
    documents = [[f"{doc.title()}\n\n{chunk}" for chunk in chunks] for doc, chunks in DOCUMENTS.items()]
    # The head of a later window is the first chunk's header text (title, then chunk), not the title twice.
    head = encoder.tokenize([documents[0][0]])[0]
    later = encoder.layout(documents[0])[1:]
    assert later and all(w.head is not None and w.input_ids[w.head[0] : w.head[1]] == head[: w.head[1] - w.head[0]]
                         for w in later)  # fmt: skip
    vectors = np.concatenate(encoder.encode_documents(documents))
    rows = [corpus.chunk_ids.index(f"{doc}_{i}") for doc, chunks in DOCUMENTS.items() for i in range(len(chunks))]
    expected = np.zeros_like(vectors)
    expected[rows] = vectors
    query_vectors = encoder.encode_queries(corpus.queries)
    np.testing.assert_allclose(all_scores(indexed, corpus.n_queries), query_vectors @ expected.T, atol=1e-5)


def test_progress_bars_name_the_system_and_the_phase(tiny_folder, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(embedders, "_QUERY_CACHE", OrderedDict())  # the first system encodes the queries
    model = str(tiny_folder)
    systems = [
        DenseSystem(kind="dense", name="independent", model=model, context="independent"),
        DenseSystem(kind="dense", name="late-chunking-anchored", model=model, context="late", window_policy="anchored"),
        DenseSystem(kind="dense", name="title-prefix", model=model, context="title", query_prefix="q: "),
    ]
    corpus = toy_corpus()
    bars = []
    for system in systems:
        capsys.readouterr()
        prepare_system(system, corpus, tmp_path, show_progress=True)
        bars.append(progress_lines(capsys.readouterr().err))
    assert bars == [
        ["independent: chunks", "independent: queries"],
        ["late-chunking-anchored: documents"],  # same model and prefix: the queries' vectors are reused
        ["title-prefix: chunks", "title-prefix: queries"],
    ]


def test_header_applies_to_late_chunking_only():
    for context in ("independent", "title"):
        with pytest.raises(ValidationError, match="header: title applies to context: late only"):
            DenseSystem(kind="dense", name="t", context=context, header="title")
