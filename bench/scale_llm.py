"""An LLM stage at scale (``bench/scale.py``): ``chunk_contexts`` over a k× SQuAD corpus, in process vs on Celery.

One request per chunk (``curation/contextual.py``: the chunk with its document window), so 5× SQuAD v1.1 dev
(240 documents, 11,790 chunks at 1000 characters) is 11,790 requests. The server is the project's local
OpenAI-compatible test server (``tests/support/openai_server.py``) in a thread of the benchmark's process,
sleeping ``latency_s`` before each answer; :class:`CountingServer` counts the chat requests instead of keeping
their bodies (12k bodies of ~20 KB each). Its answer (:func:`context_answer`) is derived from the passage, so
both runs must store the same contexts.

Both runs are ``dagster job execute -m pipelines.definitions -j build_conteb`` (the run's process under
``/usr/bin/time -v``) on the same registry (:func:`llm_registry`): the corpus as a ``squad_json`` task with
``chunk_contexts: true`` and ``answerability: false``, ``llm.max_concurrency`` requests in flight per step,
``execution.shard_documents`` documents per LLM step, a fresh data folder (so a fresh answer store: nothing is
cached) and a fresh Dagster home. They differ in ``execution.executor`` only:

* ``in_process``: every step in the run's process, the shards one after the other;
* ``celery``: redis and ``workers`` Dagster Celery workers (concurrency 1 each) started by the project's
  ``scripts/workers.sh`` through ``tests.support.celery_cluster.CeleryCluster``, broker on a free port; each
  step goes to a worker, so two shards run at once. The workers' peak RSS (``VmHWM`` of each worker's process
  group) and their CPU seconds during the run are read before they stop.

Read back: the run's LLM ledger (calls, prompt, cached and completion tokens, dollars at the ledger's gpt-4o
prices), where ``cached_tokens`` is what the test server reported as a provider's automatic prompt cache would.
Checked (else :class:`~bench.scale_runs.BenchError`): exit status 0, one served request per chunk, one ledger call
and one context per chunk, nothing quarantined; the caller compares the two runs' contexts
(:attr:`LLMRun.contexts_digest`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.scale_runs import (
    BenchError,
    ProcessMeasure,
    RunTiming,
    clean_env,
    dagster_home,
    group_usage,
    registry_text,
    run_timing,
    tail,
    timed_process,
)
from tests.support.openai_server import OpenAICompatibleServer, RecordedRequest

TASK = "squad-llm"
STAGE_STEPS = "chunk_contexts"  # every step of the stage has it in its key (split, shards, merge)
SHARD_STEPS = "chunk_contexts__shard["  # the stage's mapped shard steps (assets/sharded.py: <name>__shard[sNNNN])
API_KEY = "sk-bench-scale"
MODEL = "gpt-4o"


def context_answer(body: dict[str, Any]) -> dict[str, Any]:
    """``{"context": "About: <the passage's first 8 words>"}``: deterministic, different per chunk."""
    user = str(body["messages"][-1]["content"])
    words = user.rsplit("<passage>", 1)[-1].replace("</passage>", " ").split()[:8]
    return {"context": "About: " + (" ".join(words) or "(empty passage)")}


class CountingServer(OpenAICompatibleServer):
    """The test server, counting chat requests instead of recording them (``chat_count``)."""

    def __init__(self, latency_s: float) -> None:
        super().__init__(context_answer, latency_s=latency_s)
        self._counted = 0
        self._count_lock = threading.Lock()

    def _record(self, request: RecordedRequest) -> None:  # the server's recording hook: count, keep nothing
        if request.method == "POST" and request.path.split("?")[0] == "/v1/chat/completions":
            with self._count_lock:
                self._counted += 1

    @property
    def chat_count(self) -> int:
        with self._count_lock:
            return self._counted


@dataclass(frozen=True)
class LLMSetup:
    """What both runs share: requests in flight per step, documents per shard, Celery workers."""

    max_concurrency: int = 16
    shard_documents: int = 24
    workers: int = 2


def llm_registry(corpus: Path, base_url: str, executor: str, setup: LLMSetup, broker_port: int) -> dict[str, Any]:
    """The registry of one measured run (see the module docstring)."""
    return {
        "llm": {"base_url": base_url, "model": MODEL, "max_concurrency": setup.max_concurrency},
        "execution": {
            "executor": executor,
            "shard_documents": setup.shard_documents,
            "celery": {
                "broker": f"redis://127.0.0.1:{broker_port}/0",
                "backend": f"redis://127.0.0.1:{broker_port}/1",
                "workers": setup.workers,
                "concurrency": 1,
            },
        },
        "tasks": [
            {
                "name": TASK,
                "source": {"kind": "squad_json", "path": str(corpus)},
                "split": "validation",
                "chunking": {"chunk_size": 1000, "chunk_overlap": 0},
                "chunk_contexts": True,
                "answerability": False,
            }
        ],
    }


@dataclass
class LLMRun:
    """One run: its process, its event-log timing, requests served, contexts, workers' peak RSS (Celery)."""

    executor: str
    process: ProcessMeasure
    timing: RunTiming
    requests: int
    contexts: int
    contexts_digest: str
    shard_steps: int
    steps_by_pid: dict[int, int] = field(default_factory=dict)  # pid -> steps it ran
    usage: dict[str, float] = field(default_factory=dict)  # the ledger: calls, prompt/cached/completion tokens, USD
    server_cpu_s: float = 0.0  # CPU seconds of the benchmark's process (the test server's threads) during the run
    worker_peak_rss_mib: dict[str, float] = field(default_factory=dict)  # worker -> max over its processes
    worker_cpu_s: dict[str, float] = field(default_factory=dict)  # worker -> CPU seconds of its processes in the run

    @property
    def client_cpu_s(self) -> float:
        """CPU seconds of the run: the run's process, plus the workers' during the run (Celery)."""
        return self.process.cpu_s + sum(self.worker_cpu_s.values())

    @property
    def stage_s(self) -> float:
        """The stage's wall seconds: first ``chunk_contexts`` step start to last step end (split to merge; other
        steps the executor ran in between included)."""
        return self.timing.span_s(STAGE_STEPS)

    @property
    def shards_s(self) -> float:
        """Wall seconds of the shard steps: the first shard's start to the last shard's end (where the requests go)."""
        return self.timing.span_s(SHARD_STEPS)


def celery_missing() -> str | None:
    """Why the Celery executor cannot run here, or ``None``."""
    from tests.support.celery_cluster import REDIS_SERVER

    if importlib.util.find_spec("dagster_celery") is None or importlib.util.find_spec("celery") is None:
        return f"dagster-celery/celery are not installed in {sys.prefix}"
    if REDIS_SERVER is None:
        return "redis-server not found (scripts/install-redis.sh)"
    if not (Path(sys.executable).parent / "celery").exists():
        return f"no celery command beside {sys.executable}"
    return None


def read_contexts(data_dir: Path, expected: int) -> tuple[int, str]:
    """``(rows, digest)`` of the stage's ``chunk_contexts`` table (digest over sorted ``(chunk_id, context)``)."""
    import pyarrow.parquet as pq

    stages = data_dir / "stages" / TASK
    table = pq.read_table(stages / "chunk_contexts.parquet", columns=["chunk_id", "context"])
    quarantined = pq.ParquetFile(stages / "context_quarantine.parquet").metadata.num_rows
    if table.num_rows != expected or quarantined:
        raise BenchError(f"{stages}: {table.num_rows} contexts for {expected} chunks, {quarantined} quarantined")
    pairs = sorted(zip(table.column("chunk_id").to_pylist(), table.column("context").to_pylist(), strict=True))
    return table.num_rows, hashlib.sha256(repr(pairs).encode()).hexdigest()


def ledger(data_dir: Path) -> dict[str, float]:
    """The run's LLM ledger (``data/llm/answers.sqlite``, ``AnswerCache.usage``): calls, tokens, dollars."""
    from dataclasses import asdict

    from llm.cache import AnswerCache

    cache = AnswerCache(data_dir / "llm" / "answers.sqlite")
    try:
        return asdict(cache.usage())
    finally:
        cache.close()


def _finish(executor: str, process: ProcessMeasure, home: Path, data: Path, served: int, chunks: int) -> LLMRun:
    if process.returncode != 0:
        raise BenchError(f"build_conteb ({executor}) exited {process.returncode}:\n{tail(process.log)}")
    if served != chunks:
        raise BenchError(f"{executor}: the server answered {served} chat requests for {chunks} chunks")
    rows, digest = read_contexts(data, chunks)
    usage = ledger(data)
    if usage["calls"] != chunks:
        raise BenchError(f"{executor}: the ledger holds {usage['calls']} calls for {chunks} chunks")
    timing = run_timing(home)
    by_pid: dict[int, int] = {}
    for step in timing.steps_s:
        by_pid[timing.step_pids[step]] = by_pid.get(timing.step_pids[step], 0) + 1
    shards = len(timing.steps_matching(SHARD_STEPS))
    return LLMRun(executor, process, timing, served, rows, digest, shards, by_pid, usage=usage)


def _command() -> list[str]:
    return [str(Path(sys.executable).parent / "dagster"), "job", "execute", "-m", "pipelines.definitions",
            "-j", "build_conteb"]  # fmt: skip


def run_in_process(corpus: Path, work: Path, server: CountingServer, setup: LLMSetup, chunks: int) -> LLMRun:
    """The in-process run (see the module docstring); ``chunks``: how many requests it must make."""
    from tests.support.celery_cluster import free_port

    work.mkdir(parents=True, exist_ok=True)
    registry = work / "conteb.yaml"
    registry.write_text(registry_text(llm_registry(corpus, server.url, "in_process", setup, free_port())))
    home, data = dagster_home(work / "dagster-home"), work / "data"
    env = clean_env(CONTEB_CONFIG=str(registry), CONTEB_DATA_DIR=str(data), DAGSTER_HOME=str(home),
                    OPENAI_API_KEY=API_KEY)  # fmt: skip
    server.prompt_cache.clear()
    before, cpu = server.chat_count, time.process_time()
    process = timed_process(_command(), env, work / "run.log")
    run = _finish("in_process", process, home, data, server.chat_count - before, chunks)
    run.server_cpu_s = time.process_time() - cpu
    return run


def run_celery(corpus: Path, work: Path, server: CountingServer, setup: LLMSetup, chunks: int) -> LLMRun:
    """The Celery run: broker and workers up (``scripts/workers.sh``), the run, the workers' RSS, then stop."""
    from tests.support.celery_cluster import CeleryCluster, free_port

    registry = registry_text(llm_registry(corpus, server.url, "celery", setup, free_port()))
    cluster = CeleryCluster(work, registry, workers=setup.workers, extra_env={"OPENAI_API_KEY": API_KEY})
    cluster.start()
    try:
        server.prompt_cache.clear()
        idle = {name: group_usage(pid) for name, pid in cluster.worker_pids().items()}
        before, cpu = server.chat_count, time.process_time()
        process = timed_process(_command(), cluster.env, work / "run.log")
        server_cpu = time.process_time() - cpu
        usage = {name: group_usage(pid) for name, pid in cluster.worker_pids().items()}
    except BaseException:
        print(cluster.worker_logs()[-4000:], file=sys.stderr)
        raise
    finally:
        cluster.stop()
    run = _finish("celery", process, cluster.dagster_home, cluster.data_dir, server.chat_count - before, chunks)
    run.server_cpu_s = server_cpu
    run.worker_peak_rss_mib = {name: max((rss for rss, _ in u.values()), default=0.0) for name, u in usage.items()}
    run.worker_cpu_s = {
        name: sum(c for _, c in u.values()) - sum(c for _, c in idle[name].values()) for name, u in usage.items()
    }
    return run
