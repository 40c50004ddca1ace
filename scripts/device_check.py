"""The device check for a lent GPU machine (``make device-check``): does InSeNT training run there, how fast, on one
GPU and on two with DDP. Under 10 minutes; timings and losses go to one JSON file.

What it runs: ``training.loop.train`` (the code ``make train`` runs) on the bundled sample curated into a ConTEB
folder (all 30 documents, ``tests.training.test_data.build_sample_conteb``), with the ``gpu`` reproduce profile's
training settings (:data:`conteb.reproduce.GPU_PROFILE`: 4 documents a batch, lr 5e-5, λ_seq 0.1, the
``search_query:``/``search_document:`` prefixes) at a small size: ``--steps`` optimizer steps, bf16 autocast, and a
randomly initialised ModernBERT of base size (``bench/gpu_train.py``'s ``modernbert-base-random``: the profile's
``lightonai/modernbert-embed-large`` would need the hub, which a lent machine cannot reach).

* One process over the global batch of the DDP run (``grad_accumulation 2``), then, when two or more GPUs are
  visible, ``torchrun --nproc-per-node 2`` (``grad_accumulation 1``): the same global batches, so the losses of the
  two runs must agree step by step (to bf16's rounding) and the step times compare like for like.
* Per run: the loss and the wall time of every step (from the step events), the median step time after the first,
  training tokens/s, the device, bf16, peak GPU memory (rank 0).
* Without CUDA it says so, writes ``{"cuda": false, ...}`` and exits 0 having run nothing. ``--cpu`` runs the same
  two runs on CPU instead (two processes with Gloo; ``tiny`` model by default), the smoke check of this script and
  the measurement of one vs two CPU processes in bench/BENCHMARKS.md.

Exit status: 0 when every run finished with finite losses, 1 otherwise. Usage (from the repository root)::

    python scripts/device_check.py [--out device-check.json] [--steps 6] [--model modernbert-base-random|tiny]
        [--cpu] [--batch-docs 4]
"""

from __future__ import annotations

import sys
from pathlib import Path

# The repository root: `training`, `bench` and `tests.support` without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import tempfile
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 540  # every run together, under the 10 minutes a device check may take


def _worker(config_file: Path, result_file: Path) -> int:
    """Train from ``config_file`` (one rank of the run); rank 0 writes the step timings and losses."""
    from training.config import load_training_config
    from training.loop import train

    marks: list[dict[str, Any]] = []
    started = time.perf_counter()
    last = [started]
    meta: dict[str, Any] = {}

    def on_event(kind: str, payload: dict[str, Any]) -> None:
        now = time.perf_counter()
        if kind == "start":
            meta.update(world_size=payload["world_size"], device=payload["device"], bf16=payload["bf16"])
            meta["gradient_checkpointing"] = payload["gradient_checkpointing"]
        elif kind == "step":
            marks.append({"step": payload["step"], "loss": payload["loss"], "s": now - last[0]})
            marks[-1]["tokens_per_s"] = payload["tokens_per_s"]
        last[0] = now

    config = load_training_config(config_file)
    train(config, on_event=on_event)
    if int(os.environ.get("RANK", "0")) != 0:
        return 0
    timed = [mark["s"] for mark in marks[1:]] or [mark["s"] for mark in marks]
    result = {
        **meta,
        "steps": marks,
        "median_step_s": statistics.median(timed) if timed else None,
        "median_tokens_per_s": statistics.median(m["tokens_per_s"] for m in marks[1:] or marks) if marks else None,
        "wall_s": time.perf_counter() - started,
        "peak_gpu_mib": torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None,
        "finite": all(math.isfinite(mark["loss"]) for mark in marks),
    }
    result_file.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


def _prepare(folder: Path, model: str, device: torch.device) -> tuple[Path, Path]:
    """The sample's ConTEB folder and the base model saved under ``folder``."""
    from bench.gpu_train import build_model
    from tests.training.test_data import build_sample_conteb

    data = build_sample_conteb(folder / "sample")  # one split, all 30 documents: 8 batches of 4 (the last 2) an epoch
    base = folder / "base"
    build_model(model, device, 512).save(str(base))
    return data, base


def _settings(data: Path, base: Path, output: Path, args: argparse.Namespace, accumulation: int) -> dict[str, Any]:
    from conteb.reproduce import GPU_PROFILE

    return {
        **GPU_PROFILE.training,
        "data": [str(data)],
        "split": None,
        "base_model": str(base),
        "output": str(output),
        "max_steps": args.steps,
        "batch_docs": args.batch_docs,
        "grad_accumulation": accumulation,
        "checkpoint_every": 0,
        "eval_every": 0,
        "validation_fraction": 0.0,
        "bf16": not args.cpu or args.bf16,
        "device": "cpu" if args.cpu else "cuda",
        "seed": 0,
    }


def _run(name: str, command: list[str], result_file: Path, timeout: float, log: Path) -> dict[str, Any]:
    """One training run (a process, or torchrun's processes); its result, or why it has none."""
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with log.open("w") as out:
        try:
            code = subprocess.run(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
            returncode: int | None = code.returncode
        except subprocess.TimeoutExpired:
            returncode = None
    outcome: dict[str, Any] = {"run": name, "command": command, "returncode": returncode}
    outcome["launch_wall_s"] = time.perf_counter() - started
    if returncode == 0 and result_file.is_file():
        outcome.update(json.loads(result_file.read_text()))
    else:
        outcome["error"] = "timed out" if returncode is None else f"exit {returncode}"
        outcome["log_tail"] = log.read_text(errors="replace")[-3000:]
    print(f"{name}: {_summary(outcome)}", file=sys.stderr)
    return outcome


def _summary(outcome: dict[str, Any]) -> str:
    if "error" in outcome:
        return f"FAILED ({outcome['error']})"
    losses = ", ".join(f"{mark['loss']:.4f}" for mark in outcome["steps"])
    return f"median step {outcome['median_step_s']:.3f} s, losses {losses}, device {outcome['device']}"


def _check(args: argparse.Namespace) -> int:
    report: dict[str, Any] = {
        "cuda": torch.cuda.is_available(),
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.node(),
        "runs": [],
    }
    if not report["cuda"] and not args.cpu:
        print("no CUDA device: nothing GPU-specific run (--cpu runs the same check on CPU)", file=sys.stderr)
        args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
        return 0
    deadline = time.monotonic() + BUDGET_S
    device = torch.device("cpu" if args.cpu else "cuda")
    model = args.model or ("tiny" if args.cpu else "modernbert-base-random")
    two = args.cpu or torch.cuda.device_count() >= 2
    report.update(model=model, steps=args.steps, batch_docs=args.batch_docs)
    with tempfile.TemporaryDirectory(prefix="device-check-") as tmp:
        folder = Path(tmp)
        data, base = _prepare(folder, model, device)
        me = [sys.executable, str(Path(__file__).resolve()), "--worker"]
        plans = [("1 process", [], 2)]
        if two:
            plans.append(
                ("2 processes (DDP)", ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"], 1)
            )
        else:
            report["ddp"] = "skipped: fewer than two GPUs"
        for name, launcher, accumulation in plans:
            slug = name.split()[0]
            config = folder / f"run-{slug}.yaml"
            config.write_text(yaml.safe_dump(_settings(data, base, folder / f"out-{slug}", args, accumulation)))
            result = folder / f"result-{slug}.json"
            command = [sys.executable, *launcher, *me[1:]] if launcher else me
            command += ["--config", str(config), "--result", str(result)]
            timeout = max(deadline - time.monotonic(), 1.0)
            report["runs"].append(_run(name, command, result, timeout, folder / f"log-{slug}.txt"))
    args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"written: {args.out}", file=sys.stderr)
    ok = all("error" not in run and run["finite"] for run in report["runs"])
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("device-check.json"), help="the JSON report")
    parser.add_argument("--steps", type=int, default=6, help="optimizer steps a run")
    parser.add_argument("--batch-docs", type=int, default=4, help="documents a batch (the gpu profile's 4)")
    parser.add_argument("--model", choices=["modernbert-base-random", "tiny", "offline-minilm"])
    parser.add_argument("--cpu", action="store_true", help="run the check on CPU (Gloo for two processes)")
    parser.add_argument("--bf16", action="store_true", help="with --cpu: bf16 autocast on CPU too")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--config", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(args.config, args.result)
    return _check(args)


if __name__ == "__main__":
    sys.exit(main())
