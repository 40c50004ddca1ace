"""What an evaluation produces: per task, per system, every number the reports show.

Everything here is plain data (JSON round-trip through :func:`to_json` / :func:`from_json`), so the
per-task assets can write ``evaluation.json`` and the overall report can be built later from files;
:func:`results_records` is the flat machine-readable layout of ``results.json``. A float that is
null in JSON comes back as NaN: :func:`is_missing` tells both apart from a number.
Metric names: ``ndcg@k``, ``map@k``, ``recall@k``, ``p@k``, ``mrr@10`` (see ``evaluation/metrics/retrieval.py``
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
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Literal

HEADLINE = "ndcg@10"
"""The metric of the tables, the numeric Dagster metadata and the paired tests' default."""

SIGNIFICANCE_LEVEL = 0.05
"""A paired comparison is reported significant when its p-value is below this (:meth:`Comparison.significant`)."""

ALL = "all"
NEEDS_CONTEXT = "needs_context"
"""Query subsets a metric is reported on (module docstring)."""

CONFIGURED = "configured"
BEST_BASELINE = "best_baseline"
"""``Comparison.plan``: a pair of ``significance.comparisons`` (``configured``), or a tested system against the best
cheap baseline on the same queries (``best_baseline``; the rule: :mod:`evaluation.comparisons`)."""

PROVENANCE_RECORDED = "recorded"
PROVENANCE_IDS_ONLY = "ids only"
PROVENANCE_UNKNOWN = "unknown"
"""``SystemRun.provenance``: what is known of the training documents of a system's model
(:func:`evaluation.leakage.model_provenance`): ``recorded`` (its ``training_data.json`` records content fingerprints:
overlap with the corpus was checked on content), ``ids only`` (an older ``training_data.json``: checked on task,
folder and document ids only), ``unknown`` (no ``training_data.json``: a hub or packaged model, or a folder copied
without it; nothing could be checked). ``None``: the system uses no model (BM25) or its model was not found."""

_PROVENANCE_LABELS = {
    PROVENANCE_RECORDED: "provenance recorded",
    PROVENANCE_IDS_ONLY: "provenance incomplete (ids only)",
    PROVENANCE_UNKNOWN: "provenance unknown",
}


def provenance_label(status: str | None) -> str:
    """A provenance status in words, as every report shows it (``unknown`` -> ``provenance unknown``); ``""`` for
    None (no model)."""
    return "" if status is None else _PROVENANCE_LABELS.get(status, f"provenance {status}")


def is_missing(value: float | None) -> bool:
    """True for ``None`` and NaN (a number JSON stored as null, or one never measured)."""
    return value is None or (isinstance(value, numbers.Real) and math.isnan(value))


SIGNIFICANTLY_BETTER = "significantly better"
SIGNIFICANTLY_WORSE = "significantly worse"
NO_MEASURABLE_DIFFERENCE = "no measurable difference"
"""The three verdicts of a paired test in words (:func:`direction_words`)."""


def is_significant(p_adjusted: float | None) -> bool:
    """``p_adjusted < SIGNIFICANCE_LEVEL``; a missing p-value is not significant. Every verdict and count reads the
    Holm-adjusted p (:func:`evaluation.metrics.stats.holm`)."""
    return not is_missing(p_adjusted) and p_adjusted is not None and p_adjusted < SIGNIFICANCE_LEVEL


def direction_words(p_adjusted: float | None, difference: float) -> str:
    """A paired test's verdict in words, ``a`` − ``b`` = ``difference``: :data:`SIGNIFICANTLY_BETTER` or
    :data:`SIGNIFICANTLY_WORSE` when ``p_adjusted`` is significant (:func:`is_significant`), else
    :data:`NO_MEASURABLE_DIFFERENCE`."""
    if not is_significant(p_adjusted):
        return NO_MEASURABLE_DIFFERENCE
    return SIGNIFICANTLY_BETTER if difference > 0 else SIGNIFICANTLY_WORSE


@dataclass(frozen=True)
class LLMUsage:
    """What a task's LLM chunk contexts cost (from the LLM ledger), shown beside the contextual score."""

    tokens: int
    usd: float


@dataclass
class Summary:
    """A mean over queries with its bootstrap confidence interval, resampling whole documents
    (:func:`evaluation.metrics.stats.bootstrap_ci`); ``n_documents`` None: a file written before documents were
    counted (its interval resampled queries)."""

    value: float
    ci_low: float
    ci_high: float
    n_queries: int
    n_documents: int | None = None


@dataclass
class PositionPoint:
    """nDCG@10 of the queries whose gold chunk is at ``position`` (0 = first chunk of its document), its interval
    resampling their documents."""

    position: int
    value: float
    ci_low: float
    ci_high: float
    n_queries: int
    n_documents: int | None = None  # None: a file written before documents were counted


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
    provenance: str | None = None  # PROVENANCE_* (module constants); None: no model
    provenance_note: str | None = None  # one sentence: what is known of the model's training documents, and where
    role: str | None = None  # "baseline" (a cheap baseline) or "tested" (evaluation/comparisons.py); None: older files

    def summary(self, metric: str = HEADLINE, subset: str = ALL) -> Summary | None:
        """``metric`` over the queries of ``subset`` (``None`` when not measured)."""
        metrics = self.metrics if subset == ALL else self.subset_metrics.get(subset, {})
        return metrics.get(metric)


@dataclass
class Comparison:
    """Paired significance test of ``system_a`` vs ``system_b`` on the same queries (two-sided), with whole documents
    as the units (:mod:`evaluation.metrics.stats`).

    ``p_value``: the document-level test; ``p_adjusted``: it after Holm's adjustment over the task's family of
    comparisons (:func:`evaluation.metrics.stats.adjust_family`: every comparison of one evaluation, both subsets),
    what :meth:`significant` and every count read (NaN in a file written before the adjustment: never significant);
    ``p_query``: the same test with each query its own unit (a secondary figure, labelled so); ``ci_low`` and
    ``ci_high``: the document-bootstrap interval of ``difference``; ``mdd``: the smallest true difference the test
    detects with 80% power at 0.05 on these documents (``inf``: too few documents to reach 0.05 at all).
    ``plan``: :data:`CONFIGURED` or :data:`BEST_BASELINE` (``system_b`` is then the best cheap baseline on these
    queries, picked among ``baselines``: every baseline that ran -> its mean of ``metric`` on the same queries)."""

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
    plan: str = CONFIGURED  # CONFIGURED | BEST_BASELINE
    baselines: dict[str, float] = field(default_factory=dict)  # BEST_BASELINE: each candidate's mean, these queries
    n_documents: int | None = None  # None: a file written before documents were the units (its p resampled queries)
    p_adjusted: float = float("nan")
    p_query: float = float("nan")
    ci_low: float = float("nan")
    ci_high: float = float("nan")
    mdd: float = float("nan")

    def significant(self) -> bool:
        """``p_adjusted < SIGNIFICANCE_LEVEL`` (a missing p-value is not significant)."""
        return is_significant(self.p_adjusted)

    def direction(self) -> str:
        """The verdict in words: ``significantly better``, ``significantly worse`` (``system_a`` against
        ``system_b``, Holm-adjusted) or ``no measurable difference``."""
        return direction_words(self.p_adjusted, self.difference)


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
    n_documents: int | None = None  # None: a file written before documents were counted


SELECTION_RULE = (
    "the simplest candidate (a cheap baseline, then one model, then a fusion with a model) unless a more complex one "
    "leads on nDCG@10 of the needs_context queries (else all) by a margin the document bootstrap supports "
    "(one-sided 95% bound above 0, Bonferroni over its tier, at least 5 documents); fitted fusions scored by "
    "cross-validation over validation documents, their weights shrunk toward equal (one-standard-error rule); exact "
    "ties to the simpler, then by name; no test label read"
)
"""How :mod:`evaluation.select` chooses, in words (after "chosen on the validation split: ")."""

EARLIER_RULE = "earlier rule"
RULES = (EARLIER_RULE, "shrunk weights", "cross-validated scores", "tie rule", "simplicity")
"""``Selection.by_rule``'s keys, in the order the rules are added (:mod:`evaluation.choice`): the earlier rule's
choice (the highest in-sample score, ties to the first declared), then the choice with fusion weights shrunk toward
equal, with fitted fusions scored out of fold, with ties to the simpler, and with the simplicity preference."""


@dataclass
class Selection:
    """The pipeline the product chose on the validation split (:mod:`evaluation.select`), and why. Test numbers of
    the chosen system are its :class:`SystemRun`'s.

    ``validation``: the scores the choice compared (a fitted fusion's cross-validated, out of fold); ``in_sample``:
    a fitted fusion's score with its weights on the queries they were fitted to. A file written before these
    (``folds`` 0) holds in-sample scores of fitted fusions in ``validation`` and no record."""

    split: str  # the split chosen on ("validation")
    candidates: list[str] = field(default_factory=list)  # evaluation.select, in declared order
    chosen: str | None = None  # None: no candidate ran on validation
    validation: dict[str, dict[str, float]] = field(default_factory=dict)  # candidate -> {subset: mean nDCG@10}
    fitted_weights: dict[str, dict[str, float]] = field(default_factory=dict)  # fusion -> {component: weight}
    n_documents: int = 0
    n_queries: int = 0
    n_needs_context: int | None = None
    notes: list[str] = field(default_factory=list)  # candidates left out and why; ties the split cannot decide
    rule: str = SELECTION_RULE
    in_sample: dict[str, dict[str, float]] = field(default_factory=dict)  # fitted fusion -> {subset: mean nDCG@10}
    grid_best: dict[str, dict[str, float]] = field(default_factory=dict)  # fusion -> weights before the shrinkage
    tiers: dict[str, int] = field(default_factory=dict)  # candidate -> 0 cheap baseline, 1 one model, 2 fusion
    folds: int = 0  # cross-validation folds of whole documents; 0: a file written before
    decision: str = ""  # the rule that decided, in words
    by_rule: dict[str, str | None] = field(default_factory=dict)  # RULES -> the choice after that rule

    def changed_by(self) -> list[str]:
        """The rules of :data:`RULES` that changed the choice of the rule before them."""
        steps = [self.by_rule.get(rule) for rule in RULES] if EARLIER_RULE in self.by_rule else []
        return [rule for rule, a, b in zip(RULES[1:], steps, steps[1:], strict=False) if a != b]

    def shrunk(self) -> list[str]:
        """The fitted fusions whose weights the shrinkage moved away from the grid's best point."""
        return [name for name, weights in self.grid_best.items() if weights != self.fitted_weights.get(name)]


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
    selection: Selection | None = None  # the pipeline chosen on validation (evaluation.select); None: no choice made

    def run(self, system: str) -> SystemRun | None:
        return next((r for r in self.runs if r.system == system), None)


def to_json(evaluation: TaskEvaluation) -> str:
    """``evaluation`` as indented JSON (NaN written as null)."""
    return json.dumps(_clean(dataclasses.asdict(evaluation)), indent=2, allow_nan=False)


def json_ready(value: Any) -> Any:
    """``value`` (dicts, lists, numbers) as strict JSON takes it: NaN -> None, infinity -> ``"inf"`` (a
    comparison's detectable difference can be one), as ``evaluation.json`` writes them."""
    return _clean(value)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and is_missing(value):
        return None
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"  # JSON has no infinity: a comparison's mdd can be one
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

    def comparison(d: dict) -> Comparison:
        baselines = {name: _nan(v) for name, v in (d.pop("baselines", None) or {}).items()}
        return Comparison(**{k: _nan(v) for k, v in d.items()}, baselines=baselines)

    comparisons = [comparison(c) for c in raw.pop("comparisons")]
    subset_comparisons = [comparison(c) for c in raw.pop("subset_comparisons", [])]
    chunk_sizes = [ChunkSizePoint(**{k: _nan(v) for k, v in c.items()}) for c in raw.pop("chunk_sizes")]
    selected = raw.pop("selection", None)
    if selected is not None:
        for scores in ("validation", "in_sample"):
            selected[scores] = {
                name: {k: _nan(v) for k, v in means.items()} for name, means in selected.get(scores, {}).items()
            }
        selected = Selection(**selected)
    return TaskEvaluation(
        **raw,
        runs=runs,
        comparisons=comparisons,
        subset_comparisons=subset_comparisons,
        chunk_sizes=chunk_sizes,
        selection=selected,
    )


def _nan(value: Any) -> Any:
    if value in ("inf", "-inf"):
        return float(value)
    return float("nan") if value is None else value


def results_records(evaluations: list[TaskEvaluation]) -> list[dict[str, Any]]:
    """The fixed machine-readable layout of ``results.json``: one record per (task, system, metric).

    Keys: ``task``, ``system``, ``metric``, ``value``, ``ci_low``, ``ci_high``, ``n_queries``, ``n_documents`` (the
    documents those queries come from, the units the interval resampled; null in a file written before documents
    were counted; NaN -> null) and ``subset``: ``"all"`` (every query) or ``"needs_context"`` (the queries labelled so,
    ``curation/necessity.py``: every metric of the run again, when the task is labelled and the subset
    non-empty). Metrics: every metric of every ok run (``ndcg@10``, ``map@5``, ...), then

    * ``doc_ndcg@10``: document-level nDCG@10 (with its CI);
    * ``ndcg@10@position=<p>``: queries whose gold chunk is at position ``p`` (with CI);
    * ``ndcg@10@n_docs=<n>``: random corpora of ``n`` documents; here ``ci_low`` / ``ci_high`` are
      mean - std / mean + std over the subsets (not a confidence interval), ``n_queries`` the mean
      number of queries per subset (may be fractional) and ``n_documents`` is ``n``;
    * ``ndcg@10@chunk_size=<s>``: the task re-chunked at ``s`` characters (every chunk-size point);
    * ``documents_per_second``, ``index_seconds``, ``llm_usd``, ``llm_tokens``: when known; ``ci_low``,
      ``ci_high``, ``n_queries`` and ``n_documents`` null.
    """
    records: list[dict[str, Any]] = []

    def add(
        task: str,
        system: str,
        metric: str,
        value: Any,
        low: Any = None,
        high: Any = None,
        n: Any = None,
        subset: str = ALL,
        documents: Any = None,
    ) -> None:
        records.append(
            {
                "task": task,
                "system": system,
                "metric": metric,
                "value": _clean(value),
                "ci_low": _clean(low),
                "ci_high": _clean(high),
                "n_queries": _clean(n),
                "n_documents": _clean(documents),
                "subset": subset,
            }
        )

    for evaluation in evaluations:
        task = evaluation.task
        for run in evaluation.runs:
            if run.status != "ok":
                continue
            for metric, s in run.metrics.items():
                add(task, run.system, metric, s.value, s.ci_low, s.ci_high, s.n_queries, documents=s.n_documents)
            for subset, metrics in run.subset_metrics.items():
                for metric, s in metrics.items():
                    add(task, run.system, metric, s.value, s.ci_low, s.ci_high, s.n_queries, subset, s.n_documents)
            if run.document_ndcg10 is not None:
                s = run.document_ndcg10
                add(task, run.system, "doc_ndcg@10", s.value, s.ci_low, s.ci_high, s.n_queries, documents=s.n_documents)
            for p in sorted(run.by_position, key=lambda p: p.position):
                name = f"ndcg@10@position={p.position}"
                add(task, run.system, name, p.value, p.ci_low, p.ci_high, p.n_queries, documents=p.n_documents)
            for point in sorted(run.scaling, key=lambda point: point.n_documents):
                std = point.std
                low, high = (point.value - std, point.value + std) if not is_missing(std) else (None, None)
                name = f"ndcg@10@n_docs={point.n_documents}"
                add(task, run.system, name, point.value, low, high, point.n_queries, documents=point.n_documents)
            for name in ("documents_per_second", "index_seconds", "llm_usd", "llm_tokens"):
                value = getattr(run, name)
                if value is not None:
                    add(task, run.system, name, value)
        for c in evaluation.chunk_sizes:
            name = f"ndcg@10@chunk_size={c.chunk_size}"
            add(task, c.system, name, c.value, c.ci_low, c.ci_high, c.n_queries, documents=c.n_documents)
    return records
