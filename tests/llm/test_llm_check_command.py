"""``conteb llm check`` against the servers users run (issue 27, part 1): the models served, each structured-output
mode tried with a tiny schema, a short answer timed, and the ``llm:`` block to paste; an unreachable endpoint is one
line and exit status 1."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cli.main import main
from project.config import load_config
from tests.conftest import SAMPLE_DIR
from tests.llm.test_local_servers import EXPECTED_MODE, answer_any_mode
from tests.support.openai_behaviours import Behaviour
from tests.support.openai_server import OpenAICompatibleServer


def registry(tmp_path: Path, llm: str) -> Path:
    path = tmp_path / "conteb.yaml"
    path.write_text(f"{llm}tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n")
    return path


def check(config: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["--config", str(config), "llm", "check", *args])
    return result.exit_code, result.output


def tiny_answer(body: dict) -> dict:
    """The check's tiny schema answered (``{"answer": ...}``), else the test schema of the other tests."""
    properties = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {}).get("properties", {})
    if "answer" in properties or "answer" in body["messages"][0]["content"]:
        return {"answer": "ok"}
    return answer_any_mode(body)


@pytest.mark.parametrize("behaviour", list(EXPECTED_MODE))
def test_check_prints_the_block_each_server_needs(behaviour: Behaviour, tmp_path: Path, isolated_env: Path) -> None:
    with OpenAICompatibleServer(tiny_answer, behaviour=behaviour, served_model="qwen2.5-0.5b") as server:
        url = server.url
        config = registry(tmp_path, f"llm:\n  base_url: {url}\n")
        code, output = check(config, "--endpoint-only")
    assert code == 0, output
    block = output.split("put in conteb.yaml:\n", 1)[1]
    llm = yaml.safe_load(block)["llm"]
    model = "gpt-4o" if behaviour == "no_models_endpoint" else "qwen2.5-0.5b"  # unset llm.model: the first served
    assert llm == {"base_url": url, "model": model, "structured_output": EXPECTED_MODE[behaviour]}
    assert load_config(registry(tmp_path, block)).llm.structured_output == EXPECTED_MODE[behaviour]  # it pastes
    if behaviour == "no_models_endpoint":
        assert "models: unknown (the server has no /v1/models, HTTP 404); carrying on with the configured" in output
        assert "estimated from" in output and "characters" in output  # no usage in its answers
    else:
        assert "models served: qwen2.5-0.5b" in output and "(usage.completion_tokens," in output
    assert "tokens/s" in output
    refused = {"llama_cpp_python": ["json_schema"], "no_models_endpoint": ["json_schema", "json_object"]}
    for mode in refused.get(behaviour, []):
        assert f"  {mode:<16} refused: HTTP" in output
    if behaviour == "llama_cpp_python":
        assert "refused: HTTP 500: Input should be 'text' or 'json_object'" in output


def test_check_keeps_the_configured_model_and_says_it_is_not_served(tmp_path: Path, isolated_env: Path) -> None:
    with OpenAICompatibleServer(tiny_answer, behaviour="ollama", served_model="llama3.2") as server:
        config = registry(tmp_path, f"llm:\n  base_url: {server.url}\n  model: qwen\n")
        code, output = check(config, "--endpoint-only")
    assert code == 0 and "llm.model 'qwen' is not among them" in output and "  model: qwen\n" in output


def test_check_of_an_unreachable_endpoint_is_one_line_and_exit_status_1(tmp_path: Path, isolated_env: Path) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    code, output = check(registry(tmp_path, ""), "--endpoint-only", "--base-url", f"http://127.0.0.1:{port}/v1")
    assert code == 1
    assert output.strip().splitlines() == [output.strip()]
    assert output.startswith(f"cannot reach the LLM endpoint at http://127.0.0.1:{port}/v1")


def test_check_still_checks_the_answer_store_and_skips_an_unconfigured_endpoint(
    tmp_path: Path, isolated_env: Path, monkeypatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, output = check(registry(tmp_path, ""))
    assert code == 0 and "no LLM answer store to check" in output
    assert "no LLM endpoint configured" in output
