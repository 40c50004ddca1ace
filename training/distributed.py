"""Data-parallel training across processes launched by ``torchrun`` (``WORLD_SIZE > 1``), or a single process.

Every rank takes its own batches (:func:`training.data.shard_batches`) and computes the InSeNT loss on
its own documents (as in the paper: negatives are per device); :func:`all_reduce_gradients` averages
the gradients before each optimizer step (what DDP does, without the bucketing overlap). Rank 0
evaluates, checkpoints and saves; the others wait at :meth:`Distributed.barrier`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from embedding.models import pick_device


@dataclass
class Distributed:
    """This process's place in the run: ``rank`` of ``world_size`` processes, on GPU ``local_rank``."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        """Rank 0: the process that evaluates, checkpoints, saves and reports."""
        return self.rank == 0

    def barrier(self) -> None:
        """Wait for every rank (a no-op in a single process)."""
        if self.world_size > 1:
            torch.distributed.barrier()


def init_distributed(device: str | None) -> tuple[Distributed, torch.device]:
    """This process's :class:`Distributed` and device, from torchrun's ``WORLD_SIZE``/``RANK``/``LOCAL_RANK``.

    A single process runs on ``device`` (:func:`embedding.models.pick_device`). Several use NCCL on CUDA (one GPU
    per ``LOCAL_RANK``) unless ``device`` names another kind, else Gloo on CPU.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return Distributed(), pick_device(device)
    dist = Distributed(int(os.environ["RANK"]), world_size, int(os.environ.get("LOCAL_RANK", "0")))
    if torch.cuda.is_available() and (device is None or device.startswith("cuda")):
        torch.cuda.set_device(dist.local_rank)
        chosen = torch.device("cuda", dist.local_rank)
        backend = "nccl"
    else:
        chosen, backend = torch.device("cpu"), "gloo"
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend=backend)
    return dist, chosen


def all_reduce_gradients(parameters: list[torch.nn.Parameter], world_size: int) -> None:
    """Average gradients over ranks (parameters unused on a rank count as zero gradient)."""
    if world_size <= 1:
        return
    for parameter in parameters:
        if parameter.grad is None:
            parameter.grad = torch.zeros_like(parameter)
        torch.distributed.all_reduce(parameter.grad)
        parameter.grad.div_(world_size)


def all_reduce_sum(values: list[float], device: torch.device) -> list[float]:
    """The element-wise sum of ``values`` over ranks (float64)."""
    packed = torch.tensor(values, dtype=torch.float64, device=device)
    torch.distributed.all_reduce(packed)
    return packed.cpu().tolist()
