"""``python -m training``: train an InSeNT embedder from the command line (see ``--help``)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from training.config import TrainingConfigError, build_parser, from_cli


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, train, print a summary; returns the exit code."""
    if "TORCHELASTIC_RUN_ID" in os.environ:  # a rank under torchrun: stop when its launcher dies
        from training.supervision import watch_parent

        watch_parent()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = from_cli(args)
    except TrainingConfigError as error:
        parser.error(str(error))
    from tqdm import tqdm

    from embedding.encoder import progress_desc
    from training.checkpoints import ResumeError
    from training.loop import train
    from training.supervision import FolderInUse

    bar: tqdm | None = None

    def on_event(kind: str, payload: dict[str, Any]) -> None:
        nonlocal bar
        if kind == "start":
            resumed = payload.get("resumed_from") or 0
            bar = tqdm(
                total=payload["total_steps"],
                initial=resumed,
                file=sys.stderr,
                disable=args.no_progress,
                desc=progress_desc(config.output.name, f"train ({config.context})"),
            )
            stats = payload["stats"]
            print(
                f"device {payload['device']} | {stats['documents']} documents, {stats['chunks']} chunks, "
                f"{stats['queries']} queries | {payload['total_steps']} steps",
                file=sys.stderr,
            )
        elif kind == "step" and bar is not None:
            bar.update(payload["step"] - bar.n)
            bar.set_postfix(loss=f"{payload['loss']:.4f}", lr=f"{payload['lr']:.2e}")
        elif kind == "eval":
            message = (
                f"step {payload['step']}: nDCG@10 in-document {payload['ndcg10_in_document']:.4f}, "
                f"in-batch {payload['ndcg10_in_batch']:.4f}"
            )
            (bar.write if bar is not None else print)(message, file=sys.stderr)
        elif kind == "done" and bar is not None:
            bar.close()

    main_rank = int(os.environ.get("RANK", "0")) == 0  # under torchrun, rank 0 reports
    try:
        result = train(config, on_event=on_event, resume=args.resume)
    except (ResumeError, FolderInUse) as error:  # a checkpoint this run cannot continue, a folder in use: one line
        if main_rank:
            print(f"error: {error}", file=sys.stderr)
        return 2
    if not main_rank:
        return 0
    summary = {
        "model_path": str(result.model_path),
        "steps": result.steps,
        "final_loss": result.final_loss,
        "validation_before": result.validation_before,
        "validation": result.validation,
        "device": result.device,
        "wall_s": round(result.wall_s, 2),
        "resumed_from": result.resumed_from,
    }
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
