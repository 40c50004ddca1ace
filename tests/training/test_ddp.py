"""Two processes on PyTorch's DDP (Gloo on CPU), started by the real ``torchrun --nproc-per-node 2``.

One two-process run is stopped by SIGTERM after its first checkpoint, then resumed in two processes to the end;
one process trains in this test process over the same global batches (``grad_accumulation`` 4 where each rank has
2: training/distributed.py). The tests read those three runs: both processes stop within seconds of the signal,
the gradient the optimizer receives at every step is the same on both ranks and the single process's, the weights
match the single process's at every checkpoint both kept, the resumed run continues from where the first stopped,
rank 0 alone writes (an audit hook and a gradient dump in each worker, tests/support/audited_training.py) and its
checkpoints hold each rank's own random generators, and one process refuses to resume them.
A tiny random ModernBERT (no dropout) on the sample's train split, 4 steps of 2-document batches, 2 a rank (9 batches
an epoch: the 3rd step ends the epoch with one batch, none for rank 1), no gradient clipping (a clipped gradient,
like AdamW's update, would hide a gradient that is off by a constant factor). One more two-process launch resumes
a checkpoint with dropout switched on: the ranks draw different masks (``dropout_resume``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import torch
import yaml
from safetensors.torch import load_file

from conteb.storage import dataset_dir
from embedding.models import offline_minilm_path
from pipelines.definitions import build_definitions
from project.config import load_config
from tests.conftest import ROOT, SAMPLE_DIR
from tests.support.audited_training import dropout_file, dump_gradients, gradient_file
from tests.support.signalled_run import SignalledRun, run_then_signal
from tests.support.tiny_models import tiny_modernbert
from tests.training.test_data import build_sample_conteb
from training.__main__ import main as train_main
from training.checkpoints import STATE_FILE, checkpoint_step, latest_checkpoint, rng_file
from training.config import make_config
from training.loop import train

STEPS = 4
TOLERANCE = 1e-5
"""Largest absolute difference allowed between a weight after two processes and after one. Each step moves weights
by up to ~1e-3 (lr 1e-3); the runs differ only in the order of float32 sums (the all-reduce, thread counts):
measured here 0.0 at step 1 and 2.3e-7 at step 4 (one thread a worker, this test process with its own threads)."""
GRADIENTS = 1e-5
"""Largest difference allowed between a gradient component after two processes and after one, relative to the
gradient's largest component. The runs differ only in the order of float32 sums (and, after step 1, by the weights'
own differences): measured here 8e-8 at step 1, 3e-6 at the end of the epoch; a gradient twice too large gives 0.5."""
SPLITS = {"train": 0.6, "test": 0.4}  # 19 training documents: 9 batches of 2 or 3
TORCHRUN = Path(sys.executable).with_name("torchrun")


def settings(root: Path, output: Path, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "data": [str(root / "sample")],
        "base_model": str(root / "tiny"),
        "output": str(output),
        "max_steps": STEPS,
        "batch_docs": 2,
        "grad_accumulation": 2,
        "checkpoint_every": 1,
        "keep_checkpoints": STEPS,
        "eval_every": 0,
        "validation_fraction": 0.0,
        "lr": 1e-3,
        "max_grad_norm": 1e9,  # no clipping: the optimizer receives the averaged gradient itself (see GRADIENTS)
        "device": "cpu",
        "seed": 0,
    }
    return {**values, **overrides}


def torchrun(config: Path, audit: Path, output: Path, *extra: str) -> list[str]:
    return [
        str(TORCHRUN), "--standalone", "--nproc-per-node", "2",
        "-m", "tests.support.audited_training", "--config", str(config), "--no-progress", *extra,
    ]  # fmt: skip


def worker_env(audit: Path, output: Path, **dumps: Path) -> dict[str, str]:
    """The workers' environment: one thread each, the write audit, and ``dumps`` (``GRADIENT_DUMP_DIR=...``)."""
    audit.mkdir(exist_ok=True)
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(ROOT),
        "WRITE_AUDIT_DIR": str(audit),
        "WRITE_AUDIT_ROOT": str(output),
        **{name: str(folder) for name, folder in dumps.items()},
    }


def max_diff(a: Path, b: Path) -> float:
    left, right = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert left.keys() == right.keys()
    return max((left[name] - right[name]).abs().max().item() for name in left)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with ``sample/`` (the sample's ConTEB folder, train and test splits) and ``tiny/`` (the base model)."""
    root = tmp_path_factory.mktemp("ddp")
    build_sample_conteb(root / "sample", splits=SPLITS)
    tiny_modernbert(offline_minilm_path(), seed=0, device="cpu").save(str(root / "tiny"))
    return root


@pytest.fixture(scope="module")
def runs(inputs: Path) -> dict[str, Any]:
    """The interrupted two-process run, its two-process resume and the one-process reference (module docstring)."""
    root = inputs
    output, audit = root / "ddp", root / "audit"
    config = root / "ddp.yaml"
    config.write_text(yaml.safe_dump(settings(root, output)))
    env = worker_env(audit, output, GRADIENT_DUMP_DIR=root / "gradients")

    first_checkpoint = output / "checkpoints" / "step-1" / STATE_FILE
    stopped: SignalledRun = run_then_signal(
        torchrun(config, audit, output), env=env, cwd=ROOT, log=root / "first.log",
        ready=first_checkpoint.is_file, sig=signal.SIGTERM, stop_within=15, watch_descendants=True,
    )  # fmt: skip
    latest = latest_checkpoint(output)
    assert latest is not None
    killed_at = checkpoint_step(latest)
    started = time.monotonic()
    resumed = subprocess.run(
        torchrun(config, audit, output, "--resume"), env=env, cwd=ROOT, capture_output=True, text=True, timeout=180
    )
    assert resumed.returncode == 0, resumed.stderr[-5000:]
    resume_s = time.monotonic() - started

    single = root / "single"
    with dump_gradients(root / "gradients-single", rank=0):
        train(make_config(settings(root, single, grad_accumulation=4)))
    return {
        "output": output, "audit": audit, "single": single, "stopped": stopped, "killed_at": killed_at,
        "gradients": root / "gradients", "gradients_single": root / "gradients-single",
        "summary": json.loads(resumed.stdout[resumed.stdout.index("{"):]), "resume_s": resume_s,
    }  # fmt: skip


def test_sigterm_stops_both_processes_within_seconds(runs: dict[str, Any]) -> None:
    stopped: SignalledRun = runs["stopped"]
    print(f"SIGTERM at step {runs['killed_at']}: stopped in {stopped.seconds_to_stop:.2f} s")
    assert len(stopped.descendants) >= 2  # the two workers torchrun started, each in a session of its own
    assert stopped.seconds_to_stop < 10  # and every descendant gone (run_then_signal checks)
    assert runs["killed_at"] < STEPS  # stopped before its end


def test_two_processes_average_the_gradient_one_process_accumulates(runs: dict[str, Any]) -> None:
    """At every step, the gradient the optimizer receives: the same on both ranks (DDP's all-reduce), and the one
    process's mean over the same global batch. A scale error (a micro-batch not divided by their number) fails it;
    AdamW would hide it from the weights."""
    differences = []
    for step in range(1, STEPS + 1):
        rank0, rank1 = (torch.load(gradient_file(runs["gradients"], rank, step)) for rank in (0, 1))
        single = torch.load(gradient_file(runs["gradients_single"], 0, step))
        assert torch.equal(rank0, rank1), step
        differences.append(((rank0 - single).abs().max() / single.abs().max()).item())
    print(f"largest gradient difference, two processes vs one, relative to the largest component: {differences}")
    assert max(differences) <= GRADIENTS, differences


def test_two_processes_take_the_steps_of_one_over_the_same_global_batches(runs: dict[str, Any]) -> None:
    output, single = runs["output"], runs["single"]
    first = Path("checkpoints", "step-1", "model")
    diffs = {1: max_diff(output / first, single / first), STEPS: max_diff(output, single)}  # interrupted, resumed
    print(f"max abs diff of the weights, two processes vs one: {diffs}")
    assert max(diffs.values()) <= TOLERANCE, diffs
    moved = max_diff(output, output / first)
    assert moved > 100 * TOLERANCE  # the steps after the first moved the weights: the equality is not vacuous


def test_resume_in_two_processes_continues_where_it_stopped(runs: dict[str, Any]) -> None:
    summary, killed_at = runs["summary"], runs["killed_at"]
    assert (summary["resumed_from"], summary["steps"]) == (killed_at, STEPS)
    state = json.loads((runs["output"] / "checkpoints" / f"step-{STEPS}" / STATE_FILE).read_text())
    reference = json.loads((runs["single"] / "checkpoints" / f"step-{STEPS}" / STATE_FILE).read_text())
    assert [r["step"] for r in state["loss_history"]] == list(range(1, STEPS + 1))
    assert (state["world_size"], reference["world_size"]) == (2, 1)
    for ours, theirs in zip(state["loss_history"], reference["loss_history"], strict=True):
        assert ours["loss"] == pytest.approx(theirs["loss"], rel=1e-5)  # mean over both ranks' batches
        assert ours["lr"] == pytest.approx(theirs["lr"])


def test_rank_zero_alone_writes(runs: dict[str, Any]) -> None:
    output, audit = runs["output"], runs["audit"]
    rank1 = audit / "rank-1.log"
    assert rank1.is_file() and rank1.read_text() == ""  # the hook ran in rank 1 and saw no write
    written = {line.split(" ", 1)[1] for line in (audit / "rank-0.log").read_text().splitlines()}
    for name in ("README.md", "training_data.json", "config_sentence_transformers.json"):
        assert str(output / name) in written
    assert str(output / "checkpoints" / f"step-{STEPS}") in written  # renamed into place
    assert (output / "model.safetensors").is_file()
    assert "insent" in (output / "README.md").read_text()
    assert not list((output / "checkpoints").glob(".tmp-*"))
    for checkpoint in (output / "checkpoints").glob("step-*"):  # rank 1's generators too, written by rank 0
        states = [torch.load(rng_file(checkpoint, rank), weights_only=False)["torch"] for rank in (0, 1)]
        assert not torch.equal(*states) and not (checkpoint / "rng.pt").exists()


def test_one_process_cannot_resume_a_two_process_checkpoint(
    runs: dict[str, Any], inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The data order depends on the number of processes: refused, in one line naming the checkpoint, both numbers
    and what to do, before anything is loaded or written."""
    output = tmp_path / "one"
    checkpoint = output / "checkpoints" / f"step-{STEPS}"
    shutil.copytree(runs["output"] / "checkpoints" / f"step-{STEPS}", checkpoint)
    config = tmp_path / "one.yaml"
    config.write_text(yaml.safe_dump(settings(inputs, output)))
    assert train_main(["--config", str(config), "--no-progress", "--resume"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"error: cannot resume from {checkpoint}: it was written by 2 process(es), this run has 1, and the data "
        "order depends on it; resume with 2 process(es) (torchrun --nproc-per-node) or start a new output folder"
    )
    assert sorted(p.name for p in output.iterdir()) == ["checkpoints"]


@pytest.fixture(scope="module")
def dropout_resume(inputs: Path, runs: dict[str, Any]) -> dict[str, Any]:
    """Two processes resume the two-process run's first checkpoint for one step, with dropout switched on in its
    model (embedding and MLP dropout 0.1) and each rank's saved torch generator moved on by 1000 draws (as a run with
    dropout leaves it; a freshly seeded generator differs). Each rank records its first dropout mask and the state
    it was drawn from (tests/support/audited_training.py). The one torchrun launch of this module that is not
    ``runs``': a resume with dropout needs a model with dropout, which the weight equality above must not have."""
    root = inputs
    output = root / "dropout"
    checkpoint = output / "checkpoints" / "step-1"
    shutil.copytree(runs["output"] / "checkpoints" / "step-1", checkpoint)
    model_config = checkpoint / "model" / "config.json"
    model_config.write_text(
        json.dumps({**json.loads(model_config.read_text()), "embedding_dropout": 0.1, "mlp_dropout": 0.1})
    )
    for rank in (0, 1):
        states = torch.load(rng_file(checkpoint, rank), weights_only=False)
        generator = torch.Generator()
        generator.set_state(states["torch"])
        torch.rand(1000, generator=generator)
        torch.save({**states, "torch": generator.get_state()}, rng_file(checkpoint, rank))
    config = root / "dropout.yaml"
    config.write_text(yaml.safe_dump(settings(root, output, max_steps=2, checkpoint_every=0)))
    env = worker_env(root / "audit-dropout", output, DROPOUT_DUMP_DIR=root / "dropout-masks")
    resumed = subprocess.run(
        torchrun(config, root / "audit-dropout", output, "--resume"), env=env, cwd=ROOT, capture_output=True,
        text=True, timeout=180,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-5000:]
    recorded = {rank: torch.load(dropout_file(root / "dropout-masks", rank)) for rank in (0, 1)}
    saved = {rank: torch.load(rng_file(checkpoint, rank), weights_only=False)["torch"] for rank in (0, 1)}
    return {"recorded": recorded, "saved": saved}


def test_each_rank_draws_its_own_dropout_masks_after_a_resume(dropout_resume: dict[str, Any]) -> None:
    recorded, saved = dropout_resume["recorded"], dropout_resume["saved"]
    masks = [recorded[rank]["mask"] for rank in (0, 1)]
    n = min(len(mask) for mask in masks)
    agree = (masks[0][:n] == masks[1][:n]).float().mean().item()
    print(f"first dropout masks after the resume: {agree:.3f} of the first {n} units agree between the ranks")
    assert not torch.equal(masks[0][:n], masks[1][:n])  # the same generator state would draw the same first units
    for rank in (0, 1):  # each rank's own generator, restored: neither rank 0's nor a freshly seeded one
        assert torch.equal(recorded[rank]["rng"], saved[rank]), rank


def test_the_training_asset_launches_torchrun_through_pipes(inputs: Path, isolated_env: Path, tmp_path: Path) -> None:
    """``training.nproc_per_node: 2``: the Pipes subprocess is torchrun, rank 0 reports to Dagster."""
    shutil.copytree(inputs / "sample", dataset_dir(isolated_env, "demo"))
    config_path = tmp_path / "conteb.yaml"
    config_path.write_text(
        f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n    splits: {SPLITS}\n"
        "training:\n  tasks: [demo]\n  control: false\n  nproc_per_node: 2\n"
        f"  settings: {{base_model: {inputs / 'tiny'}, max_steps: 1, batch_docs: 2, eval_every: 0, checkpoint_every: 0,"
        " validation_fraction: 0.0}\n"
    )
    instance = dg.DagsterInstance.ephemeral()
    result = (
        build_definitions(load_config(config_path))
        .resolve_job_def("train_insent")
        .execute_in_process(instance=instance)
    )
    assert result.success
    event = instance.get_latest_materialization_event(dg.AssetKey(["insent_model"]))
    assert event is not None and event.asset_materialization is not None
    metadata = {k: v.value for k, v in event.asset_materialization.metadata.items()}
    assert (metadata["steps"], metadata["device"]) == (1, "cpu")
    logs = "\n".join(e.message for e in instance.all_logs(result.run_id) if e.message)
    assert "'world_size': 2" in logs  # rank 0's start event: two processes
    assert (isolated_env / "models" / "insent_model" / "model.safetensors").is_file()
