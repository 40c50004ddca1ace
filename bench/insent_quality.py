"""InSeNT quality on real data: does training recover late chunking with the offline MiniLM?

SQuAD v1.1 dev (``../shared/data/squad-v1.1-dev.json.gz``, relative to the repository root) is curated with the
project's own functions (``load_squad_json`` → ``chunk_documents`` → ``pair_by_span`` → ``publish_task``); its
articles are split by document with a seeded shuffle into a train half and a test half, each written as a ConTEB
folder under ``--workdir`` (default: a temporary folder). ``--with-covidqa`` adds COVID-QA to the training data.

On the test half, with the offline all-MiniLM-L6-v2 (512-token windows), the script measures nDCG@10 of:

* ``independent``: every chunk encoded alone (``encode_documents(mode="independent")``);
* ``late``: late chunking without training (``mode="late"``);
* ``insent``: late chunking after InSeNT training (``training.loop.train`` with ``context="late"`` on the train
  folder(s), the saved model reloaded);
* ``control`` (unless ``--no-control``): the paper's "+Training" control, trained with ``context="independent"``
  on the same data and evaluated independent.

Retrieval: dot product of L2-normalised vectors over every chunk of the test corpus; nDCG@10 with pytrec_eval
(``ndcg_cut.10``, gold chunk relevance 1), averaged over queries, for all queries and for those whose gold chunk has
``chunk_index > 0`` (where the document's context should matter). The run given to pytrec_eval holds each query's
top 100 chunks (nDCG@10 only depends on the top 10).

Usage (from the repository root)::

    python bench/insent_quality.py [--epochs N | --max-steps N] [--batch-docs 4] [--lr 5e-5] [--lambda-seq 0.1]
        [--seed 0] [--overlap 0] [--with-covidqa] [--no-control] [--workdir DIR] [--json out.json]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `import curation` without installing the package

import argparse
import datetime as dt
import json
import os
import platform
import random
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytrec_eval
import torch
from tqdm import tqdm

from conteb.config import ChunkingConfig, SquadJsonSource, TaskConfig
from conteb.published import read_config
from curation.chunking import chunk_documents
from curation.dataset import publish_task
from curation.pairing import pair_by_span
from curation.quarantine import quarantine_table
from curation.sources.squad import load_squad_json
from embedding.encoder import LateChunkingEncoder, progress_desc
from embedding.models import MINILM_MAX_POSITIONS, load_model
from training.config import TrainingConfig
from training.loop import train

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
SQUAD = SHARED_DATA / "squad-v1.1-dev.json.gz"
COVIDQA = SHARED_DATA / "covidqa-2020-04-23.json.gz"
TOP_K = 100


# --------------------------------------------------------------------------------------------------- curation


def _take(table: pa.Table, column: str, keep: set[str]) -> pa.Table:
    """Rows of ``table`` whose ``column`` is in ``keep``."""
    return table.filter(pc.is_in(table.column(column), value_set=pa.array(sorted(keep), pa.string())))


def curate(
    path: Path, out_root: Path, name: str, chunk_overlap: int, split_seed: int | None
) -> dict[str, dict[str, Any]]:
    """Curate one SQuAD-format file; write ``<name>-train``/``<name>-test`` (seeded halves) or ``<name>`` (all)."""
    task = TaskConfig(
        name=name,
        source=SquadJsonSource(kind="squad_json", path=path),
        chunking=ChunkingConfig(chunk_overlap=chunk_overlap),
    )
    source = load_squad_json(path)
    documents, queries = source.documents_table(), source.queries_table()
    chunking = chunk_documents(documents, task.chunking)
    pairing = pair_by_span(queries, documents, chunking.chunks)
    paired = pairing.table()
    quarantines = {
        "source": source.quarantine_table(),
        "chunks": quarantine_table(chunking.quarantine),
        "pairing": quarantine_table(pairing.quarantine),
    }
    doc_ids = sorted(set(documents.column("doc_id").to_pylist()))
    if split_seed is None:
        splits = {name: set(doc_ids)}
    else:
        shuffled = list(doc_ids)
        random.Random(split_seed).shuffle(shuffled)
        half = len(shuffled) // 2
        splits = {f"{name}-train": set(shuffled[:half]), f"{name}-test": set(shuffled[half:])}
    written = {}
    for split_name, keep in splits.items():
        folder = out_root / split_name
        published = publish_task(
            folder,
            task.model_copy(update={"name": split_name}),
            str(path.name),
            _take(chunking.chunks, "doc_id", keep),
            _take(paired, "doc_id", keep),
            quarantines,
        )
        written[split_name] = {"path": str(folder), "documents": len(keep), **published.counts}
    return written


# --------------------------------------------------------------------------------------------------- evaluation


@dataclass
class TestSet:
    """The test corpus: chunks grouped by document (in order), queries with their gold chunk."""

    doc_ids: list[str]
    chunks: list[list[str]]
    chunk_ids: list[list[str]]
    chunk_index: dict[str, int]
    query_ids: list[str]
    queries: list[str]
    gold: list[str]


def _published(folder: Path, config: str) -> pa.Table:
    """Every row of ``config`` in the published ``folder``, from the files its card names."""
    found = read_config(folder, config, None)
    if found is None:
        raise SystemExit(f"{folder}: no {config} in its dataset card")
    return found[0]


def read_test_set(folder: Path) -> TestSet:
    """Read a ConTEB folder written by :func:`curate`."""
    docs, queries = (_published(folder, config).to_pylist() for config in ("documents", "queries"))
    docs.sort(key=lambda row: (row["doc_id"], row["chunk_index"]))
    grouped: dict[str, tuple[list[str], list[str]]] = {}
    for row in docs:
        texts, ids = grouped.setdefault(row["doc_id"], ([], []))
        texts.append(row["chunk"])
        ids.append(row["chunk_id"])
    return TestSet(
        doc_ids=list(grouped),
        chunks=[texts for texts, _ in grouped.values()],
        chunk_ids=[ids for _, ids in grouped.values()],
        chunk_index={row["chunk_id"]: row["chunk_index"] for row in docs},
        query_ids=[row["query_id"] for row in queries],
        queries=[row["query"] for row in queries],
        gold=[row["chunk_id"] for row in queries],
    )


def subset(test: TestSet, n_docs: int) -> TestSet:
    """The first ``n_docs`` documents of ``test`` and their queries (for quick sizing runs)."""
    keep = set(cid for ids in test.chunk_ids[:n_docs] for cid in ids)
    rows = [(q, t, g) for q, t, g in zip(test.query_ids, test.queries, test.gold, strict=True) if g in keep]
    return TestSet(
        doc_ids=test.doc_ids[:n_docs],
        chunks=test.chunks[:n_docs],
        chunk_ids=test.chunk_ids[:n_docs],
        chunk_index=test.chunk_index,
        query_ids=[r[0] for r in rows],
        queries=[r[1] for r in rows],
        gold=[r[2] for r in rows],
    )


def ndcg10(query_vectors: np.ndarray, chunk_vectors: np.ndarray, test: TestSet) -> dict[str, float]:
    """Mean nDCG@10 (pytrec_eval ``ndcg_cut.10``) for all queries and those with a gold chunk_index > 0."""
    flat_ids = [cid for ids in test.chunk_ids for cid in ids]
    scores = query_vectors @ chunk_vectors.T
    k = min(TOP_K, scores.shape[1])
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    qrels, run = {}, {}
    for row, (qid, gold) in enumerate(zip(test.query_ids, test.gold, strict=True)):
        qrels[qid] = {gold: 1}
        run[qid] = {flat_ids[j]: float(scores[row, j]) for j in top[row]}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
    values = {qid: per_query[qid]["ndcg_cut_10"] for qid in test.query_ids}
    later = [values[q] for q, g in zip(test.query_ids, test.gold, strict=True) if test.chunk_index[g] > 0]
    return {
        "ndcg10_all": float(np.mean(list(values.values()))),
        "ndcg10_later": float(np.mean(later)) if later else float("nan"),
        "queries_all": len(values),
        "queries_later": len(later),
    }


def evaluate(model_path: str, test: TestSet, mode: str, overlap: int) -> dict[str, Any]:
    """Encode the test corpus and queries with ``model_path`` in ``mode``; nDCG@10 and encode time."""
    model = load_model(model_path, max_seq_length=MINILM_MAX_POSITIONS)
    encoder = LateChunkingEncoder(model, window_overlap_chunks=overlap)
    started = time.perf_counter()
    chunk_vectors = np.concatenate(
        encoder.encode_documents(test.chunks, mode=mode, show_progress=True, progress_label=mode)  # type: ignore[arg-type]
    )
    query_vectors = encoder.encode_queries(test.queries, show_progress=True, progress_label=mode)
    encode_s = time.perf_counter() - started
    return {**ndcg10(query_vectors, chunk_vectors, test), "encode_s": encode_s, "truncated": encoder.truncated_chunks}


# --------------------------------------------------------------------------------------------------- training


def run_training(data: list[Path], output: Path, context: str, args: argparse.Namespace) -> dict[str, Any]:
    """Train with ``training.loop.train``; a tqdm bar per step; returns steps, wall time and the loss curve."""
    config = TrainingConfig(
        data=data,
        base_model="offline-minilm",
        output=output,
        context=context,
        epochs=args.epochs,
        max_steps=args.max_steps,
        batch_docs=args.batch_docs,
        lr=args.lr,
        lambda_seq=args.lambda_seq,
        seed=args.seed,
        window_overlap_chunks=args.overlap,
        eval_every=0,
        checkpoint_every=0,
        validation_fraction=0.0,
    )
    bar = tqdm(desc=progress_desc(context, "train"), unit="step")

    def on_event(kind: str, payload: dict[str, Any]) -> None:
        if kind == "start":
            bar.total = payload["total_steps"]
            bar.refresh()
        elif kind == "step":
            bar.update(1)
            bar.set_postfix(loss=f"{payload['loss']:.3f}", lr=f"{payload['lr']:.1e}")

    result = train(config, on_event)
    bar.close()
    losses = [record["loss"] for record in result.loss_history]
    return {
        "context": context,
        "steps": result.steps,
        "wall_s": result.wall_s,
        "s_per_step": result.wall_s / max(result.steps, 1),
        "first_loss": losses[0] if losses else None,
        "final_loss": result.final_loss,
        "loss_history": losses,
        "train_documents": result.stats.train_documents,
        "train_queries": result.stats.train_queries,
        "device": result.device,
    }


# --------------------------------------------------------------------------------------------------- main


@dataclass
class Report:
    settings: dict[str, Any]
    machine: dict[str, Any]
    data: dict[str, Any]
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    training: dict[str, dict[str, Any]] = field(default_factory=dict)


def machine() -> dict[str, Any]:
    import sentence_transformers
    import transformers

    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "transformers": transformers.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


LABELS = {
    "independent": "independent chunks (untrained)",
    "late": "late chunking (untrained)",
    "insent": "late chunking + InSeNT",
    "control": "independent + training (control)",
}


def print_table(report: Report) -> None:
    print()
    print("| system | nDCG@10 all | nDCG@10 chunk_index>0 | queries (all / >0) | encode s |")
    print("|---|---:|---:|---:|---:|")
    for key, row in report.results.items():
        print(
            f"| {LABELS[key]} | {row['ndcg10_all']:.3f} | {row['ndcg10_later']:.3f} | "
            f"{row['queries_all']} / {row['queries_later']} | {row['encode_s']:.0f} |"
        )
    for context, info in report.training.items():
        print(
            f"training ({context}): {info['steps']} steps in {info['wall_s']:.0f} s ({info['s_per_step']:.1f} s/step), "
            f"loss {info['first_loss']:.3f} -> {info['final_loss']:.3f}, "
            f"{info['train_documents']} documents, {info['train_queries']} queries"
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2, help="training epochs (ignored with --max-steps)")
    parser.add_argument("--max-steps", type=int, default=None, help="optimizer steps (overrides --epochs)")
    parser.add_argument("--batch-docs", type=int, default=4, help="documents per training batch")
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--lambda-seq", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0, help="seed of the train/test split and of training")
    parser.add_argument(
        "--overlap", type=int, default=0, help="window overlap in chunks (training and evaluation); default 0"
    )
    parser.add_argument("--chunk-overlap", type=int, default=0, help="splitter overlap in characters")
    parser.add_argument("--with-covidqa", action="store_true", help="add COVID-QA to the training data (slow)")
    parser.add_argument("--no-control", action="store_true", help="skip the +Training control")
    parser.add_argument("--only-untrained", action="store_true", help="evaluate the untrained model only")
    parser.add_argument("--test-docs", type=int, default=None, help="evaluate on the first N test articles (sizing)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the ConTEB folders and models here")
    parser.add_argument("--json", type=Path, default=None, help="write the report as JSON")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> Report:
    args = parse_args(argv)
    temp = None
    if args.workdir is None:
        temp = tempfile.TemporaryDirectory(prefix="insent-quality-")
        workdir = Path(temp.name)
    else:
        workdir = args.workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
    try:
        data = curate(SQUAD, workdir, "squad", args.chunk_overlap, args.seed)
        train_folders = [Path(data["squad-train"]["path"])]
        if args.with_covidqa:
            data.update(curate(COVIDQA, workdir, "covidqa", args.chunk_overlap, None))
            train_folders.append(Path(data["covidqa"]["path"]))
        for name, info in data.items():
            print(f"{name}: {info['documents']} documents, {info['chunks']} chunks, {info['queries']} queries")
        report = Report(settings=vars(args) | {"workdir": str(workdir)}, machine=machine(), data=data)
        test = read_test_set(Path(data["squad-test"]["path"]))
        if args.test_docs is not None:
            test = subset(test, args.test_docs)

        report.results["independent"] = evaluate("offline-minilm", test, "independent", args.overlap)
        report.results["late"] = evaluate("offline-minilm", test, "late", args.overlap)
        if not args.only_untrained:
            report.training["late"] = run_training(train_folders, workdir / "model-insent", "late", args)
            report.results["insent"] = evaluate(str(workdir / "model-insent"), test, "late", args.overlap)
            if not args.no_control:
                report.training["independent"] = run_training(
                    train_folders, workdir / "model-control", "independent", args
                )
                report.results["control"] = evaluate(str(workdir / "model-control"), test, "independent", args.overlap)
        print_table(report)
        if args.json is not None:
            settings = {k: str(v) if isinstance(v, Path) else v for k, v in report.settings.items()}
            args.json.write_text(json.dumps(asdict(report) | {"settings": settings}, indent=2), encoding="utf-8")
        return report
    finally:
        if temp is not None:
            temp.cleanup()


if __name__ == "__main__":
    main()
