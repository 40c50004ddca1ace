"""Shared fixtures: project paths, the real corpora in ../shared/data, isolated data folders, and the sample built
once per test session (``built_sample``), shared by the xdist workers (``make test`` runs ``pytest -n``)."""

from __future__ import annotations

import fcntl
import gzip
import json
import math
import os
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
SAMPLE_DIR = ROOT / "data" / "sample"


@dataclass(frozen=True)
class SampleCounts:
    """What ``data/sample`` holds, counted with the project's own loader and chunker (its README, "Counts")."""

    documents: int
    chunks: int  # at 1000 characters, no overlap: the chunking of conteb.yaml's sample task
    queries: int

    def shard_size(self, shards: int) -> int:
        """Documents per shard for about ``shards`` shards of the sample: ``ceil(documents / shards)``."""
        return math.ceil(self.documents / shards)

    def shard_count(self, size: int) -> int:
        """How many shards of ``size`` documents the sample makes: ``ceil(documents / size)``."""
        return math.ceil(self.documents / size)


@cache
def sample_counts() -> SampleCounts:
    """The sample's counts, computed from its files, so that tests about something else do not hard-code them."""
    from conteb.config import ChunkingConfig
    from curation.chunking import chunk_documents
    from curation.sources.sample import load_sample

    source = load_sample(SAMPLE_DIR)
    chunks = chunk_documents(source.documents_table(), ChunkingConfig(chunk_size=1000, chunk_overlap=0)).chunks
    return SampleCounts(len(source.documents), chunks.num_rows, len(source.queries))


def pytest_addoption(parser: pytest.Parser) -> None:
    """The options of :mod:`tests.support.schedule` (``--save-durations``)."""
    from tests.support.schedule import pytest_addoption as schedule_options

    schedule_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    """Longest test files first (:mod:`tests.support.schedule`), kept by xdist; one torch thread per xdist worker.

    ``make test`` runs more workers than cores (``pytest -n``, Makefile ``TEST_WORKERS``); each worker's torch
    starting a thread per core made them spin against each other: the whole suite on 4 workers took 7:03 with
    torch's default threads (the browser and Celery tests skipped) and 5:04 with one (all of them run; 2 cores,
    issue 21's note). Set ``OMP_NUM_THREADS`` to override; subprocesses the tests start inherit it.
    """
    from tests.support.schedule import LongestFirst

    config.pluginmanager.register(LongestFirst(config), "conteb-longest-first")
    # xdist's loadscope/loadfile scheduler re-sorts the files by their number of tests (--loadscope-reorder, on by
    # default), which put the long end-to-end files, with few tests each, last: the order above is kept instead.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` (the real corpora); the test is skipped when the folder is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real corpora not available: {SHARED_DATA} is missing (see shared/data/MANIFEST.md)")
    return SHARED_DATA


def offline_environment(patch: pytest.MonkeyPatch, root: Path, data_dir: Path) -> Path:
    """Point ``patch``'s environment at ``root``: ``data_dir`` as ``CONTEB_DATA_DIR`` (returned), Dagster's home
    (telemetry off) and Hugging Face's under ``root``, the hubs offline, no registry override and no LLM key."""
    patch.setenv("CONTEB_DATA_DIR", str(data_dir))
    patch.setenv("DAGSTER_HOME", str(root / "dagster-home"))
    patch.setenv("HF_HOME", str(root / "hf-home"))
    patch.setenv("HF_DATASETS_OFFLINE", "1")
    patch.setenv("HF_HUB_OFFLINE", "1")
    for name in ("CONTEB_CONFIG", "CONTEB_PROMPTS_DIR", "OPENAI_API_KEY", "OPENAI_BASE_URL"):  # offline, own prompts
        patch.delenv(name, raising=False)
    (root / "dagster-home").mkdir(parents=True, exist_ok=True)
    (root / "dagster-home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return data_dir


@pytest.fixture(autouse=True)
def interrupts_as_in_a_terminal() -> None:
    """Ctrl-C and SIGTERM as a terminal delivers them, whatever the suite inherited or a test left behind.

    A suite started as a background job of a non-interactive shell (``make test &``, ``nohup``) inherits SIGINT
    ignored; Dagster's in-process runs map SIGTERM to SIGINT's handler, so SIGTERM ends ignored too; processes the
    tests start inherit both. Tests of interrupts and of supervision need the defaults: restored before each test.
    """
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test writes under its own tmp folder, never into the repository's data/."""
    return offline_environment(monkeypatch, tmp_path, tmp_path / "data-out")


SAMPLE_REVIEWER = "sample-reviewer"  # the person who decides the sample's pending review items in built_sample
_DONE = ".built"


def build_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """``<session temp root>/<name>``, filled by ``build(folder)`` once for the whole test session.

    Under pytest-xdist every worker has its own base temp folder below one common parent; the folder is made
    there, under an exclusive ``fcntl`` lock, so the first worker that asks builds it and the others wait, then
    read it (the pattern of pytest-xdist's docs, "Making session-scoped fixtures execute only once"). A build
    that raises leaves no marker: the next worker that asks builds again (and fails the same way, in its own
    test). Callers must treat the folder as read-only: tests that write copy it first.
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    folder = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (folder / _DONE).exists():
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir()
                build(folder)
                (folder / _DONE).write_text("")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return folder


@dataclass(frozen=True)
class BuiltSample:
    """The repository's ``conteb.yaml`` (its ``sample`` task, offline) built as a new user does: ``build_conteb``
    stops at the review gate, a person (:data:`SAMPLE_REVIEWER`) accepts every pending item with
    ``conteb review accept``, and the rerun completes.

    ``data_dir`` is that build's ``CONTEB_DATA_DIR`` (``conteb/sample/`` = the published dataset,
    ``stages/sample/``, ``review/review.sqlite``); of the first run (stopped at the gate, a successful run in
    Dagster's terms): ``published_at_gate`` whether the dataset folder existed after it, ``pending`` and ``flagged``
    the review item ids it left pending (and those of them flagged), ``gate_waiting`` the reviewed tables it observed
    waiting for review (``"<asset>"``), ``gate_skipped`` the steps Dagster skipped because of them, and
    ``gate_failures`` the checks that failed in it (``"<asset>:<check>"``; none);
    ``run_ids`` the first and the second run, recorded in the Dagster instance at ``instance_dir``
    (:meth:`instance`). Shared by every test of the session (all xdist workers): read-only, copy it
    (:meth:`copy_data`) to write.
    """

    data_dir: Path
    instance_dir: Path
    published_at_gate: bool
    pending: tuple[str, ...]
    flagged: tuple[str, ...]
    gate_waiting: tuple[str, ...]
    gate_skipped: tuple[str, ...]
    gate_failures: tuple[str, ...]
    run_ids: tuple[str, str]

    @property
    def dataset(self) -> Path:
        """The published task folder (``datasets.load_dataset(dataset, "documents", split="test")``)."""
        return self.data_dir / "conteb" / "sample"

    def copy_data(self, target: Path) -> Path:
        """A writable copy of ``data_dir`` at ``target`` (returned; ``target`` may exist, empty or not)."""
        shutil.copytree(self.data_dir, target, dirs_exist_ok=True)
        return target

    def instance(self):  # -> dg.DagsterInstance (dagster is imported lazily, as everywhere in this file)
        """The Dagster instance both runs were recorded in (open it for reading only)."""
        import dagster as dg
        from dagster._core.instance.ref import InstanceRef

        return dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(self.instance_dir)))


def _build_the_sample(folder: Path) -> None:
    """:class:`BuiltSample`'s build, into ``folder`` (``data/``, ``dagster-home/``, ``built.json``), in the
    environment of :func:`isolated_env`."""
    import dagster as dg
    from click.testing import CliRunner

    from cli.main import main
    from conteb.storage import dataset_dir, review_store_path
    from pipelines.definitions import build_definitions
    from pipelines.run_outcome import waiting_tables
    from project.config import load_config
    from review.store import ReviewStore

    config = ROOT / "conteb.yaml"
    with pytest.MonkeyPatch.context() as patch:
        data_dir = offline_environment(patch, folder, folder / "data")
        instance = dg.DagsterInstance.local_temp(str(folder / "dagster-home"))
        with instance:

            def run() -> dg.ExecuteInProcessResult:
                defs = build_definitions(load_config(config))
                job = defs.resolve_job_def("build_conteb")
                return job.execute_in_process(instance=instance, raise_on_error=False)

            first = run()
            evaluations = first.get_asset_check_evaluations()
            failures = sorted(f"{e.asset_key.to_user_string()}:{e.check_name}" for e in evaluations if not e.passed)
            gate = waiting_tables(first.all_events)
            skipped = sorted(
                e.step_key or "?" for e in first.all_events if e.event_type == dg.DagsterEventType.STEP_SKIPPED
            )
            store = ReviewStore(review_store_path(data_dir))
            waiting = [item for item in store.items(task="sample") if item.status == "pending"]
            store.close()
            if not first.success or not gate or not waiting:
                raise AssertionError(f"the sample's first build should stop at the review gate; failed: {failures}")
            published_at_gate = dataset_dir(data_dir, "sample").exists()
            accept = ["--config", str(config), "review", "accept", "--task", "sample", "--reviewer", SAMPLE_REVIEWER]
            decided = CliRunner().invoke(main, accept)
            if decided.exit_code != 0:
                raise AssertionError(f"conteb review accept failed: {decided.output}")
            second = run()
            if not second.success:
                raise AssertionError("the sample's rerun after the review did not complete")
    built = {
        "published_at_gate": published_at_gate,
        "pending": [item.item_id for item in waiting],
        "flagged": [item.item_id for item in waiting if item.flagged],
        "gate_waiting": list(gate),
        "gate_skipped": skipped,
        "gate_failures": failures,
        "run_ids": [first.run_id, second.run_id],
    }
    (folder / "built.json").write_text(json.dumps(built))


@pytest.fixture(scope="session")
def tiny_model_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random ModernBERT saved as a sentence-transformers folder (``model: <folder>`` in a registry), once per
    test session: end-to-end tests of the mechanics of model-based systems use it at a fraction of MiniLM's cost
    (MiniLM itself: tests/test_mteb_task.py, tests/test_mteb_model.py, tests/training/test_learns.py)."""
    from tests.support.tiny_models import tiny_modernbert

    folder = tmp_path_factory.mktemp("tiny-model") / "tiny-modernbert"
    tiny_modernbert().save(str(folder))
    return folder


@pytest.fixture(scope="session")
def built_sample(tmp_path_factory: pytest.TempPathFactory) -> BuiltSample:
    """The sample, built and reviewed once per test session (:class:`BuiltSample`; read-only)."""
    folder = build_once(tmp_path_factory, "built-sample", _build_the_sample)
    built = json.loads((folder / "built.json").read_text())
    return BuiltSample(
        data_dir=folder / "data",
        instance_dir=folder / "dagster-home",
        published_at_gate=built["published_at_gate"],
        pending=tuple(built["pending"]),
        flagged=tuple(built["flagged"]),
        gate_waiting=tuple(built["gate_waiting"]),
        gate_skipped=tuple(built["gate_skipped"]),
        gate_failures=tuple(built["gate_failures"]),
        run_ids=tuple(built["run_ids"]),
    )


def write_squad(path: Path, articles: list[dict]) -> Path:
    """Write a SQuAD-format file (``.gz`` when the name says so)."""
    payload = json.dumps({"version": "1.1", "data": articles})
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(payload)
    else:
        path.write_text(payload, encoding="utf-8")
    return path


def squad_article(title: str | None, paragraphs: list[tuple[str, list[tuple[str, str, str, int]]]]) -> dict:
    """Article from ``[(context, [(qid, question, answer, answer_start), ...]), ...]``."""
    article = {
        "paragraphs": [
            {
                "context": context,
                "qas": [
                    {"id": qid, "question": q, "answers": [{"text": a, "answer_start": s}]} for qid, q, a, s in qas
                ],
            }
            for context, qas in paragraphs
        ]
    }
    if title is not None:
        article["title"] = title
    return article


def materialize_task(config_path: Path):
    """Every asset and dataset check of the first task of the registry at ``config_path``, materialized in process
    on an ephemeral instance with the definitions' resources: ``(result, checks)``; a failed step leaves
    ``result.success`` false instead of raising."""
    import dagster as dg

    from pipelines.definitions import build_definitions, task_assets
    from project.config import load_config

    config = load_config(config_path)
    assets, checks = task_assets(config.tasks[0])
    result = dg.materialize(
        [*assets, *checks],
        resources=build_definitions(config).resources,
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )
    return result, checks


def published_path(folder: Path, config: str, split: str) -> Path:
    """The one file of ``config``/``split`` that the published ``folder``'s dataset card names."""
    from conteb.published import config_shards

    [path] = config_shards(folder, config, split)
    return path


def published_table(folder: Path, config: str, split: str):
    """The rows of ``config``/``split`` of the published ``folder``, from the file its dataset card names."""
    import pyarrow.parquet as pq

    return pq.read_table(published_path(folder, config, split))


def load_conteb(folder: Path, config: str, split: str = "test"):
    """``datasets.load_dataset(folder, config, split=split)`` with a cache private to the test.

    (``datasets`` reads ``HF_HOME`` once at import, so without this, tests would share a cache
    keyed partly by folder name and could read each other's splits.)
    """
    import datasets

    return datasets.load_dataset(str(folder), config, split=split, cache_dir=str(folder.parent / ".hf-cache"))
