"""Done-when of issue 27, part 1: with only ``llm.base_url`` and ``llm.model`` set, a stage (the theme stage, over
three documents, through Dagster and the project's LLM resource) completes against the test server in each of its
behaviours, uses the mode that server supports, and asks a mode the server refuses on two requests (one refusal
may be transient), never more. An explicit mode the server refuses stops the stage with one line naming the setting
to change."""

from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from assets.llm_stage import open_client, run_requests
from assets.resources import LLMResource
from conteb.config import SampleSource, TaskConfig
from conteb.names import Stage
from conteb.schemas import SOURCE_DOCUMENTS
from curation.themes.stage import THEME_SCHEMA, build_theme_requests, themes_table
from llm.settings import LLMSettings
from tests.llm.test_local_servers import EXPECTED_MODE, REFUSED_FIRST, kinds
from tests.support.openai_behaviours import Behaviour, requested_schema
from tests.support.openai_server import Fault, OpenAICompatibleServer

TASK = TaskConfig(name="demo", source=SampleSource(kind="sample"))
DOCUMENTS = [
    ("lyon", "Lyon", "Lyon is a city on the Rhône."),
    ("lfc", "Liverpool F.C.", "Liverpool F.C. is a football club."),
    ("danube", "Danube", "The Danube flows through ten countries."),
]


def theme_answer(body: dict[str, Any]) -> dict[str, Any]:
    """A model that names the title as the theme, whichever way the schema was asked for."""
    assert requested_schema(body)[1] == THEME_SCHEMA
    title = next(line for line in body["messages"][1]["content"].splitlines() if line.startswith("Title: "))
    return {"theme": title.removeprefix("Title: "), "aliases": []}


@dg.asset(name="themes")
def themes(context: dg.AssetExecutionContext, llm: LLMResource) -> dg.MaterializeResult:
    documents = pa.Table.from_pylist(
        [{"doc_id": d, "title": t, "text": x, "source": "f"} for d, t, x in DOCUMENTS], schema=SOURCE_DOCUMENTS
    )
    requests = build_theme_requests(documents, {doc_id: text for doc_id, _, text in DOCUMENTS})
    results, metadata = run_requests(context, open_client(context, llm), TASK, Stage.THEMES, requests)
    table, failures = themes_table(documents, results, llm.settings.model)
    assert not failures and table.column("method").to_pylist() == ["llm"] * 3
    return dg.MaterializeResult(metadata={**metadata, "themes": table.column("theme").to_pylist()})


def materialize(server: OpenAICompatibleServer, tmp_path: Path, **settings: Any) -> dg.ExecuteInProcessResult:
    """Materialize the theme stage with only the endpoint and the model set (and ``settings``)."""
    llm = LLMResource(
        settings_json=LLMSettings(base_url=server.url, model="qwen2.5-0.5b", **settings).model_dump_json(),
        api_key="not-needed",
        cache_path=str(tmp_path / "answers.sqlite"),
    )
    return dg.materialize([themes], resources={"llm": llm}, raise_on_error=False, instance=INSTANCE)


INSTANCE = dg.DagsterInstance.ephemeral()


@pytest.mark.parametrize("behaviour", list(EXPECTED_MODE))
def test_a_stage_completes_in_the_mode_each_server_supports(behaviour: Behaviour, tmp_path: Path) -> None:
    with OpenAICompatibleServer(theme_answer, behaviour=behaviour) as server:
        result = materialize(server, tmp_path)
        assert result.success
        refused = REFUSED_FIRST[behaviour]
        assert len(server.chat_requests()) == refused + 3  # a refused mode twice (one refusal demotes nothing)
        wire = {"json_schema": "json_schema", "json_object": "json_object"}.get(EXPECTED_MODE[behaviour])
        assert kinds(server)[refused:] == [wire] * 3
        [event] = result.get_asset_materialization_events()
        assert event.materialization.metadata["themes"].value == ["Lyon", "Liverpool F.C.", "Danube"]
        logs = [e.message for e in INSTANCE.all_logs(result.run_id) if e.message and "structured output" in e.message]
        assert len(logs) == 1 and f"structured output {EXPECTED_MODE[behaviour]} for qwen2.5-0.5b" in logs[0]


def test_an_explicit_mode_the_server_refuses_stops_the_stage_in_one_line(tmp_path: Path) -> None:
    with OpenAICompatibleServer(theme_answer, behaviour="llama_cpp_python") as server:
        result = materialize(server, tmp_path, structured_output="json_schema")
        assert not result.success and 1 <= len(server.chat_requests()) <= 3  # each request once at most
        [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
        description = failure.step_failure_data.user_failure_data.description  # type: ignore[union-attr]
        assert description == (
            f"demo/themes: the server at {server.url} refused response_format json_schema (HTTP 500: Input should "
            "be 'text' or 'json_object'); set llm.structured_output: json_object or auto in conteb.yaml"
        )


def test_an_endpoint_answering_html_to_every_call_stops_the_stage_in_one_line(tmp_path: Path) -> None:
    with OpenAICompatibleServer(theme_answer) as server:
        server.inject(*[Fault.http_body("<html><body>It works</body></html>")] * 50)
        result = materialize(server, tmp_path, breaker_failures=2, backoff_initial_s=0.01)
        assert not result.success and len(server.chat_requests()) <= 2 + 2  # the first call alone, then 3 at once
        [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
        description = failure.step_failure_data.user_failure_data.description  # type: ignore[union-attr]
        assert description.startswith(f"demo/themes: {server.url}: 2 calls in a row failed: the server answers ")
        assert "text/html, not a chat completion; stopped, nothing more sent" in description and "\n" not in description
