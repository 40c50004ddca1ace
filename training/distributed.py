"""Data-parallel training across processes launched by ``torchrun`` (``WORLD_SIZE > 1``), or a single process.

Gradients are averaged by PyTorch's :class:`torch.nn.parallel.DistributedDataParallel` (DDP), which overlaps the
bucketed all-reduce with the backward pass. DDP rather than ``accelerate``: the loop already owns device placement,
precision (``torch.autocast``), gradient accumulation and checkpoints, so all ``accelerate`` would add is this
wrapper, at the cost of one more dependency (it is not installed here) and its own launcher and config; DDP is the
part of PyTorch that ``accelerate`` itself wraps.

What DDP wraps (:func:`wrap`): the module whose forward is one batch's InSeNT loss (``training.loop._BatchLoss``:
the sentence-transformers model as its submodule, the late-chunking encoder and the loss), because the encoder
forwards the Hugging Face backbone several times per batch (windows by token budget, then the queries through the
sentence-transformers modules) and DDP must see every forward that precedes a backward. Gradients accumulate over
the micro-batches of a step inside :meth:`torch.nn.parallel.DistributedDataParallel.no_sync`; the last micro-batch
synchronises (:func:`sync_unless`).

A global batch: one optimizer step reads the epoch's next ``world_size × grad_accumulation`` batches of
``batch_docs`` whole documents, dealt round robin (:func:`training.data.step_batches`; the last step of an epoch
reads what is left, so a rank may get fewer batches or none), and its gradient is the mean of their losses'
gradients: each rank back-propagates its batches' losses weighted by ``world_size / batches in the step`` and DDP
averages over ranks; a rank without a batch back-propagates one at weight 0, so that it still takes part in the
all-reduce. Each batch's InSeNT loss is computed on its own documents only: the in-batch negatives of a query are
the chunks of the other documents of *its* batch, never those of another rank (as in the paper, negatives are per
device). So ``world_size`` processes with ``grad_accumulation = g`` take the same steps as one process with
``grad_accumulation = world_size × g`` over the same batches, up to the order of float sums and the end of an
epoch included (tests/training/test_ddp.py compares each step's gradient and the weights), for a model without
dropout: each rank draws its own dropout masks (its generators seeded with seed + rank), and a resumed rank continues
its own generators (:mod:`training.checkpoints`; tests/training/test_ddp.py compares the ranks' masks after a resume).

``find_unused_parameters`` only when needed (:func:`unused_parameters`): DDP then walks the autograd graph after
every forward, which costs time; it is needed when the model has trainable parameters that the backbone's token
states do not reach (BERT's pooler, a ``Dense`` module after pooling that only the queries pass through), because
a parameter without a gradient would otherwise leave its bucket waiting for ever.
No buffer sync at each forward (``forward_sync_buffers=False``, formerly ``broadcast_buffers=False``): the models
trained here have no running statistics (no batch norm); their buffers (position ids, rotary frequencies) are
constant, and DDP already copies rank 0's parameters and buffers to every rank when it wraps the module.

Rank 0 evaluates, checkpoints and saves; the others wait at :meth:`Distributed.barrier`. A checkpoint holds every
rank's random generator states, gathered to rank 0 (:meth:`Distributed.gather`), so that rank 0 alone writes.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from inspect import signature
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

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

    def gather(self, value: Any) -> list[Any]:
        """Every rank's ``value`` (picklable), in rank order, on every rank (``all_gather_object``, a collective:
        every rank calls it); ``[value]`` in a single process."""
        if self.world_size <= 1:
            return [value]
        gathered: list[Any] = [None] * self.world_size
        torch.distributed.all_gather_object(gathered, value)
        return gathered


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


def unused_parameters(model: torch.nn.Module, backbone: torch.nn.Module, pad_id: int) -> list[str]:
    """Names of ``model``'s trainable parameters that ``backbone``'s last hidden states do not depend on.

    One forward of a two-token input through ``backbone`` (``model``'s Hugging Face transformer) and
    ``torch.autograd.grad`` with ``allow_unused``: what gets no gradient there may get none in a training batch.
    """
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    device = named[0][1].device if named else torch.device("cpu")
    ids = torch.full((1, 2), pad_id, dtype=torch.long, device=device)
    out = backbone(input_ids=ids, attention_mask=torch.ones_like(ids))
    hidden = out[0] if isinstance(out, tuple) else out.last_hidden_state
    grads = torch.autograd.grad(hidden.float().sum(), [p for _, p in named], allow_unused=True)
    return [name for (name, _), grad in zip(named, grads, strict=True) if grad is None]


def wrap(module: torch.nn.Module, dist: Distributed, device: torch.device, find_unused: bool) -> torch.nn.Module:
    """``module`` in :class:`~torch.nn.parallel.DistributedDataParallel` under ``torchrun``; itself in one process.

    ``find_unused``: whether some trainable parameter may get no gradient in a batch (module docstring).
    """
    if dist.world_size <= 1:
        return module
    device_ids = [device.index if device.index is not None else dist.local_rank] if device.type == "cuda" else None
    # no buffer sync at each forward (module docstring); PyTorch 2.13 renamed broadcast_buffers
    renamed = "forward_sync_buffers" in signature(DistributedDataParallel).parameters
    buffers: dict[str, Any] = {"forward_sync_buffers" if renamed else "broadcast_buffers": False}
    return DistributedDataParallel(module, device_ids=device_ids, find_unused_parameters=find_unused, **buffers)


def sync_unless(module: torch.nn.Module, accumulating: bool) -> AbstractContextManager[None]:
    """The context of a micro-batch's forward and backward: ``no_sync`` while ``accumulating`` under DDP (the
    gradients stay local until the step's last micro-batch, whose backward averages them over ranks)."""
    if accumulating and isinstance(module, DistributedDataParallel):
        return module.no_sync()
    return nullcontext()


def all_reduce_sum(values: list[float], device: torch.device) -> list[float]:
    """The element-wise sum of ``values`` over ranks (float64)."""
    packed = torch.tensor(values, dtype=torch.float64, device=device)
    torch.distributed.all_reduce(packed)
    return packed.cpu().tolist()
