"""The servers users run (issue 27, part 1): the test server's behaviours through the real ``openai`` client, and
the client's ``llm.structured_output: auto`` against each of them, with the requests counted.

A behaviour imitates llama-cpp-python's, vLLM's or Ollama's OpenAI endpoint, or a server without ``/v1/models``
(``tests/support/openai_behaviours.py``). ``auto`` must use the best mode the server accepts, keep it in the answer
store (a rerun asks nothing to find it), and ask a mode the server refuses on two requests (one refusal may be
transient, issue 33), never more.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import openai
import pytest

from llm.cache import AnswerCache
from llm.client import LLMClient
from llm.settings import LLMSettings
from llm.structured import StructuredOutputRefused
from tests.llm.conftest import API_KEY, SCHEMA, echo_responder, make_request
from tests.support.openai_behaviours import Behaviour, requested_schema
from tests.support.openai_server import Fault, OpenAICompatibleServer

EXPECTED_MODE: dict[Behaviour, str] = {
    "openai": "json_schema",
    "vllm": "json_schema",
    "ollama": "json_schema",
    "llama_cpp_python": "json_object",
    "no_models_endpoint": "json_instruction",
}
REFUSED_FIRST = {"openai": 0, "vllm": 0, "ollama": 0, "llama_cpp_python": 2, "no_models_endpoint": 4}
"""Refused requests before the mode is found: each refused mode on two requests (llm.modes.REFUSALS_TO_DEMOTE)."""


def answer_any_mode(body: dict[str, Any]) -> dict[str, Any]:
    """``echo_responder``, after checking the request asks for the test schema in whatever mode it uses."""
    assert requested_schema(body)[1] == SCHEMA
    return echo_responder(body)


def sdk(server: OpenAICompatibleServer) -> openai.OpenAI:
    return openai.OpenAI(api_key="k", base_url=server.url, max_retries=0, timeout=5)


def kinds(server: OpenAICompatibleServer) -> list[str | None]:
    """The ``response_format`` type of each chat request received (None: none sent)."""
    return [(json.loads(r.body).get("response_format") or {}).get("type") for r in server.chat_requests()]


def ask(client: openai.OpenAI, response_format: dict[str, Any] | None) -> Any:
    extra = {"response_format": response_format} if response_format else {}
    messages = [{"role": "system", "content": "JSON"}, {"role": "user", "content": "hi"}]
    return client.chat.completions.create(model="m", messages=messages, **extra)  # type: ignore[call-overload]


JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True}}


def test_llama_cpp_python_refuses_json_schema_with_a_500_validation_body() -> None:
    with OpenAICompatibleServer(echo_responder, behaviour="llama_cpp_python") as server:
        client = sdk(server)
        with pytest.raises(openai.InternalServerError) as refused:
            ask(client, JSON_SCHEMA)
        assert refused.value.status_code == 500 and "Input should be 'text' or 'json_object'" in str(refused.value)
        assert refused.value.body["type"] == "internal_server_error"  # type: ignore[index]
        answer = ask(client, {"type": "json_object"})
        assert answer.usage is not None and answer.usage.prompt_tokens_details is None
        assert [m.owned_by for m in client.models.list()] == ["me"]


@pytest.mark.parametrize("behaviour", ["vllm", "ollama"])
def test_vllm_and_ollama_accept_both_formats_with_their_usage_and_models(behaviour: Behaviour) -> None:
    with OpenAICompatibleServer(echo_responder, behaviour=behaviour, served_model="qwen2.5:0.5b") as server:
        client = sdk(server)
        for response_format in (JSON_SCHEMA, {"type": "json_object"}):
            usage = ask(client, response_format).usage
            assert usage is not None and usage.completion_tokens > 0 and usage.prompt_tokens_details is None
        raw = client.chat.completions.with_raw_response.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert ("prompt_tokens_details" in json.loads(raw.text)["usage"]) == (behaviour == "vllm")
        [model] = client.models.list()
        assert model.id == "qwen2.5:0.5b" and model.owned_by == {"vllm": "vllm", "ollama": "library"}[behaviour]


def test_a_server_without_models_answers_404_and_refuses_every_response_format() -> None:
    with OpenAICompatibleServer(echo_responder, behaviour="no_models_endpoint") as server:
        client = sdk(server)
        with pytest.raises(openai.NotFoundError):
            client.models.list()
        for response_format in (JSON_SCHEMA, {"type": "json_object"}):
            with pytest.raises(openai.BadRequestError, match="response_format"):
                ask(client, response_format)
        assert ask(client, None).usage is None  # a minimal server: no usage


@pytest.mark.parametrize("behaviour", list(EXPECTED_MODE))
def test_auto_uses_the_best_mode_the_server_accepts_and_remembers_it(behaviour: Behaviour, tmp_path: Path) -> None:
    with OpenAICompatibleServer(answer_any_mode, behaviour=behaviour) as server:
        logs: list[str] = []
        settings = LLMSettings(base_url=server.url, model="qwen")  # only the endpoint and the model
        client = LLMClient(settings, AnswerCache(tmp_path / "a.sqlite"), API_KEY, logs.append)
        results = client.run([make_request(n) for n in range(3)])
        assert all(result.ok for result in results), [result.error for result in results]
        mode = EXPECTED_MODE[behaviour]
        refused = REFUSED_FIRST[behaviour]
        # Each refused mode was asked twice (one refusal demotes nothing), then every request once in the mode found.
        assert len(server.chat_requests()) == refused + 3
        wire = {"json_schema": "json_schema", "json_object": "json_object", "json_instruction": None}[mode]
        assert kinds(server)[refused:] == [wire] * 3
        [said] = [line for line in logs if "structured output" in line]
        assert f"structured output {mode} for qwen at {server.url}" in said
        assert ("refused" in said) == bool(refused)

        # A rerun (new client, same store, new requests) asks nothing to find the mode.
        again = LLMClient(settings, AnswerCache(tmp_path / "a.sqlite"), API_KEY, logs.append)
        assert all(result.ok for result in again.run([make_request(n) for n in range(3, 5)]))
        assert len(server.chat_requests()) == refused + 5 and kinds(server)[-2:] == [wire] * 2
        assert len([line for line in logs if "structured output" in line and "found on" in line]) == 1


def test_an_explicit_mode_the_server_refuses_stops_the_run_with_one_line_and_no_retry(tmp_path: Path) -> None:
    with OpenAICompatibleServer(echo_responder, behaviour="llama_cpp_python") as server:
        settings = LLMSettings(base_url=server.url, structured_output="json_schema")
        client = LLMClient(settings, AnswerCache(tmp_path / "a.sqlite"), "k")
        with pytest.raises(StructuredOutputRefused) as stopped:
            client.run([make_request(n) for n in range(3)])
        message = str(stopped.value)
        assert "\n" not in message and 1 <= len(server.chat_requests()) <= 3  # each request once at most
        assert message == (
            f"the server at {server.url} refused response_format json_schema (HTTP 500: Input should be 'text' or "
            "'json_object'); set llm.structured_output: json_object or auto in conteb.yaml"
        )


def test_a_remembered_mode_the_server_no_longer_accepts_is_found_again(tmp_path: Path) -> None:
    with OpenAICompatibleServer(answer_any_mode, behaviour="llama_cpp_python") as server:
        cache = AnswerCache(tmp_path / "a.sqlite")
        cache.remember_structured_mode(server.url, "qwen", "json_schema", "the server accepted json_schema")
        client = LLMClient(LLMSettings(base_url=server.url, model="qwen"), cache, "k")
        assert all(result.ok for result in client.run([make_request(n) for n in range(2)]))
        sent = kinds(server)  # the remembered mode is trusted: both went out at once, at most both were refused,
        # then one was asked alone in it again (one refusal demotes nothing)
        assert sent[-2:] == ["json_object"] * 2 and sent[:-2] in (["json_schema"] * 2, ["json_schema"] * 3)
        assert cache.structured_mode(server.url, "qwen")[0] == "json_object"  # type: ignore[index]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_non_transient_statuses_are_not_retried(status: int, server, make_client) -> None:
    server.inject(Fault("status", status=status))
    [result] = make_client().run([make_request(1)])
    assert not result.ok and f"{status}" in (result.error or "") and len(server.chat_requests()) == 1


def test_a_500_whose_body_is_a_request_validation_error_is_not_retried(server, make_client) -> None:
    body = "1 validation error for CreateChatCompletionRequest\nmessages.0.content\n  Input should be a valid string"
    server.inject(Fault("status", status=500, content=body))
    [result] = make_client(structured_output="json_schema").run([make_request(1)])
    assert not result.ok and "Input should be a valid string" in (result.error or "")
    assert len(server.chat_requests()) == 1


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503])
def test_transient_statuses_keep_the_backoff(status: int, server, make_client) -> None:
    server.inject(Fault("status", status=status))
    [result] = make_client().run([make_request(1)])
    assert result.ok and len(server.chat_requests()) == 2


SMALL_MODEL = [
    ('Sure! Here is the JSON:\n```json\n{"index": 1, "echo": "x",}\n```\nHope it helps.', {"index": 1, "echo": "x"}),
    ('The answer is {"index": 2, "echo": "a {brace} inside"} as asked.', {"index": 2, "echo": "a {brace} inside"}),
    ('{"index": 3, "echo": "y",}', {"index": 3, "echo": "y"}),
]


@pytest.mark.parametrize(("content", "value"), SMALL_MODEL)
@pytest.mark.parametrize("mode", ["json_object", "json_instruction"])
def test_instruction_modes_read_small_model_answers_as_they_come(server, make_client, mode, content, value) -> None:
    server.inject(Fault.raw(content))
    [result] = make_client(structured_output=mode).run([make_request(1)])
    assert result.value == value and len(server.chat_requests()) == 1  # no re-ask


@pytest.mark.parametrize(
    "content",
    [
        '```json\n{"index": 9, "echo": "x",}\n```',  # read, but out of the schema's range
        'Here: {"index": 1, "echo": "cut off by max_tok',  # an unfinished object is not completed by guesswork
        'Note: {} then {"index": 1, "echo": "cut off by max_tok',  # nor one after a complete object
        '{"index": 1}',  # a required property missing
    ],
)
def test_the_schema_check_stays_strict_after_lenient_reading(server, make_client, content) -> None:
    server.inject(Fault.raw(content), Fault.raw(content))
    [result] = make_client(structured_output="json_instruction").run([make_request(1)])
    assert not result.ok and result.error.startswith("invalid answer") and len(server.chat_requests()) == 2


def test_json_schema_mode_reads_answers_strictly(server, make_client) -> None:
    server.inject(Fault.raw('Sure! {"index": 1, "echo": "x",}'), Fault.raw('{"index": 1, "echo": "x"}'))
    [result] = make_client(structured_output="json_schema").run([make_request(1)])
    assert result.ok and len(server.chat_requests()) == 2  # the first answer was re-asked


def test_an_answer_store_made_before_the_modes_table_opens_and_gets_it(tmp_path: Path, server, make_client) -> None:
    path = tmp_path / "old.sqlite"
    [first] = make_client(cache_path=path).run([make_request(1)])
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE structured_modes")  # as a store of the previous release
    cache = AnswerCache(path)
    assert cache.structured_mode(server.url, "gpt-4o") is None
    assert make_client(cache_path=path).run([make_request(1)])[0].value == first.value  # the old answer, cached
    assert len(server.chat_requests()) == 1
    cache.remember_structured_mode(server.url, "gpt-4o", "json_object", "why")
    assert AnswerCache(path).structured_mode(server.url, "gpt-4o")[:2] == ("json_object", "why")  # type: ignore[index]
