"""End to end on CPU: a tiny random ModernBERT trained with InSeNT on the sample ConTEB folder.

Covers events, checkpoints, kill-and-resume (same weights as an uninterrupted run), extending a
finished run, the saved sentence-transformers folder and its card, and the CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from safetensors.torch import load_file
from sentence_transformers import SentenceTransformer

from embedding.models import offline_minilm_path
from tests.conftest import ROOT
from tests.support.tiny_models import tiny_modernbert
from tests.training.test_data import N_DOCUMENTS, build_sample_conteb
from tests.training.test_supervision import held_elsewhere
from training.checkpoints import finished, latest_checkpoint
from training.config import TrainingConfig, make_config
from training.loop import train
from training.result import TrainResult
from training.supervision import FolderInUse, in_use_message


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("train-e2e")
    folder = build_sample_conteb(root / "sample")
    base = root / "tiny-modernbert"
    tiny_modernbert(offline_minilm_path(), seed=0, device="cpu").save(str(base))
    return {"root": root, "data": folder, "base": base}


def config(workspace: dict[str, Path], output: str, **overrides: Any) -> TrainingConfig:
    return make_config(settings(workspace, output, **overrides))


def settings(workspace: dict[str, Path], output: str, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "data": [workspace["data"]],
        "base_model": str(workspace["base"]),
        "output": workspace["root"] / output,
        "max_steps": 6,
        "checkpoint_every": 3,
        "eval_every": 3,
        "validation_fraction": 0.2,
        "lr": 1e-3,
        "device": "cpu",
        "seed": 0,
    }
    values.update(overrides)
    return values


class Killed(Exception):
    """Stands for the process being killed right after a checkpoint was written."""


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


@pytest.fixture(scope="module")
def uninterrupted(workspace: dict[str, Path]) -> tuple[TrainResult, list[tuple[str, dict]]]:
    events: list[tuple[str, dict]] = []
    result = train(config(workspace, "full"), on_event=lambda kind, payload: events.append((kind, payload)))
    return result, events


@pytest.fixture(scope="module", autouse=True)
def deterministic() -> Iterator[None]:
    """Deterministic kernels for this module only (resume must reproduce an uninterrupted run)."""
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    yield
    torch.use_deterministic_algorithms(previous)


def test_events_and_saved_model(
    workspace: dict[str, Path], uninterrupted: tuple[TrainResult, list[tuple[str, dict]]]
) -> None:
    result, events = uninterrupted
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "start" and kinds[-1] == "done"
    assert [p["step"] for k, p in events if k == "step"] == [1, 2, 3, 4, 5, 6]
    assert [p["step"] for k, p in events if k == "eval"] == [0, 3, 6]
    assert [p["step"] for k, p in events if k == "checkpoint"] == [3, 6]
    step = next(p for k, p in events if k == "step")
    assert set(step) >= {"step", "loss", "in_sequence", "in_batch", "lr", "tokens_per_s"} and step["tokens_per_s"] > 0
    assert step["lr"] == 0.0  # warm-up starts from zero (1 warm-up step of 6)
    done = events[-1][1]
    assert set(done) >= {"steps", "final_loss", "validation", "wall_s", "device", "model_path", "loss_history"}
    assert done["steps"] == result.steps == 6 and done["device"] == "cpu"
    assert len(done["loss_history"]) == 6 and np.isfinite(done["final_loss"])
    assert 0 <= done["validation"]["ndcg10_in_document"] <= 1 and 0 <= done["validation"]["ndcg10_in_batch"] <= 1
    start = events[0][1]
    assert start["stats"]["validation_documents"] == round(0.2 * N_DOCUMENTS)  # validation_fraction 0.2
    assert start["stats"]["windowed_documents"] > 0
    json.dumps([payload for _, payload in events])  # Pipes forwards them as JSON

    output = workspace["root"] / "full"
    model = SentenceTransformer(str(output), device="cpu")
    vectors = model.encode(["Where is Lyon?", "The Danube flows east."])
    assert vectors.shape == (2, 64) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    card = (output / "README.md").read_text()
    assert "λ_seq = 0.1" in card and "library_name: sentence-transformers" in card
    assert f"base_model: {workspace['base']}" in card and "- insent" in card
    assert f"{result.validation['ndcg10_in_document']:.4f}" in card
    assert f"{result.validation_before['ndcg10_in_batch']:.4f}" in card


def test_kill_and_resume_matches_uninterrupted(
    workspace: dict[str, Path], uninterrupted: tuple[TrainResult, list[tuple[str, dict]]]
) -> None:
    full, _ = uninterrupted

    def kill_after_checkpoint(kind: str, payload: dict) -> None:
        if kind == "checkpoint" and payload["step"] == 3:
            raise Killed

    cfg = config(workspace, "killed")
    with pytest.raises(Killed):
        train(cfg, on_event=kill_after_checkpoint)
    assert latest_checkpoint(cfg.output).name == "step-3"
    assert not (cfg.output / "model.safetensors").exists()
    events: list[tuple[str, dict]] = []
    resumed = train(cfg, on_event=lambda kind, payload: events.append((kind, payload)), resume=True)
    assert events[0][1]["resumed_from"] == 3 and resumed.resumed_from == 3
    assert [p["step"] for k, p in events if k == "step"] == [4, 5, 6]
    assert resumed.steps == 6 and len(resumed.loss_history) == 6
    for mine, theirs in zip(resumed.loss_history, full.loss_history, strict=True):
        assert mine["lr"] == pytest.approx(theirs["lr"], abs=1e-12)
        assert mine["loss"] == pytest.approx(theirs["loss"], abs=1e-5)
    expected, actual = weights(workspace["root"] / "full"), weights(cfg.output)
    assert expected.keys() == actual.keys()
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], atol=1e-5, rtol=1e-5, msg=name)
    assert resumed.validation_before == full.validation_before


RESUMED_TOLERANCE = 1e-5
"""How far a resumed run's weights may lie from an uninterrupted run's (absolute and relative, each weight). Both
runs take the same steps over the same batches from the same state, under deterministic kernels; measured: equal."""


def test_a_rerun_of_the_training_process_continues_where_ctrl_c_stopped_it(
    workspace: dict[str, Path], uninterrupted: tuple[TrainResult, list[tuple[str, dict]]]
) -> None:
    """``make train`` after Ctrl-C: the Pipes process (``pipelines.pipes_train.train_from``, what it runs on every
    rank) continues from the last complete checkpoint, says so in the log, and ends with the weights of a run never
    stopped. Ctrl-C lands during step 4, after the checkpoint of step 3 (``checkpoint_every: 3``)."""
    from pipelines.pipes_train import log_lines, train_from

    output = workspace["root"] / "pipes"
    config_file = workspace["root"] / "pipes.train.yaml"
    values = settings(workspace, "pipes") | {"data": [str(workspace["data"])], "output": str(output)}
    config_file.write_text(yaml.safe_dump(values))

    def ctrl_c_in_step_4(kind: str, payload: dict) -> None:
        if kind == "step" and payload["step"] == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_from(config_file, ctrl_c_in_step_4)
    assert latest_checkpoint(output).name == "step-3" and not (output / "model.safetensors").exists()
    events: list[tuple[str, dict]] = []
    resumed = train_from(config_file, partial(_record, events))
    assert f"resuming from step 3 of {output}" in log_lines(*events[0])
    assert [p["step"] for k, p in events if k == "step"] == [4, 5, 6] and resumed.resumed_from == 3
    expected, actual = weights(workspace["root"] / "full"), weights(output)
    assert expected.keys() == actual.keys()
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], atol=RESUMED_TOLERANCE, rtol=RESUMED_TOLERANCE)


def test_a_folder_in_use_is_refused_before_anything_is_written(workspace: dict[str, Path]) -> None:
    """A second training of a model folder that a live training holds: one line naming the folder and the pid."""
    output = workspace["root"] / "busy"
    with held_elsewhere(output) as holder, pytest.raises(FolderInUse) as refused:
        train(config(workspace, "busy", max_steps=1, checkpoint_every=0, eval_every=0))
    assert str(refused.value) == in_use_message(output, str(holder.pid))
    assert not output.exists()


def test_extend_a_finished_run(workspace: dict[str, Path]) -> None:
    """``--resume`` extends a finished run (``make train``'s rerun would start it afresh: it is marked finished); the
    extension is unfinished until its own final model is saved."""
    output = workspace["root"] / "extend"
    first = train(config(workspace, "extend", max_steps=3, checkpoint_every=2, eval_every=0))
    assert first.steps == 3 and latest_checkpoint(output).name == "step-3" and finished(output)
    marked_at_start: list[bool] = []

    def at_start(kind: str, payload: dict) -> None:
        if kind == "start":
            marked_at_start.append(finished(output))

    longer = train(config(workspace, "extend", max_steps=5, checkpoint_every=2, eval_every=0), at_start, resume=True)
    assert marked_at_start == [False] and finished(output)
    assert longer.resumed_from == 3 and longer.steps == 5 and len(longer.loss_history) == 5
    assert longer.loss_history[-1]["step"] == 5
    with pytest.raises(ValueError, match="batch_docs"):
        train(config(workspace, "extend", max_steps=7, batch_docs=2), resume=True)


def test_tokens_mode_and_accumulation(workspace: dict[str, Path]) -> None:
    result = train(
        config(workspace, "tokens", mode="tokens", max_steps=2, grad_accumulation=2, batch_docs=2, checkpoint_every=0)
    )
    assert result.steps == 2 and np.isfinite(result.final_loss)
    assert not (workspace["root"] / "tokens" / "checkpoints").exists()
    assert "ndcg10_in_batch" in result.validation


def test_cli_runs(workspace: dict[str, Path]) -> None:
    output = workspace["root"] / "cli"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    completed = subprocess.run(
        [sys.executable, "-m", "training", "--data", str(workspace["data"]), "--base-model", str(workspace["base"]),
         "--output", str(output), "--max-steps", "2", "--device", "cpu"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "cli: train (late): 100%" in completed.stderr  # the bar names the model being trained, then the phase
    summary = json.loads(completed.stdout[completed.stdout.index("{") :])
    assert summary["steps"] == 2 and Path(summary["model_path"]) == output
    assert (output / "model.safetensors").is_file() and (output / "README.md").is_file()
    bad = subprocess.run(
        [sys.executable, "-m", "training", "--data", str(workspace["data"]), "--output", str(output),
         "--lambda-seq", "2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "lambda_seq" in bad.stderr


def test_batch_without_queries_gives_zero_gradient(workspace: dict[str, Path]) -> None:
    from contextlib import nullcontext

    from embedding.encoder import LateChunkingEncoder
    from training.data import TrainingSample
    from training.loop import _batch_loss
    from training.losses import InsentLossModule

    model = SentenceTransformer(str(workspace["base"]), device="cpu")
    encoder = LateChunkingEncoder(model)
    docs = [TrainingSample("a", ["first chunk", "second chunk"]), TrainingSample("b", ["other"])]
    for mode in ("single", "tokens"):
        result, dummy = _batch_loss(
            encoder, InsentLossModule(mode=mode), docs, torch.device("cpu"), mode, nullcontext()
        )
        assert result is None and dummy is not None and dummy.item() == 0.0
        model.zero_grad(set_to_none=True)
        dummy.backward()
        assert all(p.grad is None or not p.grad.any() for p in model.parameters())


BF16_RELATIVE = 1e-3
"""How far the first step's loss under bf16 autocast may lie from float32's, relatively. Measured here: 4e-6
(1.553721 vs 1.553727): the encoder's matrix products round to bf16 (8 bits of mantissa, ~0.4 % a rounding), but
the vectors are averaged over tokens and L2-normalised, and the scores and the loss are computed in float32."""


def _record(events: list[tuple[str, dict]], kind: str, payload: dict) -> None:
    events.append((kind, payload))


def test_bf16_on_cpu_trains_under_autocast(workspace: dict[str, Path]) -> None:
    """``bf16: true`` on CPU runs the encoder under ``torch.autocast("cpu", dtype=torch.bfloat16)``: the loss at the
    same weights is finite, close to float32's, and not float32's (so bf16 did run)."""
    losses, reported = {}, {}
    for bf16 in (False, True):
        events: list[tuple[str, dict]] = []
        settings = {"max_steps": 1, "batch_docs": 2, "checkpoint_every": 0, "eval_every": 0, "validation_fraction": 0.0}
        result = train(config(workspace, f"bf16-{bf16}", bf16=bf16, **settings), on_event=partial(_record, events))
        reported[bf16] = next(payload for kind, payload in events if kind == "start")["bf16"]
        losses[bf16] = result.loss_history[0]["loss"]
    assert reported == {False: False, True: True}
    assert np.isfinite(losses[True])
    assert losses[True] == pytest.approx(losses[False], rel=BF16_RELATIVE)
    print(f"first-step loss float32 {losses[False]!r}, bf16 {losses[True]!r}")
    assert losses[True] != losses[False], losses
