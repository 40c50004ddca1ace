"""End-to-end: an LLM item whose answer failed or was refused reaches a person (issue 25, item 4).

A scripted local OpenAI-compatible server (real HTTP, the real ``openai`` client) refuses to be useful for two
chunks of the sample: for one it returns a 40-character "rewrite" of a ~560-character chunk (the detectors refuse
it: too short), for the other an HTTP 500 on every try. Both chunks keep their text under the offline mask (they do
not name their city), so before this rule they were published as "unchanged proposals auto-accepted", unseen.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import datasets
import pyarrow.parquet as pq
from click.testing import CliRunner

from cli.main import main
from conteb.storage import review_store_path
from pipelines.definitions import build_definitions
from project.config import load_config
from review.model import LLM_FAILED_FLAG
from review.store import ReviewStore
from tests.conftest import SAMPLE_DIR
from tests.support.openai_server import Fault, OpenAICompatibleServer
from tests.test_llm_stages_e2e import API_KEY, scripted_llm

REFUSED = "The settlement is first recorded in 1124"  # in the one chunk (Arlenmouth's) whose rewrite is refused
BROKEN = "The tram network opened in 1994"  # in the one chunk (Arlenmouth's) whose calls all fail
SHORT_REWRITE = "The town was first recorded in 1124 AD."
TRIES = 2  # llm.max_attempts
EDITED = "The settlement's transport: trams since 1994, five lines, trains and a ferry across the estuary."


def passage(body: dict[str, Any]) -> str:
    """The passage of a reformulation request (the first user message; a re-ask appends messages)."""
    user = next(message["content"] for message in body["messages"] if message["role"] == "user")
    return user.split("Passage:\n", 1)[-1]


def responder(body: dict[str, Any]) -> dict[str, Any]:
    """``scripted_llm`` (rewrites return the passage unchanged), except the refused chunk's too-short rewrite."""
    if body["response_format"]["json_schema"]["name"] != "reformulation":
        return scripted_llm(body)
    return {"rewritten": SHORT_REWRITE if REFUSED in passage(body) else passage(body)}


def is_broken(body: dict[str, Any]) -> bool:
    return body["response_format"]["json_schema"]["name"] == "reformulation" and BROKEN in passage(body)


def registry(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "conteb.yaml"
    path.write_text(
        f"llm: {{base_url: {url}, max_attempts: {TRIES}, backoff_initial_s: 0.01}}\ntasks:\n  - name: demo\n"
        f"    source: {{kind: sample, path: {SAMPLE_DIR}}}\n    reformulation: true\n    answerability: false\n"
    )
    return path


def build(config: Path) -> dg.ExecuteInProcessResult:
    job = build_definitions(load_config(config)).resolve_job_def("build_conteb")
    return job.execute_in_process(instance=dg.DagsterInstance.ephemeral(), raise_on_error=False)


def sent(server: OpenAICompatibleServer, marker: str) -> int:
    """How many chat requests rewrite the chunk holding ``marker``."""
    return sum(1 for request in server.chat_requests() if marker in passage(request.json()))


def test_failed_and_refused_rewrites_wait_for_a_person_and_the_card_counts_them(
    tmp_path: Path, isolated_env: Path, monkeypatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    with OpenAICompatibleServer(responder) as server:
        server.inject(*[Fault.server_error()] * TRIES, match=is_broken)
        config = registry(tmp_path, server.url)
        build(config)
        assert sent(server, REFUSED) == 2 and sent(server, BROKEN) == TRIES  # the re-ask; every transport try

        # The run stops at the review gate with exactly the two failed items pending, flagged with their reason,
        # proposing the fallback (the mask, here the original text); nothing was accepted for them.
        assert not (isolated_env / "conteb" / "demo").exists()
        store = ReviewStore(review_store_path(isolated_env))
        waiting = store.items(task="demo", kind="reformulation", status="pending")
        failed = [item for item in waiting if item.flags[0].startswith(LLM_FAILED_FLAG)]
        [refused] = [item for item in failed if REFUSED in item.proposed]
        [broken] = [item for item in failed if BROKEN in item.proposed]
        assert len(failed) == 2 and refused.object_id != broken.object_id
        assert all(item.flags[0].startswith("leak:") for item in waiting if item not in failed)
        for item in (refused, broken):
            assert item.flagged and item.proposed == item.original and item.method == "mask"
            assert [entry.action for entry in store.audit(item.item_id)] == ["push"]  # no automatic decision
        assert refused.flags[0].startswith(f"{LLM_FAILED_FLAG}: the LLM's rewrite was refused: the rewrite has ")
        assert (
            f"has {len(SHORT_REWRITE)} characters, less than half of the original's {len(refused.original)}"
            in (refused.flags[0])
        )
        assert broken.flags[0].startswith(f"{LLM_FAILED_FLAG}: the LLM call failed after {TRIES} tries: ")
        assert "500" in broken.flags[0]
        [stats] = store.stats(task="demo", kind="reformulation")
        assert (stats.pending, stats.failed_pending) == (len(waiting), 2)
        status = CliRunner().invoke(main, ["--config", str(config), "status"])
        assert f"demo/reformulation: {len(waiting)} of 98 items pending; 2 items failed at the LLM, pending" in (
            status.output
        )

        # A person decides: accepts the refused one's fallback with the CLI, edits the other in the store.
        accepted = CliRunner().invoke(
            main,
            ["--config", str(config), "review", "accept", "--task", "demo", "--kind", "reformulation",
             "--ids", refused.item_id, "--reviewer", "ana"],
        )  # fmt: skip
        assert accepted.exit_code == 0, accepted.output
        store.decide(broken.item_id, "edit", "ben", broken.version, edited_text=EDITED)
        store.bulk_decide("accept", "ana", "demo", "reformulation")  # the LLM's rewrites that still name the city

        # The rerun does not ask again for the refused rewrite (the failure memory: same request, refused
        # before), asks again for the one that failed in transport (it fails again), and keeps both decisions.
        server.inject(*[Fault.server_error()] * TRIES, match=is_broken)
        build(config)
        assert sent(server, REFUSED) == 2 and sent(server, BROKEN) == 2 * TRIES
        after = {item.item_id: item for item in store.items(task="demo", kind="reformulation")}
        assert (after[refused.item_id].status, after[refused.item_id].reviewer) == ("accepted", "ana")
        assert (
            "(remembered from an earlier run, not asked again; `conteb llm retry-failed --task demo` asks again)"
            in (after[refused.item_id].flags[0])
        )
        assert (after[broken.item_id].status, after[broken.item_id].edited_text) == ("edited", EDITED)

    folder = isolated_env / "conteb" / "demo"
    chunks = {
        row["chunk_id"]: row["chunk"]
        for split in datasets.load_dataset(str(folder), "documents").values()
        for row in split
    }
    assert chunks[broken.object_id] == EDITED
    assert chunks[refused.object_id] == refused.proposed
    reviewed = pq.read_table(isolated_env / "stages" / "demo" / "reviewed_chunks.parquet").to_pylist()
    failures = {row["chunk_id"]: row for row in reviewed if row["llm_failure"]}
    assert set(failures) == {refused.object_id, broken.object_id}
    card = (folder / "README.md").read_text()
    assert "| LLM failures decided by a person | 2 |" in card
    assert "| LLM failures decided by a person: accepted the fallback (the mask) | 1 |" in card
    assert "| LLM failures decided by a person: edited | 1 |" in card


UNPAIRED = "In which year is Arlenmouth first recorded?"  # its LLM pairing is refused (a chunk that does not exist)
WRITTEN = "When did the tram network of the port city open?"


def no_fallback_responder(body: dict[str, Any]) -> dict[str, Any]:
    """``scripted_llm``, except an out-of-range chunk index for the pairing of :data:`UNPAIRED`."""
    if body["response_format"]["json_schema"]["name"] == "chunk_pairing" and UNPAIRED in passage(body):
        return {"chunk_indices": [99]}
    return scripted_llm(body)


def is_broken_synthetic(body: dict[str, Any]) -> bool:
    return body["response_format"]["json_schema"]["name"] == "synthetic_queries" and BROKEN in passage(body)


def test_failed_items_of_stages_without_fallback_wait_for_a_person_who_supplies_or_rejects_them(
    tmp_path: Path, isolated_env: Path, monkeypatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    with OpenAICompatibleServer(no_fallback_responder) as server:
        config = tmp_path / "conteb.yaml"
        config.write_text(
            f"llm: {{base_url: {server.url}, max_attempts: {TRIES}, backoff_initial_s: 0.01}}\ntasks:\n"
            f"  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n    pairing: llm\n"
            "    synthetic_queries: 1\n    answerability: false\n"
        )
        server.inject(*[Fault.server_error()] * TRIES, match=is_broken_synthetic)
        build(config)
        assert not (isolated_env / "conteb" / "demo").exists()
        store = ReviewStore(review_store_path(isolated_env))
        failed = {
            item.kind: item
            for item in store.items(task="demo", status="pending")
            if item.flags and item.flags[0].startswith(LLM_FAILED_FLAG)
        }
        assert set(failed) == {"pairing", "synthetic_query"}
        pairing, synthetic = failed["pairing"], failed["synthetic_query"]
        assert (pairing.object_id, pairing.proposed, pairing.method, pairing.context["query"]) == (
            "arlenmouth-q2", "", "none", UNPAIRED
        )  # fmt: skip
        assert "invalid answer: the answer does not match the schema" in pairing.flags[0]  # refused by the schema
        assert (synthetic.proposed, synthetic.method, synthetic.context["chunk_id"]) == ("", "none", "arlenmouth_2")
        assert "InternalServerError: Error code: 500" in synthetic.flags[0]
        assert {q.kind: q.failed_pending for q in store.stats(task="demo")} == {"pairing": 1, "synthetic_query": 1}

        # "Accept everything" through the CLI accepts the LLM's proposals, not the items that propose nothing.
        for kind in ("pairing", "synthetic_query"):
            accepted = CliRunner().invoke(
                main,
                ["--config", str(config), "review", "accept", "--task", "demo", "--kind", kind, "--reviewer", "ana"],
            )
            assert accepted.exit_code == 0, accepted.output
        assert {item.kind for item in store.items(task="demo", status="pending")} == {"pairing", "synthetic_query"}
        store.decide(pairing.item_id, "edit", "ben", pairing.version, edited_text="arlenmouth_1")
        store.decide(synthetic.item_id, "edit", "ben", synthetic.version, edited_text=WRITTEN)

        server.inject(*[Fault.server_error()] * TRIES, match=is_broken_synthetic)  # the rerun fails the same way
        build(config)

    folder = isolated_env / "conteb" / "demo"
    published = {
        row["query_id"]: row for split in datasets.load_dataset(str(folder), "queries").values() for row in split
    }
    assert (published["arlenmouth-q2"]["chunk_id"], published["arlenmouth-q2"]["query"]) == ("arlenmouth_1", UNPAIRED)
    written = {
        row["query_id"]: row
        for split in datasets.load_dataset(str(folder), "synthetic_queries").values()
        for row in split
    }
    assert (written["synth-arlenmouth_2-0"]["query"], written["synth-arlenmouth_2-0"]["chunk_id"]) == (
        WRITTEN, "arlenmouth_2"
    )  # fmt: skip
    card = (folder / "README.md").read_text()
    assert "| LLM failures decided by a person: pairings given | 1 |" in card
    assert "| LLM failures decided by a person: synthetic queries written | 1 |" in card
