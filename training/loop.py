"""The InSeNT training loop: the late-chunking encoder (:mod:`embedding.encoder`) + InSeNT loss over batches of
whole documents.

``train(config, on_event)`` runs alone, under ``torchrun`` (data parallel, :mod:`training.distributed`)
and from a Dagster asset through Pipes: progress is reported only through ``on_event(kind, payload)``
with kinds ``start``, ``step``, ``eval``, ``checkpoint`` and ``done`` (rank 0 only).

One optimizer step reads ``world_size × grad_accumulation`` batches of ``batch_docs`` documents each
(:func:`training.data.make_batches`; fewer at the end of an epoch), dealt round robin to the ranks
(:func:`training.data.step_batches`); its gradient is the mean of those batches' InSeNT loss gradients (each rank
back-propagates its batches' losses weighted by ``world_size / batches in the step`` and DDP averages over ranks,
:mod:`training.distributed`); it is clipped to ``max_grad_norm`` and AdamW steps with a cosine schedule after
``warmup_ratio`` of the steps. Validation (:mod:`training.validation`) runs before training, every ``eval_every``
steps and at the end; checkpoints and resuming are :mod:`training.checkpoints`. The saved model gets its card
(:mod:`training.card`).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from transformers import get_cosine_schedule_with_warmup

from embedding.encoder import LateChunkingEncoder, PoolingPolicy
from embedding.models import load_model, no_transformers_bars, set_attention_dropout
from embedding.windows import Context
from evaluation.config import DEFAULT_TITLE_TEMPLATE
from training.card import write_model_card
from training.checkpoints import (
    ResumeError,
    ResumeMode,
    check_resume,
    checkpoint_step,
    clear_finished,
    mark_finished,
    restore,
    rng_state,
    save_checkpoint,
    start_point,
)
from training.config import TrainingConfig, config_to_dict
from training.data import (
    DataStats,
    TrainingSample,
    chunk_texts,
    count_tokens,
    documents_seen,
    encoder_inputs,
    load_samples,
    make_batches,
    split_by_document,
    step_batches,
    steps_per_epoch,
)
from training.distributed import all_reduce_sum, init_distributed, sync_unless, unused_parameters, wrap
from training.losses import InsentLoss, InsentLossModule, pad_document_tokens, pad_documents
from training.result import TrainResult
from training.supervision import hold_folder
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


def _plan(config: TrainingConfig, n_batches: int, world_size: int) -> _Plan:
    per_epoch = steps_per_epoch(n_batches, world_size, config.grad_accumulation)
    total = config.max_steps if config.max_steps is not None else per_epoch * config.epochs
    return _Plan(per_epoch, total, math.ceil(config.warmup_ratio * total))


def _batch_loss(
    encoder: LateChunkingEncoder,
    loss_module: InsentLossModule,
    docs: list[TrainingSample],
    device: torch.device,
    mode: str,
    autocast: Any,
    context: Context = "late",
    header: str | None = None,
    title_template: str = DEFAULT_TITLE_TEMPLATE,
) -> tuple[InsentLoss | None, torch.Tensor | None]:
    """The batch's InSeNT loss, or ``(None, zero)`` for a batch without queries (a zero-gradient stand-in).

    The chunks are read under ``header`` (:func:`training.data.encoder_inputs`) in ``context``. The encoder runs under
    ``autocast`` (bf16 when asked); scores and loss are computed in float32.
    """
    queries = [query for sample in docs for query in sample.queries]
    query_doc = torch.tensor([i for i, s in enumerate(docs) for _ in s.queries], dtype=torch.long, device=device)
    query_chunk = torch.tensor([g for s in docs for g in s.gold], dtype=torch.long, device=device)
    chunk_lists, titles = encoder_inputs(docs, header, title_template)
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


class _BatchLoss(torch.nn.Module):
    """One batch's loss as a module, the module :func:`training.distributed.wrap` hands to DDP: the
    sentence-transformers model is its submodule (its parameters are DDP's), and its forward is every model forward
    of the batch (:func:`_batch_loss`). ``forward(docs)`` gives ``(what to back-propagate, the loss or None)``: the
    loss's total, or a zero that keeps a batch without queries in step with the other ranks."""

    def __init__(self, run: _Run) -> None:
        super().__init__()
        self.model = run.model
        self._run = run

    def forward(self, docs: list[TrainingSample]) -> tuple[torch.Tensor, InsentLoss | None]:
        run, config = self._run, self._run.config
        header = (config.header, config.title_template)
        loss, zero = _batch_loss(
            run.encoder, run.loss_module, docs, run.device, config.mode, run.autocast, config.context, *header
        )
        backward = loss.total if loss is not None else zero
        assert backward is not None
        return backward, loss


@dataclass
class _Run:
    """Everything a training run holds between its steps (set up by :func:`_set_up`)."""

    config: TrainingConfig
    dist: Any  # training.distributed's rank, world size and barrier
    device: torch.device
    emit: EventCallback
    model: SentenceTransformer
    encoder: LateChunkingEncoder
    loss_module: InsentLossModule
    samples: list[TrainingSample]
    stats: DataStats
    train_samples: list[TrainingSample]
    validation: list[TrainingSample]
    plan: _Plan
    parameters: list[torch.nn.Parameter]
    optimizer: torch.optim.Optimizer
    scheduler: Any
    checkpoint: Path | None
    use_bf16: bool
    checkpointing: bool
    step: int = 0
    loss_history: list[dict[str, float]] = field(default_factory=list)
    evals: list[dict[str, float]] = field(default_factory=list)
    validation_before: dict[str, float] = field(default_factory=dict)
    last: float | None = None  # the last step's mean loss
    forward: torch.nn.Module | None = None  # _BatchLoss, in DDP under torchrun (set up by _set_up)

    @property
    def autocast(self) -> Any:
        """bf16 autocast on the run's device when ``use_bf16``, else a no-op context."""
        if not self.use_bf16:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    @property
    def rank_world(self) -> tuple[int, int]:
        return self.dist.rank, self.dist.world_size


def _load_encoder(config: TrainingConfig, device: torch.device, checkpoint: Path | None) -> tuple[Any, ...]:
    """``(model, encoder, use_bf16, gradient checkpointing on)``: the base model (or the checkpoint's) on ``device``
    with the config's window, dropout and precision settings."""
    model = load_model(str(checkpoint / "model") if checkpoint else config.base_model, device=str(device))
    model_length = model.max_seq_length
    if config.max_length is not None and (model_length is None or config.max_length < model_length):
        model.max_seq_length = config.max_length
    if config.attention_dropout is not None:
        set_attention_dropout(model, config.attention_dropout)
    use_cuda = device.type == "cuda"
    # auto: bf16 on CUDA where supported; True: bf16 autocast on any device (on CPU, torch.autocast("cpu"))
    use_bf16 = config.bf16 is True or (config.bf16 == "auto" and use_cuda and torch.cuda.is_bf16_supported())
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
    return model, encoder, use_bf16, checkpointing


def _load_data(
    config: TrainingConfig, encoder: LateChunkingEncoder, max_length: int | None
) -> tuple[list[TrainingSample], DataStats, list[TrainingSample], list[TrainingSample]]:
    """``(samples, stats, train, validation)``: every document read, split by document; ValueError without a single
    training query."""
    samples, stats = load_samples(config.data, include_synthetic=config.include_synthetic, split=config.split)
    texts = partial(chunk_texts, header=config.header, title_template=config.title_template)
    count_tokens(samples, encoder.tokenize, max_length, stats, texts)
    train_samples, validation = split_by_document(samples, config.validation_fraction, config.seed)
    if not any(sample.queries for sample in train_samples):
        raise ValueError(f"no training queries in {[str(p) for p in config.data]}")
    stats.train_documents, stats.validation_documents = len(train_samples), len(validation)
    stats.train_queries = sum(len(s.queries) for s in train_samples)
    stats.validation_queries = sum(len(s.queries) for s in validation)
    return samples, stats, train_samples, validation


def _start_point(config: TrainingConfig, dist: Any, resume: ResumeMode) -> tuple[Path | None, dict[str, Any]]:
    """``(checkpoint, its state)`` that every rank continues, or ``(None, {})`` for a fresh start: chosen by rank 0,
    which holds the folder (:func:`training.checkpoints.start_point`), checked by :func:`check_resume` (``"auto"``'s
    refusal also names the way to start afresh)."""
    output = Path(config.output)
    chosen = start_point(output, resume) if dist.main else None
    shared = dist.gather(str(chosen) if chosen is not None else None)[0]
    if shared is None:
        return None, {}
    try:
        saved = check_resume(Path(shared), config, dist.world_size)
    except ResumeError as error:
        if resume != "auto":
            raise
        raise ResumeError(f"{error}; or remove {output / 'checkpoints'} to train afresh") from None
    if dist.main:
        clear_finished(output)  # the run goes on: unfinished until its final model is saved again
    return Path(shared), saved


def _set_up(
    config: TrainingConfig, dist: Any, device: torch.device, on_event: EventCallback | None, resume: ResumeMode
) -> _Run:
    """Model, data, optimizer and schedule of a run; the state of the checkpoint it continues (:func:`_start_point`)."""

    def emit(kind: str, payload: dict[str, Any]) -> None:
        if on_event is not None and dist.main:
            on_event(kind, payload)

    checkpoint, saved = _start_point(config, dist, resume)
    model, encoder, use_bf16, checkpointing = _load_encoder(config, device, checkpoint)
    loss_module = InsentLossModule(
        config.lambda_seq, config.scale, mode=config.mode, variant=config.loss, average=config.loss_average
    )
    samples, stats, train_samples, validation = _load_data(config, encoder, config.max_length or model.max_seq_length)
    batches = make_batches(train_samples, config.batch_docs, config.seed, 0)
    plan = _plan(config, len(batches), dist.world_size)
    parameters = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=config.lr, weight_decay=config.weight_decay)
    scheduler = get_cosine_schedule_with_warmup(optimizer, plan.warmup_steps, plan.total_steps)
    # before seeding: the probe's forward draws no random number the steps would miss
    unused = unused_parameters(model, encoder.transformer, encoder.pad_id) if dist.world_size > 1 else []
    _seed_everything(config.seed + dist.rank)
    run = _Run(
        config, dist, device, emit, model, encoder, loss_module, samples, stats, train_samples, validation, plan,
        parameters, optimizer, scheduler, checkpoint, use_bf16, checkpointing,
    )  # fmt: skip
    if checkpoint is not None:
        resumed = restore(checkpoint, saved, optimizer, scheduler, device, dist.rank)
        run.step, run.loss_history = resumed.step, resumed.loss_history
        run.evals, run.validation_before = resumed.evals, resumed.validation_before
    run.last = run.loss_history[-1]["loss"] if run.loss_history else None
    run.forward = wrap(_BatchLoss(run), dist, device, find_unused=bool(unused))
    return run


def _emit_start(run: _Run) -> None:
    plan = run.plan
    run.emit(
        "start",
        {
            "config": config_to_dict(run.config),
            "stats": run.stats.as_dict(),
            "device": str(run.device),
            "world_size": run.dist.world_size,
            "total_steps": plan.total_steps,
            "steps_per_epoch": plan.steps_per_epoch,
            "warmup_steps": plan.warmup_steps,
            "resumed_from": run.step if run.checkpoint else None,
            "bf16": run.use_bf16,
            "gradient_checkpointing": run.checkpointing,
        },
    )


def _evaluate(run: _Run, at_step: int) -> dict[str, float]:
    """Validation nDCG@10 at ``at_step`` (:mod:`training.validation`), recorded and emitted; ``{}`` without
    validation documents. Rank 0 only (the caller's barrier keeps the others waiting)."""
    config = run.config
    if not run.validation:
        return {}
    header = (config.header, config.title_template)
    scores = evaluate(run.encoder, run.validation, config.batch_docs, config.mode, config.context, *header)
    if scores:
        run.evals.append({"step": at_step, **scores})
        run.emit("eval", {"step": at_step, **scores})
    return scores


def _checkpoint(run: _Run, at_step: int) -> None:
    """Save the model, optimizer, schedule, history and every rank's random generators at ``at_step`` (rank 0
    writes; every rank hands its generators over and waits)."""
    rng_states = run.dist.gather(rng_state())
    if run.dist.main:
        config = run.config
        epoch, in_epoch = divmod(at_step, run.plan.steps_per_epoch)
        state = {
            "step": at_step,
            "epoch": epoch,
            "world_size": run.dist.world_size,
            "batch_position": in_epoch * run.dist.world_size * config.grad_accumulation,  # the epoch's next batch
            "total_steps": run.plan.total_steps,
            "loss_history": run.loss_history,
            "evals": run.evals,
            "validation_before": run.validation_before,
            "config": config_to_dict(config),
        }
        path = save_checkpoint(
            Path(config.output), at_step, run.model, run.optimizer, run.scheduler, state, rng_states,
            config.keep_checkpoints,
        )  # fmt: skip
        run.emit("checkpoint", {"step": at_step, "path": str(path)})
    run.dist.barrier()


def _step(run: _Run) -> tuple[dict[str, float], int, int]:
    """One optimizer step (module docstring): ``(record, epoch, tokens forwarded on this rank)``; ``run.step``,
    ``run.last`` and ``run.loss_history`` move on."""
    config, plan = run.config, run.plan
    epoch, in_epoch = divmod(run.step, plan.steps_per_epoch)
    batches = make_batches(run.train_samples, config.batch_docs, config.seed, epoch)
    mine, in_step = step_batches(batches, in_epoch, *run.rank_world, config.grad_accumulation)
    # DDP averages over ranks, so each batch weighs world_size / in_step: the step's gradient is the mean over its
    # batches. A rank left without one at the end of an epoch back-propagates a batch at weight 0 (its zero
    # gradient still takes part in the all-reduce)
    weight = run.dist.world_size / in_step
    micro = [(batch, weight) for batch in mine] or [(batches[0], 0.0)]
    run.optimizer.zero_grad(set_to_none=True)
    totals = torch.zeros(3, dtype=torch.float64)  # loss, in_sequence, in_batch (summed over micro-batches)
    counted, tokens = 0, 0
    assert run.forward is not None
    for position, (batch, share) in enumerate(micro):
        docs = [run.train_samples[i] for i in batch]
        if share:
            tokens += sum(s.n_tokens or 0 for s in docs)
            tokens += _query_tokens(run.encoder, [q for s in docs for q in s.queries])
        with sync_unless(run.forward, accumulating=position < len(micro) - 1):
            backward, loss = run.forward(docs)
            (backward * share).backward()  # a batch without queries: zero gradient, every rank's backward in step
        if loss is not None and share:
            totals += torch.tensor([loss.total.item(), loss.in_sequence.item(), loss.in_batch.item()])
            counted += 1
    torch.nn.utils.clip_grad_norm_(run.parameters, config.max_grad_norm)
    lr = run.scheduler.get_last_lr()[0]  # the rate this step used
    run.optimizer.step()
    run.scheduler.step()
    run.step += 1
    if run.dist.world_size > 1:
        summed = all_reduce_sum([*totals.tolist(), counted], run.device)
        totals, counted = torch.tensor(summed[:3], dtype=torch.float64), int(summed[3])
    means = (totals / max(counted, 1)).tolist()
    run.last = means[0] if counted else run.last
    record = {"step": run.step, "loss": means[0], "in_sequence": means[1], "in_batch": means[2], "lr": lr}
    run.loss_history.append(record)
    return record, epoch, tokens


def _steps(run: _Run) -> None:
    """Optimizer steps up to the plan's total, with their logs, validations and checkpoints."""
    config, plan, dist = run.config, run.plan, run.dist
    start_step = run.step
    run.model.train()
    window_tokens, window_start = 0, time.perf_counter()
    while run.step < plan.total_steps:
        record, epoch, tokens = _step(run)
        window_tokens += tokens
        step = run.step
        if step % config.log_every == 0 or step == plan.total_steps:
            elapsed = max(time.perf_counter() - window_start, 1e-9)
            run.emit("step", {**record, "epoch": epoch, "tokens_per_s": window_tokens * dist.world_size / elapsed})
            window_tokens, window_start = 0, time.perf_counter()
        if config.eval_every and step % config.eval_every == 0 and step < plan.total_steps:
            if dist.main:
                _evaluate(run, step)
            dist.barrier()
        if config.checkpoint_every and step % config.checkpoint_every == 0:
            _checkpoint(run, step)
    if (
        config.checkpoint_every
        and run.step % config.checkpoint_every != 0
        and (run.checkpoint is None or run.step > start_step)
    ):
        _checkpoint(run, run.step)  # the final state, so that a later run can extend training (--max-steps)


def _finish(run: _Run, started: float) -> TrainResult:
    """The final validation, the saved model and its card, the ``done`` event and the result."""
    output = Path(run.config.output)
    final_scores: dict[str, float] = {}
    if run.dist.main:
        final_scores = _evaluate(run, run.step)
        output.mkdir(parents=True, exist_ok=True)
        with no_transformers_bars():
            run.model.save(str(output))
    result = TrainResult(
        steps=run.step,
        final_loss=run.last,
        validation=final_scores,
        validation_before=run.validation_before,
        wall_s=time.perf_counter() - started,
        device=str(run.device),
        model_path=output,
        loss_history=run.loss_history,
        stats=run.stats,
        resumed_from=checkpoint_step(run.checkpoint) if run.checkpoint else None,
        training_data=documents_seen(run.samples),
    )
    if run.dist.main:
        write_model_card(output, run.config, result)
        mark_finished(output, run.step)  # a later run in this folder starts afresh (training.checkpoints.start_point)
        run.emit(
            "done",
            {
                "steps": run.step,
                "final_loss": run.last,
                "validation": final_scores,
                "validation_before": run.validation_before,
                "wall_s": result.wall_s,
                "device": str(run.device),
                "model_path": str(output),
                "loss_history": run.loss_history,
                "stats": run.stats.as_dict(),
            },
        )
    run.dist.barrier()
    return result


def train(config: TrainingConfig, on_event: EventCallback | None = None, resume: ResumeMode = False) -> TrainResult:
    """Train ``config.base_model`` with InSeNT on ``config.data`` and save it to ``config.output``.

    ``resume`` (:data:`training.checkpoints.ResumeMode`): ``True`` continues the latest checkpoint in
    ``<output>/checkpoints`` (a fresh start when there is none), ``"auto"`` continues it only when its run has not
    finished, ``False`` starts afresh; a fresh start first moves an earlier run's checkpoints to
    ``<output>/checkpoints.previous``. :class:`training.checkpoints.ResumeError` when this run cannot continue the
    checkpoint exactly; :class:`training.supervision.FolderInUse` when another live training holds ``output`` (rank
    0 holds it for the whole run). Events go to ``on_event(kind, payload)`` on rank 0. The steps: set up, validate
    before training, optimizer steps (each with its log, validation and checkpoint), then finish (final validation,
    model, card).
    """
    started = time.perf_counter()
    dist, device = init_distributed(config.device)
    with hold_folder(Path(config.output)) if dist.main else nullcontext():
        run = _set_up(config, dist, device, on_event, resume)
        _emit_start(run)
        if run.dist.main and run.checkpoint is None and run.validation:
            run.validation_before = _evaluate(run, 0)
        run.dist.barrier()
        _steps(run)
        return _finish(run, started)
