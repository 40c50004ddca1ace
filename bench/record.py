"""What every benchmark's JSON result starts with: when, on what machine, with which arguments."""

from __future__ import annotations

import argparse
import datetime as dt
import platform

import torch


def result_header(args: argparse.Namespace, rows: list[dict]) -> dict:
    """``{"when", "machine", "args", "rows"}``: ``rows`` is filled by the benchmark as results come in."""
    return {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="minutes"),
        "machine": f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads",
        "args": {k: str(v) for k, v in vars(args).items()},
        "rows": rows,
    }
