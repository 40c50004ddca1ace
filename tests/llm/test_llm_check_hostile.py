"""``conteb llm check`` against hostile and lying endpoints (issue 33, items 10 and 12), through the command line.

A model list or a chat answer that is not one is said so in its line (no traceback); an answer that never ends is cut,
and the whole check ends within its deadline (one line, exit status 1); a huge model list is not read past
``llm.max_answer_bytes``; the servers that accept a ``response_format`` and do not do what it asks are named in words.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from tests.llm.test_llm_check_command import check, registry, tiny_answer
from tests.support.openai_behaviours import LYING, Behaviour
from tests.support.openai_server import Fault, OpenAICompatibleServer

HTML = "<html><head><title>Welcome to nginx!</title></head><body>It works</body></html>"


def run_check(server: OpenAICompatibleServer, tmp_path: Path, llm: str = "") -> tuple[int, str]:
    return check(registry(tmp_path, f"llm:\n  base_url: {server.url}\n{llm}"), "--endpoint-only")


def test_an_html_model_list_and_html_chat_answers_are_said_in_their_lines(tmp_path: Path, isolated_env: Path) -> None:
    with OpenAICompatibleServer(tiny_answer) as server:
        server.models_fault = Fault.http_body(HTML)
        server.inject(*[Fault.http_body(HTML)] * 4)
        code, output = run_check(server, tmp_path)
    assert code == 0 and "Traceback" not in output, output
    assert (
        "models: unknown (GET /v1/models answered text/html; charset=utf-8, 79 bytes, not a model list: '<html>"
        in output
    )
    for mode in ("json_schema", "json_object", "json_instruction"):
        assert f"  {mode:<16} no usable answer: the answer is not a chat completion (text/html" in output
    assert "speed" not in output and "structured_output: json_instruction\n" in output


def test_a_model_list_of_100_mb_is_not_read_past_the_cap(tmp_path: Path, isolated_env: Path) -> None:
    with OpenAICompatibleServer(tiny_answer) as server:
        server.models_fault = Fault.huge(100 * 2**20)
        code, output = run_check(server, tmp_path)
    assert code == 0, output
    [line] = [line for line in output.splitlines() if line.startswith("models: unknown")]
    assert "is larger than llm.max_answer_bytes (1048576 bytes)" in line
    read = int(line.split("(at least ", 1)[1].split(" bytes)", 1)[0].replace(",", ""))
    assert read < 2 * 2**20  # stopped at the cap, not read whole
    assert "  json_schema      valid answer" in output  # the check carried on


@pytest.mark.parametrize("fault", [Fault.endless(0.05), Fault.stall()], ids=["endless", "headers-then-nothing"])
@pytest.mark.parametrize("where", ["models", "chat"])
def test_answers_that_never_end_cannot_hold_the_check(where: str, fault: Fault, tmp_path: Path, isolated_env) -> None:
    with OpenAICompatibleServer(tiny_answer) as server:
        url = server.url
        if where == "models":
            server.models_fault = fault
        else:
            server.inject(*[fault] * 5)
        started = time.monotonic()
        code, output = run_check(server, tmp_path, "  timeout_s: 2\n")
        assert time.monotonic() - started < 30.0, output  # without the deadlines: never
    assert "Traceback" not in output
    if where == "models":  # that call is cut; the check goes on
        assert code == 0 and "models: unknown (GET /v1/models:" in output
    else:  # each call is cut, and the whole check stops at its deadline
        assert code == 1 and output.strip().splitlines() == [output.strip()]
        assert "the check of the LLM endpoint at URL did not end within 6 s" in output.replace(url, "URL")


NOTES: dict[Behaviour, tuple[str, str]] = {
    "llama_cpp_grammar_failed": ("accepts json_schema but does not enforce it", "json_object"),
    "llama_cpp_schema_unenforced": ("accepts json_schema but does not enforce it", "json_object"),
    "vllm_reasoning_content": ("puts its answer in reasoning_content", "json_schema"),
    "ollama_format_ignored": ("accepts json_schema but does not enforce it", "json_object"),
}


@pytest.mark.parametrize("behaviour", LYING)
def test_the_check_says_how_a_lying_server_lies(behaviour: Behaviour, tmp_path: Path, isolated_env: Path) -> None:
    note, best = NOTES[behaviour]
    with OpenAICompatibleServer(tiny_answer, behaviour=behaviour) as server:
        code, output = run_check(server, tmp_path)
    assert code == 0, output
    assert f"note: {note}" in output
    if "enforce" in note:
        assert "answers must be validated (they are)" in output
    assert yaml.safe_load(output.split("put in conteb.yaml:\n", 1)[1])["llm"]["structured_output"] == best
