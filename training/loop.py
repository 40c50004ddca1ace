"""The InSeNT training loop: late-chunking encoder + InSeNT loss over batches of whole documents.

``train(config, on_event)`` runs alone, under ``torchrun`` (data parallel, :mod:`training.distributed`)
and from a Dagster asset through Pipes: progress is reported only through ``on_event(kind, payload)``
with kinds ``start``, ``step``, ``eval``, ``checkpoint`` and ``done`` (rank 0 only).

One optimizer step takes ``grad_accumulation`` batches of ``batch_docs`` documents each
(:func:`training.data.make_batches`, sharded per rank), back-propagates each batch's InSeNT loss
divided by ``grad_accumulation``, averages gradients over ranks, clips them to ``max_grad_norm`` and
steps AdamW with a cosine schedule after ``warmup_ratio`` of the steps. Validation
(:mod:`training.validation`) runs before training, every ``eval_every`` steps and at the end;
checkpoints and resuming are :mod:`training.checkpoints`. The saved model gets its card
(:mod:`training.card`).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from transformers import get_cosine_schedule_with_warmup

from embedding.encoder import LateChunkingEncoder, PoolingPolicy
from embedding.models import load_model, set_attention_dropout
from embedding.windows import Context
from training.card import write_model_card
from training.checkpoints import checkpoint_step, latest_checkpoint, restore, save_checkpoint
from training.config import TrainingConfig, config_to_dict
from training.data import (
    TrainingSample,
    count_tokens,
    documents_seen,
    load_samples,
    make_batches,
    shard_batches,
    split_by_document,
)
from training.distributed import all_reduce_gradients, all_reduce_sum, init_distributed
from training.losses import InsentLoss, InsentLossModule, pad_document_tokens, pad_documents
from training.result import TrainResult
from training.validation import evaluate

EventCallback = Callable[[str, dict[str, Any]], None]


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _enable_gradient_checkpointing(model: SentenceTransformer) -> bool:
    backbone = getattr(model[0], "auto_model", None) or getattr(model[0], "model", None)
    if backbone is None or not getattr(backbone, "supports_gradient_checkpointing", False):
        return False
    backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return True


def _query_tokens(encoder: LateChunkingEncoder, queries: list[str]) -> int:
    """Tokens of ``queries`` with their ``[CLS]`` and ``[SEP]`` (for the tokens/s figure)."""
    return sum(len(ids) + 2 for ids in encoder.tokenize(queries))


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
    context: Context = "late",
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


def train(config: TrainingConfig, on_event: EventCallback | None = None, resume: bool = False) -> TrainResult:
    """Train ``config.base_model`` with InSeNT on ``config.data`` and save it to ``config.output``.

    ``resume``: continue from the latest checkpoint in ``<output>/checkpoints`` (a fresh start when
    there is none). Events go to ``on_event(kind, payload)`` on rank 0.
    """
    started = time.perf_counter()
    dist, device = init_distributed(config.device)
    output = Path(config.output)

    def emit(kind: str, payload: dict[str, Any]) -> None:
        if on_event is not None and dist.main:
            on_event(kind, payload)

    rank_world = (dist.rank, dist.world_size)
    checkpoint = latest_checkpoint(output) if resume else None
    model = load_model(str(checkpoint / "model") if checkpoint else config.base_model, device=str(device))
    model_length = model.max_seq_length
    if config.max_length is not None and (model_length is None or config.max_length < model_length):
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
    count_tokens(samples, encoder.tokenize, config.max_length or model.max_seq_length, stats)
    train_samples, validation = split_by_document(samples, config.validation_fraction, config.seed)
    if not any(sample.queries for sample in train_samples):
        raise ValueError(f"no training queries in {[str(p) for p in config.data]}")
    stats.train_documents, stats.validation_documents = len(train_samples), len(validation)
    stats.train_queries = sum(len(s.queries) for s in train_samples)
    stats.validation_queries = sum(len(s.queries) for s in validation)

    n_batches = len(shard_batches(make_batches(train_samples, config.batch_docs, config.seed, 0), *rank_world))
    plan = _plan(config, n_batches)
    parameters = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=config.lr, weight_decay=config.weight_decay)
    scheduler = get_cosine_schedule_with_warmup(optimizer, plan.warmup_steps, plan.total_steps)
    _seed_everything(config.seed + dist.rank)

    step, loss_history, evals, validation_before = 0, [], [], {}
    if checkpoint is not None:
        resumed = restore(checkpoint, config, optimizer, scheduler, device)
        step, loss_history = resumed.step, resumed.loss_history
        evals, validation_before = resumed.evals, resumed.validation_before

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

    def write_checkpoint(at_step: int) -> None:
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
            path = save_checkpoint(output, at_step, model, optimizer, scheduler, state, config.keep_checkpoints)
            emit("checkpoint", {"step": at_step, "path": str(path)})
        dist.barrier()

    start_step = step
    model.train()
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if use_bf16 else nullcontext()
    window_tokens, window_start = 0, time.perf_counter()
    last = loss_history[-1]["loss"] if loss_history else None
    while step < plan.total_steps:
        epoch, in_epoch = divmod(step, plan.steps_per_epoch)
        batches = shard_batches(make_batches(train_samples, config.batch_docs, config.seed, epoch), *rank_world)
        micro = batches[in_epoch * config.grad_accumulation : (in_epoch + 1) * config.grad_accumulation]
        optimizer.zero_grad(set_to_none=True)
        totals = torch.zeros(3, dtype=torch.float64)  # loss, in_sequence, in_batch (summed over micro-batches)
        counted = 0
        for batch in micro:
            docs = [train_samples[i] for i in batch]
            window_tokens += sum(s.n_tokens or 0 for s in docs) + _query_tokens(
                encoder, [q for s in docs for q in s.queries]
            )
            loss, zero = _batch_loss(encoder, loss_module, docs, device, config.mode, autocast, config.context)
            if loss is not None:
                (loss.total / len(micro)).backward()
                totals += torch.tensor([loss.total.item(), loss.in_sequence.item(), loss.in_batch.item()])
                counted += 1
            elif zero is not None:
                zero.backward()  # keeps every rank's backward in step; zero gradient
        all_reduce_gradients(parameters, dist.world_size)
        torch.nn.utils.clip_grad_norm_(parameters, config.max_grad_norm)
        lr = scheduler.get_last_lr()[0]  # the rate this step used
        optimizer.step()
        scheduler.step()
        step += 1
        if dist.world_size > 1:
            summed = all_reduce_sum([*totals.tolist(), counted], device)
            totals, counted = torch.tensor(summed[:3], dtype=torch.float64), int(summed[3])
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
            write_checkpoint(step)

    if config.checkpoint_every and step % config.checkpoint_every != 0 and (checkpoint is None or step > start_step):
        write_checkpoint(step)  # the final state, so that a later run can extend training (--max-steps)

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
        resumed_from=checkpoint_step(checkpoint) if checkpoint else None,
        training_data=documents_seen(samples),
    )
    if dist.main:
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
