"""What an evaluation produces: per task, per system, every number the reports show.

Everything here is plain data (JSON round-trip through :func:`to_json` / :func:`from_json`), so the
per-task assets can write ``evaluation.json`` and the overall report can be built later from files.
Metric names: ``ndcg@k``, ``map@k``, ``recall@k``, ``p@k``, ``mrr@10`` (see ``evaluation/metrics.py``
for their trec_eval equivalents).

Query subsets: ``"all"`` (every query) and ``"needs_context"`` (queries labelled
``needs_context``, ``curation/necessity.py``; only when the corpus is labelled and the subset is
non-empty). ``SystemRun.metrics`` and ``Comparison`` rows with ``subset="all"`` are over every query;
``SystemRun.subset_metrics["needs_context"]`` and ``TaskEvaluation.subset_comparisons`` (each with
``subset="needs_context"``) repeat them on the subset (same bootstrap and test settings);
``TaskEvaluation.comparisons`` stay over every query.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

HEADLINE = "ndcg@10"
"""The metric of the tables, the numeric Dagster metadata and the paired tests' default."""

ALL = "all"
NEEDS_CONTEXT = "needs_context"
SUBSETS = (ALL, NEEDS_CONTEXT)
"""Query subsets a metric is reported on (module docstring)."""


@dataclass(frozen=True)
class LLMUsage:
    """What a task's LLM chunk contexts cost (from the LLM ledger), shown beside the contextual score."""

    tokens: int
    usd: float


@dataclass
class Summary:
    """A mean over queries with its bootstrap confidence interval."""

    value: float
    ci_low: float
    ci_high: float
    n_queries: int


@dataclass
class PositionPoint:
    """nDCG@10 of the queries whose gold chunk is at ``position`` (0 = first chunk of its document)."""

    position: int
    value: float
    ci_low: float
    ci_high: float
    n_queries: int


@dataclass
class ScalingPoint:
    """nDCG@10 on random subsets of ``n_documents`` documents (mean and std over ``repeats`` subsets)."""

    n_documents: int
    value: float
    std: float
    repeats: int
    n_queries: float  # mean number of queries evaluated per subset


@dataclass
class SystemRun:
    """One system on one task. ``status``: ``ok``, ``not_run`` (requirement missing: ``reason``) or
    ``failed`` (``reason`` = the error)."""

    task: str
    system: str
    kind: str
    status: Literal["ok", "not_run", "failed"]
    reason: str | None = None
    description: str = ""  # e.g. "dense, late chunking, offline-minilm"
    metrics: dict[str, Summary] = field(default_factory=dict)  # "ndcg@10" -> Summary
    document_ndcg10: Summary | None = None  # best chunk score per document, gold = the gold chunk's document
    by_position: list[PositionPoint] = field(default_factory=list)
    scaling: list[ScalingPoint] = field(default_factory=list)
    index_seconds: float | None = None  # encoding/indexing the corpus (documents -> index)
    documents_per_second: float | None = None
    query_seconds: float | None = None  # encoding the queries and scoring them
    llm_tokens: int | None = None  # LLM systems: tokens spent on the task's chunk contexts
    llm_usd: float | None = None
    run_file: str | None = None  # path of the TREC run, relative to the reports folder
    details: dict[str, Any] = field(default_factory=dict)  # model path, prefixes, truncated chunks, ...
    # subset name ("needs_context") -> metric -> Summary over that subset's queries; {} when unlabelled
    subset_metrics: dict[str, dict[str, Summary]] = field(default_factory=dict)

    def summary(self, metric: str = HEADLINE, subset: str = ALL) -> Summary | None:
        """``metric`` over the queries of ``subset`` (``None`` when not measured)."""
        metrics = self.metrics if subset == ALL else self.subset_metrics.get(subset, {})
        return metrics.get(metric)


@dataclass
class Comparison:
    """Paired significance test of ``system_a`` vs ``system_b`` on the same queries (two-sided)."""

    task: str
    system_a: str
    system_b: str
    metric: str
    mean_a: float
    mean_b: float
    difference: float  # mean_a - mean_b
    p_value: float
    n_queries: int
    method: str  # randomization | bootstrap
    resamples: int
    subset: str = ALL  # the queries tested: "all" | "needs_context"


@dataclass
class ChunkSizePoint:
    """One system re-evaluated with the task re-chunked at ``chunk_size`` characters."""

    task: str
    system: str
    chunk_size: int
    value: float  # nDCG@10
    ci_low: float
    ci_high: float
    n_queries: int
    n_chunks: int


@dataclass
class TaskEvaluation:
    """Every system on one task, the key comparisons and the chunk-size study."""

    task: str
    source: str
    split: str
    n_documents: int
    n_chunks: int
    n_queries: int
    runs: list[SystemRun] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)  # over every query (subset "all")
    subset_comparisons: list[Comparison] = field(default_factory=list)  # the same tests on the needs_context subset
    chunk_sizes: list[ChunkSizePoint] = field(default_factory=list)
    chunk_size_note: str | None = None  # why the study did not run, when it did not
    qrels_file: str | None = None  # relative to the reports folder
    subset_qrels_files: dict[str, str] = field(default_factory=dict)  # subset -> its qrels (relative), when reported
    notes: list[str] = field(default_factory=list)
    created_at: str = ""  # ISO timestamp
    corpus_fingerprint: str = ""  # EvalCorpus.fingerprint(): earlier results are merged only on the same corpus
    n_needs_context: int | None = None  # queries labelled needs_context; None: the queries are unlabelled

    def run(self, system: str) -> SystemRun | None:
        return next((r for r in self.runs if r.system == system), None)


def to_json(evaluation: TaskEvaluation) -> str:
    """``evaluation`` as indented JSON (NaN written as null)."""
    return json.dumps(_clean(dataclasses.asdict(evaluation)), indent=2, allow_nan=False)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def from_json(text: str) -> TaskEvaluation:
    """Inverse of :func:`to_json` (null floats come back as NaN where a float is expected)."""
    raw = json.loads(text)

    def summary(d: dict | None) -> Summary | None:
        return None if d is None else Summary(**{k: _nan(v) for k, v in d.items()})

    runs = []
    for r in raw.pop("runs"):
        r["metrics"] = {k: summary(v) for k, v in r["metrics"].items()}
        r["document_ndcg10"] = summary(r["document_ndcg10"])
        r["by_position"] = [PositionPoint(**{k: _nan(v) for k, v in p.items()}) for p in r["by_position"]]
        r["scaling"] = [ScalingPoint(**{k: _nan(v) for k, v in p.items()}) for p in r["scaling"]]
        r["subset_metrics"] = {
            name: {k: summary(v) for k, v in metrics.items()} for name, metrics in r.get("subset_metrics", {}).items()
        }
        runs.append(SystemRun(**r))
    comparisons = [Comparison(**{k: _nan(v) for k, v in c.items()}) for c in raw.pop("comparisons")]
    subset_comparisons = [Comparison(**{k: _nan(v) for k, v in c.items()}) for c in raw.pop("subset_comparisons", [])]
    chunk_sizes = [ChunkSizePoint(**{k: _nan(v) for k, v in c.items()}) for c in raw.pop("chunk_sizes")]
    return TaskEvaluation(
        **raw, runs=runs, comparisons=comparisons, subset_comparisons=subset_comparisons, chunk_sizes=chunk_sizes
    )


def _nan(value: Any) -> Any:
    return float("nan") if value is None else value
