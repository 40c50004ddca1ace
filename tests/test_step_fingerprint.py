"""What a Celery step's fingerprint covers, and prompt edits reaching every process.

1. ``project.fingerprint.step_fingerprint``: an edit of the registry, of one prompt file (in a copy of the prompts,
   ``$CONTEB_PROMPTS_DIR``) or of one source file of the project's packages (in a copy of them) changes exactly its
   part, and the worker's refusal (``pipelines.celery_steps.fingerprint_refusal``) names it in one line with the
   restart hint; compiled caches do not count as code. The LLM endpoint, model and key source the process resolves
   (``$OPENAI_BASE_URL``, ``$OPENAI_API_KEY``) are parts too, the key's value never (issue 33: workers started from
   another shell called, and billed, another endpoint than the run's).
2. ``llm.prompts.load_prompt`` in one long-lived process reads an edited prompt file (it used to be memoized per
   name forever, which is how Celery workers kept tagging rows with the old prompt).
3. In process, a rebuild after a prompt edit asks the LLM again for every chunk and tags its rows with the new
   prompt version (the in-process half of the Celery test, ``tests/test_celery_prompts.py``).
4. A prompt edited while its stage asks: each row is tagged with the prompt its request was sent with.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow.parquet as pq
import pytest

from llm.prompts import PROMPTS_DIR, load_prompt, prompts_dir
from pipelines.celery_steps import RESTART_WORKERS, fingerprint_refusal
from project.config import load_config
from project.fingerprint import (
    CODE_PACKAGES,
    LLM_PARTS,
    code_version,
    fingerprint_differences,
    package_dirs,
    step_fingerprint,
)
from tests.conftest import SAMPLE_DIR
from tests.support.openai_server import OpenAICompatibleServer
from tests.support.prompt_edits import edit_prompt

API_KEY = "sk-test-prompt-edit"
PROMPT = "chunk_context"  # the prompt of the LLM stage the end-to-end tests run (one request per chunk)


def copy_prompts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the project's prompts, made the prompts of this process (``$CONTEB_PROMPTS_DIR``)."""
    folder = shutil.copytree(PROMPTS_DIR, tmp_path / "prompts")
    monkeypatch.setenv("CONTEB_PROMPTS_DIR", str(folder))
    assert prompts_dir() == folder.resolve()
    return folder


def write_registry(path: Path, extra_llm: str = "") -> Path:
    path.write_text(
        f"llm: {{backoff_initial_s: 0.01{extra_llm}}}\n"
        f"tasks:\n  - name: demo\n    source: {{kind: sample, path: '{SAMPLE_DIR}'}}\n"
        "    chunk_contexts: true\n    answerability: false\n"
    )
    return path


def test_registry_prompts_and_code_each_change_their_own_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prompts = copy_prompts(tmp_path, monkeypatch)
    config = load_config(write_registry(tmp_path / "conteb.yaml"))
    base = step_fingerprint(config)
    assert base == step_fingerprint(config)
    prompt_parts = {f"prompt {path.name}" for path in PROMPTS_DIR.glob("*.yaml")}
    assert set(base) == {"registry", "code", *LLM_PARTS} | prompt_parts

    def refusal(run: dict[str, str]) -> str:
        line = fingerprint_refusal("demo__chunk_contexts", run, base, "conteb-1@host")
        assert line is not None and "\n" not in line and line.endswith(f"restart the workers: {RESTART_WORKERS}")
        return line

    # The registry: another temperature.
    edited = step_fingerprint(load_config(write_registry(tmp_path / "edited.yaml", ", temperature: 0.3")))
    assert {part for part in base if base[part] != edited[part]} == {"registry"}
    assert "the worker loaded registry" in refusal(edited) and "prompt file" not in refusal(edited)

    # One prompt file of the copy: only its part, named by its path.
    edit_prompt(prompts, "reformulation")
    edited = step_fingerprint(config)
    assert {part for part in base if base[part] != edited[part]} == {"prompt reformulation.yaml"}
    (clause,) = fingerprint_differences(edited, base)
    assert clause.startswith(
        f"prompt file {prompts.resolve() / 'reformulation.yaml'} {edited['prompt reformulation.yaml']}"
    )
    assert "loaded registry" not in refusal(edited) and "imported code" not in refusal(edited)
    (prompts / "extra.yaml").write_text("name: extra\nversion: 1\nsystem: s\nuser: u\n")
    assert "prompt extra.yaml" in step_fingerprint(config)  # a new file counts too

    # The code: the sources of every package a step imports, found where Python imports them from.
    roots = package_dirs()
    assert [root.name for root in roots] == list(CODE_PACKAGES)
    copies = [shutil.copytree(root, tmp_path / "code" / root.name, ignore=shutil.ignore_patterns("__pycache__"))
              for root in roots]  # fmt: skip
    assert code_version(copies) == code_version() == base["code"]
    cache = tmp_path / "code" / "curation" / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "reformulation.cpython-312.pyc").write_bytes(b"compiled")
    (tmp_path / "code" / "curation" / ".reformulation.py.swp").write_bytes(b"vim")
    (tmp_path / "code" / "curation" / "reformulation.py~").write_bytes(b"backup")
    assert code_version(copies) == base["code"]  # compiled caches and an open editor's files are not code
    source = tmp_path / "code" / "curation" / "reformulation.py"
    source.write_text(source.read_text() + "\n# an edit\n")
    changed = code_version(copies)
    assert changed != base["code"]
    line = refusal({**base, "code": changed})
    assert f"code {changed} but the worker imported code {base['code']}" in line and "loaded registry" not in line

    # Several parts at once: one line naming each; a run's process from before the parts: its registry digest.
    line = refusal({**edited, "registry": "0" * 16, "code": changed})
    assert line.index("loaded registry") < line.index("prompt file") < line.index("imported code")
    assert "the worker loaded registry" in refusal("0123456789abcdef")  # type: ignore[arg-type]
    assert fingerprint_refusal("s", dict(base), base, "w") is None


def test_a_worker_from_another_shell_refuses_the_step_and_the_key_is_never_in_the_fingerprint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-never-in-a-fingerprint-7f3a"
    config = load_config(write_registry(tmp_path / "conteb.yaml"))
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8001/v1")
    run = step_fingerprint(config)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://ana:pw@127.0.0.1:8002/v1?api-key=x")  # the worker's shell
    worker = step_fingerprint(config)
    assert {part for part in run if run[part] != worker[part]} == {"llm endpoint"}
    assert (run["llm endpoint"], worker["llm endpoint"]) == ("http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1")
    line = fingerprint_refusal("demo__chunk_contexts", run, worker, "conteb-1@host")
    assert line is not None and "\n" not in line
    assert "LLM endpoint http://127.0.0.1:8001/v1, but this worker's LLM endpoint is http://127.0.0.1:8002/v1" in line
    assert line.endswith(f"restart the workers from the run's shell: {RESTART_WORKERS}")

    assert secret not in repr(run) + repr(worker)  # the key's source is a part, never its value
    assert run["llm key"] == "$OPENAI_API_KEY"
    monkeypatch.delenv("OPENAI_API_KEY")
    keyless = step_fingerprint(config)
    assert {part for part in run if run[part] != keyless[part]} == {"llm endpoint", "llm key"}
    assert "LLM key source $OPENAI_API_KEY, but this worker's LLM key source is none" in str(
        fingerprint_refusal("s", run, keyless, "w")
    )


def test_load_prompt_reads_an_edited_file_in_the_same_process(tmp_path: Path) -> None:
    folder = shutil.copytree(PROMPTS_DIR, tmp_path / "prompts")
    before = load_prompt("reformulation", folder)
    assert before == load_prompt("reformulation", PROMPTS_DIR)  # the same bytes, the same prompt
    edit_prompt(folder, "reformulation")
    after = load_prompt("reformulation", folder)
    assert after.tag != before.tag and after.version == before.version + 1 and "Be brief." in after.system
    assert load_prompt("reformulation", PROMPTS_DIR) == before  # the project's own file is untouched
    (folder / "reformulation.yaml").unlink()
    with pytest.raises(FileNotFoundError, match=r"reformulation\.yaml: no such prompt file"):
        load_prompt("reformulation", folder)


def context(body: dict[str, Any]) -> dict[str, Any]:
    assert body["response_format"]["json_schema"]["name"] == PROMPT
    return {"context": "A passage from the sample corpus."}


def test_an_in_process_rebuild_asks_again_with_an_edited_prompt(
    tmp_path: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipelines.definitions import build_definitions

    prompts = copy_prompts(tmp_path, monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    contexts = isolated_env / "stages" / "demo" / "chunk_contexts.parquet"
    with OpenAICompatibleServer(context) as server:
        registry = tmp_path / "conteb.yaml"
        registry.write_text(
            write_registry(registry).read_text().replace("llm: {", f"llm: {{base_url: '{server.url}', ")
        )
        job = build_definitions(load_config(registry)).resolve_job_def("build_conteb")  # built once, run twice
        assert job.execute_in_process(instance=dg.DagsterInstance.ephemeral()).success
        first = pq.read_table(contexts)
        asked = len(server.chat_requests())
        old = load_prompt(PROMPT).tag
        assert asked == first.num_rows > 0 and set(first.column("prompt_version").to_pylist()) == {old}

        edit_prompt(prompts, PROMPT)
        new = load_prompt(PROMPT).tag
        assert new != old
        assert job.execute_in_process(instance=dg.DagsterInstance.ephemeral()).success
        second = pq.read_table(contexts)
        assert len(server.chat_requests()) - asked == second.num_rows == first.num_rows  # every chunk asked again
        assert set(second.column("prompt_version").to_pylist()) == {new}
        assert all("Be brief." in r.json()["messages"][0]["content"] for r in server.chat_requests()[asked:])


def test_a_prompt_edited_while_its_stage_asks_tags_each_row_with_the_prompt_it_was_sent_with(
    tmp_path: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows' ``prompt_version`` comes from the requests sent (``llm.prompts.sent_prompt_tag``), not from a second
    load of the prompt: an edit that lands while the stage runs must not tag answers to the old prompt as new."""
    from pipelines.definitions import build_definitions

    prompts = copy_prompts(tmp_path, monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    old = load_prompt(PROMPT).tag
    edited = threading.Event()

    def edit_on_first_request(body: dict[str, Any]) -> dict[str, Any]:
        if not edited.is_set():
            edited.set()
            edit_prompt(prompts, PROMPT)  # the stage has built its requests and is asking: the file changes now
        return context(body)

    with OpenAICompatibleServer(edit_on_first_request) as server:
        registry = write_registry(tmp_path / "conteb.yaml", f", base_url: '{server.url}'")
        job = build_definitions(load_config(registry)).resolve_job_def("build_conteb")
        assert job.execute_in_process(instance=dg.DagsterInstance.ephemeral()).success
        sent_new = sum("Be brief." in r.json()["messages"][0]["content"] for r in server.chat_requests())
        sent_old = len(server.chat_requests()) - sent_new
    new = load_prompt(PROMPT).tag
    assert new != old and sent_old > 0
    tags = pq.read_table(isolated_env / "stages" / "demo" / "chunk_contexts.parquet").column("prompt_version")
    assert (tags.to_pylist().count(old), tags.to_pylist().count(new)) == (sent_old, sent_new)
