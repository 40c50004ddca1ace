"""Cache-friendly prompts (issue 13): the document first and the chunk or query last, a document's requests
together, and, through the local server, cached tokens for a document's later requests that a chunk-first
layout never gets."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from conteb.config import ChunkingConfig
from conteb.schemas import THEMES
from curation.chunking import chunk_documents
from curation.contextual import build_context_requests
from curation.llm_pairing import build_pairing_requests
from curation.reformulation import build_reformulation_requests
from curation.synthetic_queries import build_synthetic_requests
from llm.cache import AnswerCache
from llm.client import LLMClient
from llm.settings import LLMSettings
from llm.types import LLMRequest
from tests.builders import documents, queries
from tests.support.layouts import chunk_first
from tests.support.openai_server import OpenAICompatibleServer


def _text(subject: str) -> str:
    return " ".join(f"Fact {n} about {subject}: it was recorded in year {1800 + n}." for n in range(110))


DOCS = documents([("lug", "Lugdunum", _text("Lugdunum")), ("ebo", "Eboracum", _text("Eboracum"))])
CHUNKS = chunk_documents(DOCS, ChunkingConfig()).chunks  # 6 chunks of each of the two documents
# the queries of both documents interleaved: the requests must still come document by document
QUERIES = queries(
    [{"id": f"q{n}", "doc": "lug" if n % 2 else "ebo", "answers": [(f"year {1800 + n}", 0)]} for n in range(6)]
)


def _shared_prefix(texts: list[str]) -> str:
    """The longest string every one of ``texts`` starts with."""
    first, length = texts[0], min(len(text) for text in texts)
    end = next((i for i in range(length) if any(text[i] != first[i] for text in texts)), length)
    return first[:end]


def _document_requests() -> dict[str, list[LLMRequest]]:
    return {
        "contexts": build_context_requests(CHUNKS, DOCS),
        "synthetic": build_synthetic_requests(CHUNKS, DOCS, n=2),
        "pairing": build_pairing_requests(QUERIES, DOCS, CHUNKS),
    }


@pytest.mark.parametrize("stage", ["contexts", "synthetic", "pairing"])
def test_the_document_comes_first_and_the_item_last(stage: str) -> None:
    requests = _document_requests()[stage]
    docs = [r.prefix_group.split("@")[0] for r in requests]
    assert docs == sorted(docs, key=docs.index) and set(docs) == {"lug", "ebo"}  # one document after the other
    for doc_id, title in (("lug", "Lugdunum"), ("ebo", "Eboracum")):
        mine = [r for r in requests if r.prefix_group.startswith(doc_id)]
        assert len({r.prefix_group for r in mine}) == 1 and len(mine) >= 3
        assert len({r.messages[0]["content"] for r in mine}) == 1  # a fixed system message
        users = [r.messages[1]["content"] for r in mine]
        prefix = _shared_prefix(users)
        assert title in prefix
        # the whole document is in the shared prefix: as text, or (pairing) as its numbered chunks
        doc_chunks = CHUNKS.filter(pa.compute.equal(CHUNKS.column("doc_id"), doc_id)).column("og_chunk").to_pylist()
        assert all(chunk in prefix for chunk in doc_chunks)
        assert all(len(user) - len(prefix) < 1300 for user in users), "only the chunk or query follows the document"


def test_reformulation_gives_its_document_part_first_and_has_no_long_prefix() -> None:
    rows = [{"doc_id": d, "theme": t, "aliases": [], "method": "title"} for d, t in (("lug", "Lugdunum"), ("ebo", "X"))]
    themes = pa.Table.from_pylist(rows, schema=THEMES)
    requests = build_reformulation_requests(CHUNKS, themes)
    user = requests[0].messages[1]["content"]
    assert user.index("Subject: ") < user.index("Passage:\n") and user.endswith(CHUNKS.column("og_chunk")[1].as_py())
    assert all(r.prefix_group is None for r in requests)  # system + theme: far below the 1,024 cacheable tokens


@pytest.mark.parametrize("stage", ["contexts", "pairing"])
def test_a_documents_later_requests_are_served_from_the_providers_cache(stage: str, tmp_path: Path) -> None:
    friendly = _document_requests()[stage]
    answer = {"contexts": {"context": "A passage of the document."}, "pairing": {"chunk_indices": [0]}}[stage]
    with OpenAICompatibleServer(lambda body: answer, latency_s=0.02) as server:
        settings = LLMSettings(base_url=server.url, model="gpt-4o", max_concurrency=8)
        client = LLMClient(settings, AnswerCache(tmp_path / "answers.sqlite"), "k")
        results = client.run(friendly, scope="t/new")
        old = client.run([chunk_first(r) for r in friendly], scope="t/old")
    assert all(r.ok for r in results + old)
    firsts = {r.prefix_group: r.custom_id for r in reversed(friendly)}  # the first request of each document
    for request, result in zip(friendly, results, strict=True):
        assert (result.cached_tokens > 0) == (request.custom_id not in firsts.values()), request.custom_id
    assert all(r.cached_tokens == 0 for r in old)  # chunk before document: nothing to reuse
    new_usage, old_usage = client.cache.usage("t/new"), client.cache.usage("t/old")
    assert new_usage.cached_share > 0.5 and old_usage.cached_tokens == 0
    assert new_usage.cost_usd < old_usage.cost_usd
