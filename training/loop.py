"""The InSeNT training loop: late-chunking encoder + InSeNT loss over batches of whole documents.

``train(config, on_event)`` runs alone, under ``torchrun`` (data parallel) and from a Dagster asset
through Pipes: progress is reported only through ``on_event(kind, payload)`` with kinds ``start``,
``step``, ``eval``, ``checkpoint`` and ``done`` (rank 0 only).

Data order is a pure function of ``(seed, epoch)`` (see :mod:`training.data`), so the data position is
the step count: resuming from ``<output>/checkpoints/step-N`` (weights, optimizer, scheduler, RNG
states) replays exactly the batches an uninterrupted run would see next.

Multi-GPU (``WORLD_SIZE > 1``, launched by ``torchrun``): every rank takes its own batches
(:func:`training.data.shard_batches`), computes the InSeNT loss on its own documents (as in the
paper: negatives are per device), and gradients are averaged with an all-reduce before each
optimizer step (what DDP does, without the bucketing overlap). Rank 0 evaluates, checkpoints and
saves; the others wait at a barrier.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from transformers import get_cosine_schedule_with_warmup

from training.config import TrainingConfig, config_to_dict
from training.data import (
    DataStats,
    TrainingSample,
    count_tokens,
    documents_seen,
    load_samples,
    make_batches,
    shard_batches,
    split_by_document,
    validation_groups,
)
from training.encoder import LateChunkingEncoder, PoolingPolicy
from training.losses import InsentLoss, InsentLossModule, maxsim_scores, pad_document_tokens, pad_documents
from training.models import load_model, pick_device, set_attention_dropout

EventCallback = Callable[[str, dict[str, Any]], None]
CHECKPOINTS = "checkpoints"
STATE_FILE = "trainer_state.json"


@dataclass
class TrainResult:
    """What a finished run reports (also the ``done`` event's payload)."""

    steps: int
    final_loss: float | None
    validation: dict[str, float]
    validation_before: dict[str, float]
    wall_s: float
    device: str
    model_path: Path
    loss_history: list[dict[str, float]] = field(default_factory=list)
    stats: DataStats = field(default_factory=DataStats)
    resumed_from: int | None = None
    # the documents it saw (train + validation), per task folder and split (training.data.documents_seen)
    training_data: list[dict[str, Any]] = field(default_factory=list)


# --------------------------------------------------------------------------------------------------- helpers


def ndcg_at_10(rank: int) -> float:
    """nDCG@10 of one query with a single relevant item at 1-based ``rank``."""
    return 1.0 / math.log2(rank + 1) if rank <= 10 else 0.0


def gold_rank(scores: np.ndarray, gold: int) -> int:
    """1-based rank of ``scores[gold]`` (ties broken in the gold item's favour)."""
    return int((scores > scores[gold]).sum()) + 1


@dataclass
class _Dist:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.world_size > 1:
            torch.distributed.barrier()


def _init_distributed(config: TrainingConfig) -> tuple[_Dist, torch.device]:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return _Dist(), pick_device(config.device)
    dist = _Dist(int(os.environ["RANK"]), world_size, int(os.environ.get("LOCAL_RANK", "0")))
    if torch.cuda.is_available() and (config.device is None or config.device.startswith("cuda")):
        torch.cuda.set_device(dist.local_rank)
        device = torch.device("cuda", dist.local_rank)
        backend = "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend=backend)
    return dist, device


def _all_reduce_gradients(parameters: list[torch.nn.Parameter], world_size: int) -> None:
    """Average gradients over ranks (parameters unused on a rank count as zero gradient)."""
    if world_size <= 1:
        return
    for parameter in parameters:
        if parameter.grad is None:
            parameter.grad = torch.zeros_like(parameter)
        torch.distributed.all_reduce(parameter.grad)
        parameter.grad.div_(world_size)


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def latest_checkpoint(output: Path) -> Path | None:
    """The complete checkpoint with the highest step under ``<output>/checkpoints``, or None."""
    folder = Path(output) / CHECKPOINTS
    found = []
    for path in folder.glob("step-*") if folder.is_dir() else []:
        suffix = path.name.removeprefix("step-")
        if suffix.isdigit() and (path / STATE_FILE).is_file():
            found.append((int(suffix), path))
    return max(found)[1] if found else None


def _enable_gradient_checkpointing(model: SentenceTransformer) -> bool:
    backbone = getattr(model[0], "auto_model", None) or getattr(model[0], "model", None)
    if backbone is None or not getattr(backbone, "supports_gradient_checkpointing", False):
        return False
    backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return True


def _tokenize(model: SentenceTransformer) -> Callable[[list[str]], list[list[int]]]:
    tokenizer = model.tokenizer

    def tokenize(texts: list[str]) -> list[list[int]]:
        return tokenizer(texts, add_special_tokens=False)["input_ids"]

    return tokenize


def _query_tokens(model: SentenceTransformer, queries: list[str]) -> int:
    return sum(len(ids) + 2 for ids in _tokenize(model)(queries)) if queries else 0


# --------------------------------------------------------------------------------------------------- evaluation


def evaluate(
    encoder: LateChunkingEncoder,
    samples: list[TrainingSample],
    batch_docs: int,
    mode: str = "single",
    context: str = "late",
) -> dict[str, float]:
    """Validation nDCG@10: in-document (a query ranks its own document's chunks) and in-batch.

    In-batch ranks all chunks of a group of ``batch_docs`` validation documents (groups in ``doc_id``
    order). Late chunking, inference mode; scores are dot products of normalised vectors (``single``)
    or MaxSim (``tokens``).
    """
    model = encoder.model
    was_training = model.training
    model.eval()
    in_document: list[float] = []
    in_batch: list[float] = []
    try:
        with torch.inference_mode():
            for group in validation_groups(samples, batch_docs):
                scores = _group_scores(encoder, group, mode, context)  # per document: [q_i, total chunks of group]
                offset = 0
                for sample, doc_scores in zip(group, scores, strict=True):
                    n = len(sample.chunks)
                    for row, gold in zip(doc_scores, sample.gold, strict=True):
                        in_document.append(ndcg_at_10(gold_rank(row[offset : offset + n], gold)))
                        in_batch.append(ndcg_at_10(gold_rank(row, offset + gold)))
                    offset += n
    finally:
        model.train(was_training)
    return {
        "ndcg10_in_document": float(np.mean(in_document)) if in_document else float("nan"),
        "ndcg10_in_batch": float(np.mean(in_batch)) if in_batch else float("nan"),
        "queries": float(len(in_document)),
    }


def _group_scores(
    encoder: LateChunkingEncoder, group: list[TrainingSample], mode: str, context: str = "late"
) -> list[np.ndarray]:
    docs = [sample.chunks for sample in group]
    titles = [sample.title for sample in group]
    queries = [query for sample in group for query in sample.queries]
    if not queries:
        return [np.zeros((0, 0)) for _ in group]
    if mode == "single":
        chunk_vectors = np.concatenate(encoder.encode_documents(docs, mode=context, titles=titles), axis=0)
        query_vectors = np.asarray(encoder.encode_queries(queries))
        scores = query_vectors @ chunk_vectors.T
    else:
        tokens, token_mask, chunk_mask = pad_document_tokens(
            encoder.forward_document_tokens(docs, mode=context, titles=titles)
        )
        query_tokens, query_mask = encoder.forward_query_tokens(queries)
        full = maxsim_scores(query_tokens.float(), query_mask, tokens.float(), token_mask)  # [Q, N, C]
        scores = full[:, chunk_mask].float().cpu().numpy()  # real chunks, document order
    out, start = [], 0
    for sample in group:
        out.append(scores[start : start + len(sample.queries)])
        start += len(sample.queries)
    return out


# --------------------------------------------------------------------------------------------------- training


@dataclass
class _Plan:
    steps_per_epoch: int
    total_steps: int
    warmup_steps: int


def _plan(config: TrainingConfig, n_batches: int) -> _Plan:
    steps_per_epoch = max(1, math.ceil(n_batches / config.grad_accumulation))
    total = config.max_steps if config.max_steps is not None else steps_per_epoch * config.epochs
    return _Plan(steps_per_epoch, total, math.ceil(config.warmup_ratio * total))


def _batch_loss(
    encoder: LateChunkingEncoder,
    loss_module: InsentLossModule,
    docs: list[TrainingSample],
    device: torch.device,
    mode: str,
    autocast: Any,
    context: str = "late",
) -> tuple[InsentLoss | None, torch.Tensor | None]:
    """The batch's InSeNT loss, or ``(None, zero)`` for a batch without queries (a zero-gradient stand-in).

    The encoder runs under ``autocast`` (bf16 on CUDA); scores and loss are computed in float32.
    """
    queries = [query for sample in docs for query in sample.queries]
    query_doc = torch.tensor([i for i, s in enumerate(docs) for _ in s.queries], dtype=torch.long, device=device)
    query_chunk = torch.tensor([g for s in docs for g in s.gold], dtype=torch.long, device=device)
    chunk_lists = [sample.chunks for sample in docs]
    titles = [sample.title for sample in docs]
    if mode == "single":
        with autocast:
            chunk_repr, chunk_mask = pad_documents(encoder.forward_documents(chunk_lists, mode=context, titles=titles))
            query_repr = encoder.forward_queries(queries) if queries else None
        if query_repr is None:
            return None, chunk_repr.sum() * 0.0
        return loss_module(query_repr.float(), chunk_repr.float(), chunk_mask, query_doc, query_chunk), None
    with autocast:
        tokens, token_mask, chunk_mask = pad_document_tokens(
            encoder.forward_document_tokens(chunk_lists, mode=context, titles=titles)
        )
        query_tokens, query_mask = encoder.forward_query_tokens(queries) if queries else (None, None)
    if query_tokens is None:
        return None, tokens.sum() * 0.0
    result = loss_module(
        query_tokens.float(), tokens.float(), chunk_mask, query_doc, query_chunk, query_mask, token_mask
    )
    return result, None


def _save_checkpoint(
    output: Path,
    step: int,
    model: SentenceTransformer,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    state: dict[str, Any],
    keep: int,
) -> Path:
    """Write ``<output>/checkpoints/step-<step>`` atomically (tmp folder + rename); prune old ones."""
    folder = Path(output) / CHECKPOINTS
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"step-{step}"
    for stale in folder.glob(".tmp-step-*"):  # left by a run killed while writing
        shutil.rmtree(stale, ignore_errors=True)
    tmp = folder / f".tmp-step-{step}-{os.getpid()}"
    tmp.mkdir()
    model.save(str(tmp / "model"))
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
    torch.save(_rng_state(), tmp / "rng.pt")
    (tmp / STATE_FILE).write_text(json.dumps(state, indent=1), encoding="utf-8")  # written last: marks complete
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
    complete = sorted(
        (int(p.name.removeprefix("step-")), p) for p in folder.glob("step-*") if p.name.removeprefix("step-").isdigit()
    )
    for _, old in complete[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def train(config: TrainingConfig, on_event: EventCallback | None = None, resume: bool = False) -> TrainResult:
    """Train ``config.base_model`` with InSeNT on ``config.data`` and save it to ``config.output``.

    ``resume``: continue from the latest checkpoint in ``<output>/checkpoints`` (a fresh start when
    there is none). Events go to ``on_event(kind, payload)`` on rank 0.
    """
    started = time.perf_counter()
    dist, device = _init_distributed(config)
    output = Path(config.output)

    def emit(kind: str, payload: dict[str, Any]) -> None:
        if on_event is not None and dist.main:
            on_event(kind, payload)

    checkpoint = latest_checkpoint(output) if resume else None
    model = load_model(str(checkpoint / "model") if checkpoint else config.base_model, device=str(device))
    if config.max_length is not None and config.max_length < model.max_seq_length:
        model.max_seq_length = config.max_length
    if config.attention_dropout is not None:
        set_attention_dropout(model, config.attention_dropout)
    use_cuda = device.type == "cuda"
    use_bf16 = use_cuda and config.bf16 in ("auto", True) and torch.cuda.is_bf16_supported()
    checkpointing = use_cuda if config.gradient_checkpointing == "auto" else bool(config.gradient_checkpointing)
    checkpointing = checkpointing and _enable_gradient_checkpointing(model)
    encoder = LateChunkingEncoder(
        model,
        policy=PoolingPolicy(),
        max_length=config.max_length,
        window_overlap_chunks=config.window_overlap_chunks,
        query_prefix=config.query_prefix,
        document_prefix=config.document_prefix,
        token_budget=config.token_budget,
        window_policy=config.window_policy,
        anchor_share=config.anchor_share,
    )
    loss_module = InsentLossModule(
        config.lambda_seq, config.scale, mode=config.mode, variant=config.loss, average=config.loss_average
    )

    samples, stats = load_samples(config.data, include_synthetic=config.include_synthetic, split=config.split)
    count_tokens(samples, _tokenize(model), config.max_length or model.max_seq_length, stats)
    train_samples, validation = split_by_document(samples, config.validation_fraction, config.seed)
    if not any(sample.queries for sample in train_samples):
        raise ValueError(f"no training queries in {[str(p) for p in config.data]}")
    stats.train_documents, stats.validation_documents = len(train_samples), len(validation)
    stats.train_queries = sum(len(s.queries) for s in train_samples)
    stats.validation_queries = sum(len(s.queries) for s in validation)

    n_batches = len(shard_batches(make_batches(train_samples, config.batch_docs, config.seed, 0), *_rank_world(dist)))
    plan = _plan(config, n_batches)
    parameters = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=config.lr, weight_decay=config.weight_decay)
    scheduler = get_cosine_schedule_with_warmup(optimizer, plan.warmup_steps, plan.total_steps)
    _seed_everything(config.seed + dist.rank)

    step, loss_history, evals, validation_before = 0, [], [], {}
    if checkpoint is not None:
        state = json.loads((checkpoint / STATE_FILE).read_text(encoding="utf-8"))
        _check_resumable(config, state.get("config", {}), checkpoint)
        optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", map_location=device, weights_only=False))
        scheduler.load_state_dict(torch.load(checkpoint / "scheduler.pt", weights_only=False))
        _set_rng_state(torch.load(checkpoint / "rng.pt", weights_only=False))
        step, loss_history = state["step"], state["loss_history"]
        evals, validation_before = state.get("evals", []), state.get("validation_before", {})

    emit(
        "start",
        {
            "config": config_to_dict(config),
            "stats": stats.as_dict(),
            "device": str(device),
            "world_size": dist.world_size,
            "total_steps": plan.total_steps,
            "steps_per_epoch": plan.steps_per_epoch,
            "warmup_steps": plan.warmup_steps,
            "resumed_from": step if checkpoint else None,
            "bf16": use_bf16,
            "gradient_checkpointing": checkpointing,
        },
    )

    def run_eval(at_step: int) -> dict[str, float]:
        scores = evaluate(encoder, validation, config.batch_docs, config.mode, config.context) if validation else {}
        if scores:
            evals.append({"step": at_step, **scores})
            emit("eval", {"step": at_step, **scores})
        return scores

    if dist.main and checkpoint is None and validation:
        validation_before = run_eval(0)
    dist.barrier()

    def save_checkpoint(at_step: int) -> None:
        if dist.main:
            epoch, in_epoch = divmod(at_step, plan.steps_per_epoch)
            state = {
                "step": at_step,
                "epoch": epoch,
                "batch_position": in_epoch * config.grad_accumulation,  # next micro-batch of this epoch
                "total_steps": plan.total_steps,
                "loss_history": loss_history,
                "evals": evals,
                "validation_before": validation_before,
                "config": config_to_dict(config),
            }
            path = _save_checkpoint(output, at_step, model, optimizer, scheduler, state, config.keep_checkpoints)
            emit("checkpoint", {"step": at_step, "path": str(path)})
        dist.barrier()

    start_step = step
    model.train()
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if use_bf16 else nullcontext()
    window_tokens, window_start = 0, time.perf_counter()
    last = loss_history[-1]["loss"] if loss_history else None
    while step < plan.total_steps:
        epoch, in_epoch = divmod(step, plan.steps_per_epoch)
        batches = shard_batches(make_batches(train_samples, config.batch_docs, config.seed, epoch), *_rank_world(dist))
        micro = batches[in_epoch * config.grad_accumulation : (in_epoch + 1) * config.grad_accumulation]
        optimizer.zero_grad(set_to_none=True)
        totals = torch.zeros(3, dtype=torch.float64)  # loss, in_sequence, in_batch (summed over micro-batches)
        counted = 0
        for batch in micro:
            docs = [train_samples[i] for i in batch]
            window_tokens += sum(s.n_tokens or 0 for s in docs) + _query_tokens(
                model, [q for s in docs for q in s.queries]
            )
            result, dummy = _batch_loss(encoder, loss_module, docs, device, config.mode, autocast, config.context)
            if result is None:
                dummy.backward()  # keeps every rank's backward in step; zero gradient
                continue
            (result.total / len(micro)).backward()
            totals += torch.tensor([result.total.item(), result.in_sequence.item(), result.in_batch.item()])
            counted += 1
        _all_reduce_gradients(parameters, dist.world_size)
        torch.nn.utils.clip_grad_norm_(parameters, config.max_grad_norm)
        lr = scheduler.get_last_lr()[0]  # the rate this step used
        optimizer.step()
        scheduler.step()
        step += 1
        if dist.world_size > 1:
            packed = torch.tensor([*totals.tolist(), counted], dtype=torch.float64, device=device)
            torch.distributed.all_reduce(packed)
            totals, counted = packed[:3].cpu(), int(packed[3].item())
        means = (totals / max(counted, 1)).tolist()
        last = means[0] if counted else last
        record = {"step": step, "loss": means[0], "in_sequence": means[1], "in_batch": means[2], "lr": lr}
        loss_history.append(record)
        if step % config.log_every == 0 or step == plan.total_steps:
            elapsed = max(time.perf_counter() - window_start, 1e-9)
            emit("step", {**record, "epoch": epoch, "tokens_per_s": window_tokens * dist.world_size / elapsed})
            window_tokens, window_start = 0, time.perf_counter()
        if config.eval_every and step % config.eval_every == 0 and step < plan.total_steps:
            if dist.main:
                run_eval(step)
            dist.barrier()
        if config.checkpoint_every and step % config.checkpoint_every == 0:
            save_checkpoint(step)

    if config.checkpoint_every and step % config.checkpoint_every != 0 and (checkpoint is None or step > start_step):
        save_checkpoint(step)  # the final state, so that a later run can extend training (--max-steps)

    final_scores: dict[str, float] = {}
    if dist.main:
        final_scores = run_eval(step) if validation else {}
        output.mkdir(parents=True, exist_ok=True)
        model.save(str(output))
    result = TrainResult(
        steps=step,
        final_loss=last,
        validation=final_scores,
        validation_before=validation_before,
        wall_s=time.perf_counter() - started,
        device=str(device),
        model_path=output,
        loss_history=loss_history,
        stats=stats,
        resumed_from=int(checkpoint.name.removeprefix("step-")) if checkpoint else None,
        training_data=documents_seen(samples),
    )
    if dist.main:
        from training.card import write_model_card

        write_model_card(output, config, result)
        emit(
            "done",
            {
                "steps": step,
                "final_loss": last,
                "validation": final_scores,
                "validation_before": validation_before,
                "wall_s": result.wall_s,
                "device": str(device),
                "model_path": str(output),
                "loss_history": loss_history,
                "stats": stats.as_dict(),
            },
        )
    dist.barrier()
    return result


RESUME_FIXED = (
    "data",
    "split",
    "seed",
    "batch_docs",
    "grad_accumulation",
    "validation_fraction",
    "include_synthetic",
    "mode",
    "context",
)
"""Fields that fix the data order or the model's output: a resumed run must not change them."""


def _check_resumable(config: TrainingConfig, saved: dict[str, Any], checkpoint: Path) -> None:
    current = config_to_dict(config)
    changed = [name for name in RESUME_FIXED if name in saved and saved[name] != current[name]]
    if changed:
        details = ", ".join(f"{name}: {saved[name]!r} -> {current[name]!r}" for name in changed)
        raise ValueError(f"cannot resume from {checkpoint}: changed {details} (start a new output folder)")


def _rank_world(dist: _Dist) -> tuple[int, int]:
    return dist.rank, dist.world_size
