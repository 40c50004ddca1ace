"""Training-step cost of attention dropout on CPU: the offline MiniLM with its own attention dropout (0.1) against
the same model rebuilt with ``attention_dropout: 0`` (:func:`embedding.models.set_attention_dropout`), as the
reproduce CPU profile trains it (``conteb/reproduce.py``).

Each configuration runs the same forward + backward over ``--windows`` random windows of ``--tokens`` tokens
(training mode, SDPA attention), ``--repeats`` times after one warm-up; reported: median seconds, tokens per
second, the ratio to the baseline (dropout 0.1, no checkpointing) and the peak RSS growth of each configuration
(measured in a fresh subprocess so that one configuration's allocations do not hide another's). Why it differs:
with dropout, PyTorch's CPU ``scaled_dot_product_attention`` cannot take its fused kernel and materialises the
``[B, heads, T, T]`` probabilities and the dropout mask.

Usage (from the repository root)::

    python bench/attention_dropout.py --json /tmp/attention-dropout.json
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import resource
import statistics
import subprocess
import time

from record import result_header  # bench/record.py (the script's folder is on sys.path)

CONFIGURATIONS = {
    "dropout 0.1 (model default)": {"dropout": None, "checkpointing": False},
    "dropout 0.1 + gradient checkpointing": {"dropout": None, "checkpointing": True},
    "dropout 0": {"dropout": 0.0, "checkpointing": False},
    "dropout 0 + gradient checkpointing": {"dropout": 0.0, "checkpointing": True},
}
BASELINE = "dropout 0.1 (model default)"


def measure(dropout: float | None, checkpointing: bool, windows: int, tokens: int, repeats: int) -> dict:
    """One configuration in this process: median forward+backward seconds and the peak RSS growth (MiB)."""
    import torch

    from embedding.models import load_offline_minilm, set_attention_dropout

    model = load_offline_minilm(device="cpu")
    if dropout is not None:
        set_attention_dropout(model, dropout)
    backbone = model[0].model
    if checkpointing:
        backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    backbone.train()
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 20000, (windows, tokens), generator=generator)
    mask = torch.ones(windows, tokens, dtype=torch.long)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    seconds = []
    for repeat in range(repeats + 1):
        started = time.perf_counter()
        hidden = backbone(input_ids=ids, attention_mask=mask).last_hidden_state
        hidden.mean().backward()
        backbone.zero_grad(set_to_none=True)
        if repeat:  # the first run is the warm-up
            seconds.append(time.perf_counter() - started)
    median = statistics.median(seconds)
    growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    return {
        "seconds": round(median, 2),
        "tokens_per_s": round(windows * tokens / median),
        "rss_growth_mib": round(growth),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)  # internal: measure one configuration
    args = parser.parse_args()
    if args.one is not None:
        settings = CONFIGURATIONS[args.one]
        print(
            json.dumps(measure(settings["dropout"], settings["checkpointing"], args.windows, args.tokens, args.repeats))
        )
        return
    rows: list[dict] = []
    result = result_header(args, rows)
    for name in CONFIGURATIONS:
        command = [
            sys.executable,
            __file__,
            "--one",
            name,
            "--windows",
            str(args.windows),
            "--tokens",
            str(args.tokens),
        ]
        command += ["--repeats", str(args.repeats)]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        rows.append({"configuration": name, **json.loads(output)})
        print(json.dumps(rows[-1]), flush=True)
    baseline = next(row for row in rows if row["configuration"] == BASELINE)
    print(f"\n{args.windows} windows x {args.tokens} tokens, forward + backward, median of {args.repeats}\n")
    print("| configuration | seconds | tokens/s | speed vs baseline | peak RSS growth (MiB) |")
    print("|---|---:|---:|---:|---:|")
    for row in rows:
        row["speedup"] = round(baseline["seconds"] / row["seconds"], 2)
        print(
            f"| {row['configuration']} | {row['seconds']} | {row['tokens_per_s']:,} | {row['speedup']}x | "
            f"{row['rss_growth_mib']:,} |"
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
