"""The manual-verification gate in Dagster: a run with pending items succeeds and stops at the gate (the reviewed
tables yield no output, what uses them is skipped; no check fails); once reviewers decide, the sensor requests the
downstream run, and the benchmark holds exactly the reviewed texts (edited text, original for a rejected rewrite,
rejected queries left out)."""

from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq

from conteb.storage import review_store_path
from pipelines.definitions import build_definitions
from project.config import load_config
from review.store import ReviewStore
from tests.conftest import SAMPLE_DIR, load_conteb
from tests.support.make import user_make_env
from tests.support.openai_server import OpenAICompatibleServer
from tests.test_llm_stages_e2e import API_KEY, scripted_llm, stopped_at_review_gate


def rewriting_llm(body: dict) -> dict:
    """``scripted_llm``, except that rewrites differ from the original (so they need review)."""
    answer = scripted_llm(body)
    if "rewritten" in answer:
        answer["rewritten"] = answer["rewritten"].replace(" the ", " that ")
    return answer


def test_pending_items_stop_the_run_and_the_sensor_resumes_it(tmp_path: Path, isolated_env: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    with OpenAICompatibleServer(rewriting_llm) as server:
        config_path = tmp_path / "conteb.yaml"
        config_path.write_text(
            f"llm: {{base_url: {server.url}}}\ntasks:\n  - name: demo\n"
            f"    source: {{kind: sample, path: {SAMPLE_DIR}}}\n"
            "    reformulation: true\n    synthetic_queries: 1\n    review: {on_reject: original}\n"
        )
        defs = build_definitions(load_config(config_path))
        instance = dg.DagsterInstance.ephemeral()
        result = defs.resolve_job_def("build_conteb").execute_in_process(instance=instance, raise_on_error=False)
        assert stopped_at_review_gate(result)
        assert not (isolated_env / "conteb" / "demo").exists()  # nothing downstream ran

        sensor = defs.resolve_sensor_def("review_queue_sensor")
        resources = {"review": defs.resources["review"]}
        assert not sensor.evaluate_tick(
            dg.build_sensor_context(instance=instance, resources=resources, definitions=defs)
        ).run_requests

        store = ReviewStore(review_store_path(isolated_env))
        rewrites = store.items(task="demo", kind="reformulation")
        edited, rejected = rewrites[0], rewrites[1]
        store.decide(edited.item_id, "edit", "Ana", edited.version, edited_text="The reviewed text of this chunk.")
        store.decide(rejected.item_id, "reject", "Ana", rejected.version)
        store.bulk_decide("accept", "Ana", "demo", "reformulation")
        queries = store.items(task="demo", kind="synthetic_query")
        dropped = queries[0]
        store.decide(dropped.item_id, "reject", "Ben", dropped.version)
        store.bulk_decide("accept", "Ben", "demo", "synthetic_query")

        tick = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, resources=resources, definitions=defs))
        [request] = tick.run_requests
        assert request.run_key.startswith("demo:reformulation@") and "synthetic_query@" in request.run_key
        again = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, resources=resources, definitions=defs))
        assert [r.run_key for r in again.run_requests] == [request.run_key]  # same key: fires once per completion

        downstream = dg.define_asset_job("review_resume", selection=dg.AssetSelection.assets(*request.asset_selection))
        job = dg.Definitions(
            assets=defs.assets, asset_checks=defs.asset_checks, resources=defs.resources, jobs=[downstream]
        ).resolve_job_def("review_resume")
        assert job.execute_in_process(instance=instance).success
        asked = len(server.chat_requests())

        folder = isolated_env / "conteb" / "demo"
        documents = {row["chunk_id"]: row for row in load_conteb(folder, "documents").to_list()}
        assert documents[edited.object_id]["chunk"] == "The reviewed text of this chunk."
        assert documents[rejected.object_id]["chunk"] == documents[rejected.object_id]["og_chunk"]
        synthetic = load_conteb(folder, "synthetic_queries")
        assert dropped.object_id not in synthetic["query_id"] and synthetic.num_rows == len(queries) - 1
        reviewed = pq.read_table(isolated_env / "stages" / "demo" / "reviewed_chunks.parquet").to_pylist()
        statuses = {row["chunk_id"]: (row["review_status"], row["reviewer"]) for row in reviewed}
        assert statuses[edited.object_id] == ("edited", "Ana") and statuses[rejected.object_id] == ("rejected", "Ana")

        # A full rebuild now passes the gate, keeps every decision, and pays for nothing.
        rebuilt = defs.resolve_job_def("build_conteb").execute_in_process(instance=instance)
        assert rebuilt.success and len(server.chat_requests()) == asked
        assert store.get(edited.item_id).status == "edited"


def test_make_dev_says_first_what_the_review_sensor_will_launch() -> None:
    """``make dev``'s first lines (printed before Dagster starts) name the sensor, its status and its interval as the
    definitions declare them, so a run it launches unasked is never a surprise."""
    import subprocess

    from tests.conftest import ROOT

    sensor = build_definitions(load_config(ROOT / "conteb.yaml")).resolve_sensor_def("review_queue_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    # `make -n` prints the recipe without running it: the notice's echo lines come before `dagster dev`.
    recipe = subprocess.run(
        ["make", "-n", "-s", "dev"], cwd=ROOT, env=user_make_env(), capture_output=True, text=True, check=True
    ).stdout
    assert "dagster dev" in recipe
    notice = recipe.split("dagster dev", 1)[0]
    assert f"sensor {sensor.name} is ON" in notice
    assert f"every {sensor.minimum_interval_seconds} s" in notice
    assert "launches a run" in notice and "Turn it off" in notice
