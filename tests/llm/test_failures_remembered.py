"""Answers that failed validation are remembered, not paid for again on every rerun (issue 11).

A rerun makes zero requests for them unless the prompt, the model or a setting changed, or the user
runs ``conteb llm retry-failed``; the count shows in the stage's metadata.
"""

from pathlib import Path

import dagster as dg
from click.testing import CliRunner

from assets.llm_stage import open_client, run_requests
from assets.resources import LLMResource
from cli.main import main
from conteb.config import SampleSource, TaskConfig
from conteb.names import Stage
from conteb.storage import llm_cache_path
from llm.settings import LLMSettings
from tests.conftest import SAMPLE_DIR
from tests.llm.conftest import API_KEY, make_request
from tests.support.openai_server import Fault


def too_short(value: dict) -> str | None:
    """Refuses every answer (as the XQuAD build's length check refused its fake rewrites)."""
    return "the rewrite is too short"


def accept(value: dict) -> str | None:
    return None


def rejected_first(n: int = 3) -> list:
    """``n`` requests whose first is always refused by its validator, the others always valid."""
    return [make_request(0, too_short)] + [make_request(i) for i in range(1, n)]


def test_a_failed_answer_is_remembered_and_not_asked_again(server, make_client, logs) -> None:
    first = make_client().run(rejected_first(), scope="demo/reformulation")
    assert [r.ok for r in first] == [False, True, True]
    assert len(server.chat_requests()) == 4  # the refused item: asked, then re-asked once
    assert not first[0].remembered and "too short" in first[0].error

    again = make_client().run(rejected_first(), scope="demo/reformulation")  # a rerun, a new process
    assert len(server.chat_requests()) == 4  # zero requests
    assert [r.ok for r in again] == [False, True, True]
    assert again[0].remembered and not again[1].remembered
    assert "too short" in again[0].error and "conteb llm retry-failed --task demo" in again[0].error
    assert any("1 remembered failure" in line for line in logs)


def test_a_changed_prompt_model_or_setting_asks_again(server, make_client) -> None:
    make_client().run(rejected_first(1), scope="demo/x")
    assert len(server.chat_requests()) == 2
    make_client(model="gpt-4.1-mini").run(rejected_first(1), scope="demo/x")
    assert len(server.chat_requests()) == 4
    make_client(temperature=0.5).run(rejected_first(1), scope="demo/x")
    assert len(server.chat_requests()) == 6
    [request] = rejected_first(1)
    changed_prompt = type(request)(**{**request.__dict__, "prompt_tag": "test@v2:111111111111"})
    make_client().run([changed_prompt], scope="demo/x")
    assert len(server.chat_requests()) == 8
    make_client().run(rejected_first(1), scope="demo/x")  # the first key again: still remembered
    assert len(server.chat_requests()) == 8


def test_a_remembered_answer_the_current_validator_accepts_is_used_without_asking(server, make_client) -> None:
    make_client().run(rejected_first(1), scope="demo/x")
    assert len(server.chat_requests()) == 2
    [result] = make_client().run([make_request(0, accept)], scope="demo/x")  # the validator was relaxed
    assert result.ok and result.cached  # from the store, no request
    assert len(server.chat_requests()) == 2
    [cached] = make_client().run([make_request(0, too_short)], scope="demo/x")
    assert cached.ok and cached.cached  # now a stored answer like any other


def test_transport_failures_are_not_remembered(server, make_client) -> None:
    server.inject(Fault(kind="status", status=400))
    [failed] = make_client().run([make_request(1)], scope="demo/x")
    assert not failed.ok and not failed.remembered
    [result] = make_client().run([make_request(1)], scope="demo/x")
    assert result.ok and len(server.chat_requests()) == 2


def test_a_stage_materialized_twice_skips_its_remembered_failures_and_says_so(server, tmp_path) -> None:
    task = TaskConfig(name="demo", source=SampleSource(kind="sample"))

    @dg.asset(name="reformulation")
    def stage(context: dg.AssetExecutionContext, llm: LLMResource) -> dg.MaterializeResult:
        _, metadata = run_requests(context, open_client(context, llm), task, Stage.REFORMULATION, rejected_first())
        return dg.MaterializeResult(metadata=metadata)

    settings = LLMSettings(base_url=server.url, backoff_initial_s=0.01)
    llm = LLMResource(settings_json=settings.model_dump_json(), api_key=API_KEY, cache_path=str(tmp_path / "a.sqlite"))
    instance = dg.DagsterInstance.ephemeral()

    def materialize() -> dict:
        assert dg.materialize([stage], resources={"llm": llm}, instance=instance).success
        event = instance.get_latest_materialization_event(dg.AssetKey("reformulation"))
        return {key: value.value for key, value in event.asset_materialization.metadata.items()}

    first = materialize()
    assert len(server.chat_requests()) == 4
    assert first["llm/failed"] == 1 and first["llm/remembered_failures"] == 0 and first["llm/calls"] == 4
    second = materialize()
    assert len(server.chat_requests()) == 4  # the rerun paid for nothing
    assert second["llm/remembered_failures"] == 1 and second["llm/failed"] == 1 and second["llm/calls"] == 0
    assert second["llm/cached"] == 2
    logs = [e.message for e in instance.all_logs(instance.get_runs()[0].run_id) if e.message]
    assert any("conteb llm retry-failed --task demo --stage reformulation" in message for message in logs)


def registry(tmp_path: Path) -> Path:
    path = tmp_path / "conteb.yaml"
    path.write_text(f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n")
    return path


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_retry_failed_forgets_the_failures_of_a_task_or_stage(server, make_client, tmp_path, isolated_env) -> None:
    store = llm_cache_path(isolated_env)
    config = str(registry(tmp_path))
    make_client(cache_path=store).run(rejected_first(1), scope="demo/reformulation")
    make_client(cache_path=store).run([make_request(7, too_short)], scope="demo/synthetic_queries")
    assert len(server.chat_requests()) == 4

    code, output = cli("--config", config, "llm", "retry-failed", "--task", "demo", "--stage", "reformulation")
    assert code == 0 and "forgot 1 remembered failure of demo/reformulation" in output
    assert "still remembered: demo/synthetic_queries 1" in output
    make_client(cache_path=store).run(rejected_first(1), scope="demo/reformulation")
    make_client(cache_path=store).run([make_request(7, too_short)], scope="demo/synthetic_queries")
    assert len(server.chat_requests()) == 6  # only the forgotten one was asked again

    code, output = cli("--config", config, "llm", "retry-failed", "--task", "demo")
    assert code == 0 and "forgot 2 remembered failures of demo" in output
    code, output = cli("--config", config, "llm", "retry-failed", "--task", "demo")
    assert code == 0 and "forgot 0 remembered failures of demo" in output


def test_retry_failed_refuses_an_unknown_task(tmp_path, isolated_env) -> None:
    code, output = cli("--config", str(registry(tmp_path)), "llm", "retry-failed", "--task", "demoo")
    assert code == 1 and "unknown task 'demoo'" in output and "demo" in output
