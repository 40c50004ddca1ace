"""Servers that accept a request and do not do what it asks (issue 33, item 12), through the real ``openai`` client:
every answer is read and validated against its schema whatever the mode, and an answer put in ``reasoning_content``
with an empty ``content`` is read from there (``tests/support/openai_behaviours.py``: :data:`LYING`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm.cache import AnswerCache
from llm.client import LLMClient
from llm.settings import LLMSettings
from tests.llm.conftest import API_KEY, make_request
from tests.llm.test_local_servers import answer_any_mode
from tests.support.openai_behaviours import LYING, Behaviour
from tests.support.openai_server import OpenAICompatibleServer

# What a run in `auto` gets from each (the mode found: json_schema, accepted by all), and in json_object.
IN_AUTO_VALID = {"vllm_reasoning_content": True}


@pytest.mark.parametrize("behaviour", LYING)
def test_every_answer_of_a_lying_server_is_validated_whatever_the_mode(behaviour: Behaviour, tmp_path: Path) -> None:
    with OpenAICompatibleServer(answer_any_mode, behaviour=behaviour) as server:
        cache = AnswerCache(tmp_path / "a.sqlite")
        client = LLMClient(LLMSettings(base_url=server.url, model="qwen"), cache, API_KEY)
        [auto] = client.run([make_request(1)])
        if IN_AUTO_VALID.get(behaviour, False):  # the answer in reasoning_content, read from there
            assert auto.ok and auto.value == {"index": len("question 1") % 4, "echo": "question 1"}
            assert len(server.chat_requests()) == 1
        else:  # json_schema accepted and not enforced: refused after the re-ask, never accepted
            assert not auto.ok and (auto.error or "").startswith("invalid answer: the answer ")
            assert len(server.chat_requests()) == 2
        settings = LLMSettings(base_url=server.url, model="qwen", structured_output="json_object")
        [lenient] = LLMClient(settings, cache, API_KEY).run([make_request(2)])
        assert lenient.ok, lenient.error  # JSON mode's lenient reading, the schema checked strictly
