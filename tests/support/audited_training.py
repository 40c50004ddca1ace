"""``python -m training`` with a record of what each process writes, for the tests of rank 0's writes.

Test code. ``torchrun ... -m tests.support.audited_training <python -m training arguments>`` runs
:func:`training.__main__.main` after installing a Python audit hook (:func:`sys.addaudithook`, PEP 578) that records
every write under ``$WRITE_AUDIT_ROOT`` — a file opened for writing, a folder made, a file or folder renamed or
removed — as one line ``<event> <path>`` in ``$WRITE_AUDIT_DIR/rank-<RANK>.log``. Files that native code writes
without Python's ``open`` (safetensors' weights) are not seen, but their folder's ``os.mkdir`` and the JSON files
written beside them are.

With ``$GRADIENT_DUMP_DIR`` set, each process also saves the gradients every optimizer step receives
(:func:`dump_gradients`), for the tests that compare the averaged gradients of runs; with ``$DROPOUT_DUMP_DIR``, its
first dropout mask in training and the generator state it was drawn from (:func:`dump_first_dropout`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import torch
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.optim.optimizer import register_optimizer_step_pre_hook

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_EVENTS = {"os.mkdir", "os.rename", "os.remove", "os.rmdir", "shutil.rmtree"}


def _writes(event: str, args: tuple[Any, ...]) -> str | None:
    """The path ``event`` writes, or None."""
    if event == "open":
        path, mode, flags = args
        writing = any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITE_FLAGS)
        return str(path) if writing and isinstance(path, str | os.PathLike) else None
    if event in _EVENTS and args and isinstance(args[0], str | os.PathLike):
        return str(args[1] if event == "os.rename" else args[0])  # os.rename(src, dst, src_fd, dst_fd): dst
    return None


def install(root: Path, log: Path) -> None:
    """Record the writes under ``root`` to ``log`` (module docstring)."""
    prefix = str(root.resolve())
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        path = _writes(event, args)
        if path is not None and os.path.abspath(path).startswith(prefix):
            os.write(fd, f"{event} {os.path.abspath(path)}\n".encode())

    sys.addaudithook(hook)


def gradient_file(folder: Path, rank: int, step: int) -> Path:
    """Where :func:`dump_gradients` saves ``rank``'s gradients of optimizer step ``step`` (1 = the first)."""
    return folder / f"grads-rank{rank}-step{step}.pt"


@contextmanager
def dump_gradients(folder: Path, rank: int) -> Iterator[None]:
    """Inside the context, save the gradients each optimizer step receives to :func:`gradient_file`.

    A global optimizer step pre-hook (``torch.optim.optimizer.register_optimizer_step_pre_hook``): what it sees is
    the gradient after DDP's all-reduce, after accumulation and after clipping (a run that sets no effective
    ``max_grad_norm`` gives the averaged gradient itself), flattened in the optimizer's parameter order, a missing
    gradient as zeros. The step is read from the optimizer's own ``step`` state, so a resumed run names its steps
    as the run it continues did; a file is written whole (temporary name, then renamed).
    """
    folder.mkdir(parents=True, exist_ok=True)

    def hook(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        done = [float(optimizer.state[p]["step"]) for p in params if "step" in optimizer.state.get(p, {})]
        step = 1 + int(max(done, default=0.0))
        grads = [(p.grad if p.grad is not None else torch.zeros_like(p)).detach().flatten().cpu() for p in params]
        target = gradient_file(folder, rank, step)
        partial = target.with_name(f".{target.name}")
        torch.save(torch.cat(grads), partial)
        os.replace(partial, target)

    handle = register_optimizer_step_pre_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def dropout_file(folder: Path, rank: int) -> Path:
    """Where :func:`dump_first_dropout` saves ``rank``'s first dropout mask."""
    return folder / f"dropout-rank{rank}.pt"


@contextmanager
def dump_first_dropout(folder: Path, rank: int) -> Iterator[None]:
    """Inside the context, save the first mask an ``nn.Dropout`` (``p > 0``, training) draws to :func:`dropout_file`.

    Global module hooks: the pre-hook takes the torch generator's state before the draw, the forward hook the mask
    (where the output is not zero), both flattened: ``{"rng": ByteTensor, "mask": bool tensor}``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    seen: dict[str, torch.Tensor] = {}

    def drawing(module: torch.nn.Module) -> bool:
        return isinstance(module, torch.nn.Dropout) and module.training and module.p > 0 and "mask" not in seen

    def before(module: torch.nn.Module, args: Any) -> None:
        if drawing(module):
            seen["rng"] = torch.get_rng_state()

    def after(module: torch.nn.Module, args: Any, output: torch.Tensor) -> None:
        if drawing(module):
            seen["mask"] = (output != 0).flatten().cpu()
            torch.save(seen, dropout_file(folder, rank))

    handles = [register_module_forward_pre_hook(before), register_module_forward_hook(after)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def main() -> int:
    rank = int(os.environ["RANK"])
    install(Path(os.environ["WRITE_AUDIT_ROOT"]), Path(os.environ["WRITE_AUDIT_DIR"]) / f"rank-{rank}.log")
    from training.__main__ import main as train_main

    with ExitStack() as stack:
        if gradients := os.environ.get("GRADIENT_DUMP_DIR"):
            stack.enter_context(dump_gradients(Path(gradients), rank))
        if dropout := os.environ.get("DROPOUT_DUMP_DIR"):
            stack.enter_context(dump_first_dropout(Path(dropout), rank))
        return train_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
