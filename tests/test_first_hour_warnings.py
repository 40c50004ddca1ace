"""What the make targets print is what matters: ``make evaluate`` prints a warning repeated per document (the
encoder's truncation warning) once, with its count; late chunking's long documents raise no tokenizer warning; no
make target that runs a dagster command prints Dagster's SupersessionWarning."""

from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
from pathlib import Path

import pytest

import evaluation.runner as runner
from evaluation.config import BM25System, EvaluationConfig
from tests.conftest import ROOT
from tests.evaluation.toy import toy_corpus
from tests.support.celery_cluster import free_port

CONFIG = EvaluationConfig(
    systems=(BM25System(kind="bm25", name="bm25"), BM25System(kind="bm25", name="bm25-plain", stemmer=None)),
    bootstrap={"resamples": 100},
    significance={"resamples": 100, "comparisons": []},
    chunk_sizes={"enabled": False, "systems": []},
)
ENCODER = logging.getLogger("embedding.encoder")


def test_a_repeated_warning_is_printed_once_with_its_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = runner.prepare_system

    def truncating(system, corpus, *args, **kwargs):
        for document in range(10):  # what the encoder logs: one warning per document with an over-long chunk
            ENCODER.warning("%d chunk(s) longer than %d tokens truncated to fit the context", document % 2 + 1, 254)
        ENCODER.info("keeping eager attention: %s", "not a warning")
        return real(system, corpus, *args, **kwargs)

    monkeypatch.setattr(runner, "prepare_system", truncating)
    lines: list[str] = []
    with caplog.at_level(logging.INFO, logger="embedding.encoder"):
        runner.evaluate_task(
            toy_corpus(), CONFIG, models_dir=tmp_path / "models", reports_dir=tmp_path, log=lines.append
        )
    warned = [r for r in caplog.records if r.name == "embedding.encoder" and r.levelno >= logging.WARNING]
    assert warned == []  # none printed one by one
    assert [r.getMessage() for r in caplog.records if r.name == "embedding.encoder"] == [
        "keeping eager attention: not a warning"
    ] * 2
    [summary] = [line for line in lines if "truncated to fit the context" in line]
    assert "20 times" in summary and summary.startswith("warning: 1 chunk(s) longer than 254 tokens")

    ENCODER.warning("after the evaluation: printed as usual")
    assert caplog.records[-1].getMessage() == "after the evaluation: printed as usual"


class Lines(logging.Handler):
    """The messages a logger emits (transformers' loggers do not propagate to the root, where caplog listens)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.parametrize("boundaries", ["separator", "offsets"])
def test_a_document_longer_than_the_context_tokenizes_without_the_tokenizer_warning(boundaries: str) -> None:
    """Late chunking tokenizes whole documents (and the chunk-size study's 8000-character chunks) longer than the
    model's 512 tokens on purpose, then windows or cuts them itself: transformers' "Token indices sequence length is
    longer than the specified maximum sequence length" warning (once per tokenizer) is not printed."""
    from transformers import AutoTokenizer

    from embedding.models import offline_minilm_path
    from embedding.windows import PoolingPolicy, WindowPlanner

    def fresh_tokenizer():  # the warning is once per tokenizer object
        return AutoTokenizer.from_pretrained(str(offline_minilm_path()))

    lines = Lines()
    logging.getLogger("transformers").addHandler(lines)
    try:
        planner = WindowPlanner(fresh_tokenizer(), PoolingPolicy(boundaries=boundaries), max_length=512)
        long_chunk = " ".join(f"Ostherm glass museum fact {n}." for n in range(150))  # > 512 tokens alone
        [plan] = planner.plans([[long_chunk, "A short second chunk."]])
        assert len(plan.chunks[0]) > 512
        assert not [m for m in lines.messages if "Token indices sequence length" in m]

        fresh_tokenizer()([long_chunk])  # the same call without verbose=False warns: the check above can fail
        assert [m for m in lines.messages if "Token indices sequence length" in m]
    finally:
        logging.getLogger("transformers").removeHandler(lines)


DRY_RUN_TARGETS = ("run", "evaluate", "reproduce", "dev")
"""Shown by ``make -n``; not ``train``: its recipe calls ``$(MAKE)``, which make runs even under ``-n``."""


def dagster_lines() -> list[str]:
    """The shell lines ``make -n`` shows for the targets that run a dagster command, those lines only."""
    shown = subprocess.run(
        ["make", "-n", "--no-print-directory", *DRY_RUN_TARGETS], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    return [line for line in shown.stdout.splitlines() if "bin/dagster " in line]


def test_every_make_target_runs_dagster_without_its_supersession_warning() -> None:
    """Each dagster command of the make targets carries the one filter (the Makefile's DAGSTER); and ``make dev``'s
    command, started for real, prints its first lines without the SupersessionWarning (Dagster prints it first)."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert makefile.count("$(BIN)/dagster") == 1, "a dagster command outside the Makefile's DAGSTER variable"
    assert "\t@$(JOB) -j train_insent " in makefile
    lines = dagster_lines()
    assert len(lines) == len(DRY_RUN_TARGETS)
    unfiltered = [line for line in lines if "PYTHONWARNINGS=ignore:Function:Warning:click.core " not in line]
    assert not unfiltered, unfiltered
    [dev] = [line for line in lines if "bin/dagster dev " in line]
    command = f"exec {dev} -p {free_port()} 2>&1"
    process = subprocess.Popen(
        ["bash", "-c", command],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    head: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:  # Dagster's warning comes before its first log line
            head.append(line)
            if "Launching Dagster services" in line or len(head) > 20:
                break
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert any("Launching Dagster services" in line for line in head), (shlex.quote(command), head)
    assert not [line for line in head if "SupersessionWarning" in line], head


def test_loading_a_model_draws_no_loading_bar(capsys: pytest.CaptureFixture[str]) -> None:
    """``make evaluate`` printed transformers' "Loading weights: 100%|...| 103/103" bar for the offline MiniLM."""
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    from embedding.models import load_model, offline_minilm_path

    assert transformers_logging.is_progress_bar_enabled()
    load_model("offline-minilm", device="cpu")
    assert "Loading weights" not in capsys.readouterr().err
    assert transformers_logging.is_progress_bar_enabled()  # restored for everything else

    SentenceTransformer(str(offline_minilm_path()), device="cpu")  # as loaded before: the bar (this check can fail)
    assert "Loading weights" in capsys.readouterr().err
