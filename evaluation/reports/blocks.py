"""Pieces shared by the report builders (one task, every task, the query subsets).

Contract: pure functions from results (:mod:`evaluation.results`) to cells, rows and strings of the
document model (:mod:`evaluation.reports.document`), with numbers formatted by
:mod:`evaluation.reports.formatting`: what "best" means (the best formatted value; cells that format to it are
bold), the comparison table (its header and rows, the key comparisons first), which key comparisons
did not run and why, how a run's status and reason read, and what is known of each model's training documents
(its provenance: one line per distinct note, naming the systems it concerns), and the comparisons with the best
cheap baseline (:func:`baseline_blocks`: the rule of :mod:`evaluation.comparisons` in words, one row per tested
system, and the tested systems left untested with why).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from conteb.names import SystemName
from evaluation.comparisons import BASELINE, BEST_BASELINE_RULE, TESTED
from evaluation.reports.document import Block, BulletList, Cell, Heading, Paragraph, Span, Table, number, text
from evaluation.reports.formatting import format_metric
from evaluation.reports.ranking import by_score
from evaluation.reports.significance import (
    P_ADJUSTED,
    P_UNADJUSTED,
    QUERY_LEVEL_P,
    format_mdd,
    interval_text,
    p_adjusted_text,
    p_query_text,
    p_unadjusted_text,
    sizes_cell,
    verdict_cell,
)
from evaluation.results import (
    ALL,
    BEST_BASELINE,
    HEADLINE,
    SIGNIFICANCE_LEVEL,
    Comparison,
    SystemRun,
    TaskEvaluation,
    is_missing,
    provenance_label,
)

KEY_COMPARISONS: tuple[tuple[str, str], ...] = (
    (SystemName.LATE_CHUNKING, SystemName.INDEPENDENT),
    (SystemName.INSENT, SystemName.LATE_CHUNKING),
)
"""The comparisons every report lists first, and says so when they were not tested."""

REASON_LIMIT = 600
"""Characters of a reason shown in the reports (``report.json`` keeps all of it)."""

_STATUS_TEXT = {"ok": "ok", "not_run": "not run", "failed": "failed"}

TEST_COLUMNS = (
    P_ADJUSTED,
    P_UNADJUSTED,
    "Queries (documents)",
    "Detectable Δ (80% power)",
)
"""The columns every table of paired tests shows after the difference (:func:`test_cells`)."""
VERDICT_COLUMN = f"Verdict (adjusted p < {SIGNIFICANCE_LEVEL})"
QUERY_LEVEL_COLUMN = QUERY_LEVEL_P[0].upper() + QUERY_LEVEL_P[1:]

COMPARISON_HEADER = (
    "System A",
    "System B",
    "Metric",
    "Mean A / B",
    "Δ (A − B) [95% CI over documents]",
    *TEST_COLUMNS,
    "Test",
    VERDICT_COLUMN,
    QUERY_LEVEL_COLUMN,
)


def means_text(c: Comparison) -> str:
    """``0.710 / 0.650``: the means of both systems on the compared queries."""
    return f"{format_metric(c.mean_a)} / {format_metric(c.mean_b)}"


def family_size(evaluation: TaskEvaluation) -> int:
    """How many paired comparisons of ``evaluation`` (both subsets) Holm's adjustment counted: those with a p."""
    return sum(1 for c in (*evaluation.comparisons, *evaluation.subset_comparisons) if not is_missing(c.p_value))


def tests_note(family: str) -> str:
    """How every table of paired tests reads, ``family`` naming the Holm family (``the task's 5 comparisons``)."""
    return (
        "Paired two-sided tests on the same queries with whole documents as the units (the queries of one document "
        "are not independent): Δ with its 95% confidence interval from a bootstrap over documents; p from the paired "
        f"test that flips (or resamples) whole documents, Holm-adjusted over {family} (all queries and needs_context); "
        f"the verdict reads the adjusted p (significant below {SIGNIFICANCE_LEVEL}, in bold). Detectable Δ: the "
        'smallest true difference this test set detects with 80% power at 0.05; "none": too few documents for any '
        "difference to reach 0.05. The query-level p treats every query as independent and overstates the evidence: "
        "shown for comparison only, it decides nothing (docs/evaluation.md, Statistics)."
    )


def test_cells(c: Comparison) -> list[Cell]:
    """The cells under :data:`TEST_COLUMNS`: adjusted p (bold when significant), unadjusted p, queries (documents),
    detectable difference."""
    return [
        number(p_adjusted_text(c), bold=c.significant()),
        number(p_unadjusted_text(c)),
        number(sizes_cell(c.n_queries, c.n_documents)),
        number(format_mdd(c.mdd, c.n_documents)),
    ]


def status_text(status: str) -> str:
    """A run's status in words (``not_run`` -> ``not run``)."""
    return _STATUS_TEXT.get(status, status)


def reason_text(run: SystemRun) -> str:
    """Why ``run`` did not run, on one line and at most :data:`REASON_LIMIT` characters."""
    reason = " ".join((run.reason or "no reason given").split())
    return reason if len(reason) <= REASON_LIMIT else reason[: REASON_LIMIT - 1] + "…"


def best_formatted(values: Iterable[float | None]) -> str | None:
    """The formatted best value (cells that format to it are bold), None when there is none."""
    finite = [v for v in values if v is not None and not is_missing(v)]
    return format_metric(max(finite)) if finite else None


def ordered(names: Iterable[str]) -> list[str]:
    """``names`` without repeats, in order of first appearance."""
    return list(dict.fromkeys(names))


def comparison_rows(comparisons: Sequence[Comparison], with_task: bool) -> tuple[tuple[Cell, ...], ...]:
    """Rows under :data:`COMPARISON_HEADER` (a first ``task`` cell when ``with_task``)."""
    rows = []
    for c in comparisons:
        cells = [
            text(c.system_a),
            text(c.system_b),
            text(c.metric),
            number(means_text(c)),
            number(interval_text(c)),
            *test_cells(c),
            text(f"{c.method} over documents ({c.resamples:,})"),
            text(verdict_cell(c), bold=c.significant()),
            number(p_query_text(c)),
        ]
        rows.append(tuple([text(c.task), *cells] if with_task else cells))
    return tuple(rows)


def key_first(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """``comparisons`` with the :data:`KEY_COMPARISONS` first (in their order), the others after."""

    def key(c: Comparison) -> int:
        pair = {c.system_a, c.system_b}
        return next((i for i, k in enumerate(KEY_COMPARISONS) if set(k) == pair), len(KEY_COMPARISONS))

    return sorted(comparisons, key=key)


def configured(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """The configured pairs of ``comparisons`` (not those against the best cheap baseline), key comparisons first."""
    return key_first([c for c in comparisons if c.plan != BEST_BASELINE])


BASELINE_HEADER = (
    "Tested system",
    "Best cheap baseline",
    "Metric",
    "Mean (tested / baseline)",
    "Δ (tested − baseline) [95% CI over documents]",
    *TEST_COLUMNS,
    VERDICT_COLUMN,
    "Baselines considered (mean on these queries)",
    QUERY_LEVEL_COLUMN,
)


def baseline_rows(comparisons: Sequence[Comparison], with_task: bool) -> tuple[tuple[Cell, ...], ...]:
    """Rows under :data:`BASELINE_HEADER` for the comparisons against the best cheap baseline (others skipped); a
    first ``task`` cell when ``with_task``."""
    rows = []
    for c in comparisons:
        if c.plan != BEST_BASELINE:
            continue
        considered = ", ".join(f"{name} {format_metric(mean)}" for name, mean in c.baselines.items())
        cells = [
            text(c.system_a),
            text(c.system_b, bold=True),
            text(c.metric),
            number(means_text(c)),
            number(interval_text(c)),
            *test_cells(c),
            text(verdict_cell(c), bold=c.significant()),
            text(considered),
            number(p_query_text(c)),
        ]
        rows.append(tuple([text(c.task), *cells] if with_task else cells))
    return tuple(rows)


SUBSET_RULE = "The best cheap baseline picked again, by {metric} on these queries only (the rule of all queries)."


def baseline_blocks(
    evaluations: Sequence[TaskEvaluation], subset: str = ALL, *, with_task: bool = False
) -> list[Block]:
    """The comparisons of each tested system with the best cheap baseline on ``subset``'s queries: the rule
    (:data:`evaluation.comparisons.BEST_BASELINE_RULE`; :data:`SUBSET_RULE` on a subset), the table
    (:func:`baseline_rows`) and, on all queries, the tested systems that were not compared, with why
    (:func:`untested_baseline_comparisons`)."""
    comparisons = [  # per task, the best tested system first (the table's own score column)
        c
        for e in evaluations
        for c in by_score(
            (c for c in (e.comparisons if subset == ALL else e.subset_comparisons) if c.subset == subset),
            lambda c: c.mean_a if c.plan == BEST_BASELINE else None,
        )
    ]
    metric = next((c.metric for c in comparisons), HEADLINE)
    rule = BEST_BASELINE_RULE.format(metric=metric) if subset == ALL else SUBSET_RULE.format(metric=metric)
    blocks: list[Block] = [Paragraph((Span(rule),))]
    header = ("Task", *BASELINE_HEADER) if with_task else BASELINE_HEADER
    rows = baseline_rows(comparisons, with_task)
    if rows:
        table = "baseline-comparisons" if subset == ALL else f"baseline-comparisons-{subset}"
        blocks.append(Table(table, header, rows))
    untested = [
        f"{e.task}: {line}" if with_task else line
        for e in evaluations
        for line in (untested_baseline_comparisons(e) if subset == ALL else [])
    ]
    if untested:
        blocks.append(BulletList(tuple((Span(line),) for line in untested)))
    elif not rows:
        blocks.append(Paragraph((Span("No tested system was compared with a cheap baseline."),)))
    return blocks


def untested_baseline_comparisons(evaluation: TaskEvaluation) -> list[str]:
    """The tested systems (``SystemRun.role``) of ``evaluation`` without a comparison with the best cheap baseline on
    all queries, with why: the system did not run, or no cheap baseline did."""
    compared = {c.system_a for c in evaluation.comparisons if c.plan == BEST_BASELINE}
    baselines_ran = any(r.role == BASELINE and r.status == "ok" for r in evaluation.runs)
    missing = []
    for run in evaluation.runs:
        if run.role != TESTED or run.system in compared:
            continue
        if run.status != "ok":
            why = status_text(run.status)
        elif not baselines_ran:
            why = "no cheap baseline ran"
        else:
            why = "no per-query metrics to compare"
        missing.append(f"{run.system} vs the best cheap baseline: not tested ({why})")
    return missing


def untested_comparisons(evaluation: TaskEvaluation) -> list[str]:
    """The key comparisons missing on ``evaluation``, with why (when a system did not run)."""
    missing = []
    for a, b in KEY_COMPARISONS:
        if any({c.system_a, c.system_b} == {a, b} for c in evaluation.comparisons):
            continue
        why = []
        for system in (a, b):
            run = evaluation.run(system)
            if run is None:
                why.append(f"{system} not configured")
            elif run.status != "ok":
                why.append(f"{system} {status_text(run.status)}")
        missing.append(f"{a} vs {b}: not tested" + (f" ({', '.join(why)})" if why else ""))
    return missing


PROVENANCE_HEADING = "Model provenance"
PROVENANCE_INTRO = (
    "What is known of the documents each model was trained on (its training_data.json). A model of unknown "
    "provenance could not be checked for overlap with the evaluated corpus; evaluation.require_provenance: true "
    "refuses such models."
)


def provenance_cell(run: SystemRun) -> str:
    """A run's provenance in words (``provenance unknown``), or a dash for a system without a model."""
    return provenance_label(run.provenance) or "–"


def provenance_blocks(runs: Iterable[tuple[str, SystemRun]], level: int = 2) -> list[Block]:
    """The "Model provenance" section (a heading of ``level``, the intro, :func:`provenance_lines` as bullets, the
    systems in bold); ``[]`` when no run has a provenance note."""
    lines = provenance_lines(runs)
    if not lines:
        return []
    bullets = tuple((Span(who, bold=True), Span(f": {note}")) for who, note in lines)
    return [Heading(PROVENANCE_HEADING, level), Paragraph((Span(PROVENANCE_INTRO),)), BulletList(bullets)]


def provenance_lines(runs: Iterable[tuple[str, SystemRun]]) -> list[tuple[str, str]]:
    """``(who, note)`` per distinct provenance note of ``runs`` (``(where, run)`` pairs, ``where`` a task name or
    ``""``), first appearance first; ``who`` names the systems and, when given, the tasks."""
    systems: dict[str, list[str]] = {}
    places: dict[str, list[str]] = {}
    for where, run in runs:
        if run.provenance_note is None:
            continue
        systems.setdefault(run.provenance_note, [])
        places.setdefault(run.provenance_note, [])
        if run.system not in systems[run.provenance_note]:
            systems[run.provenance_note].append(run.system)
        if where and where not in places[run.provenance_note]:
            places[run.provenance_note].append(where)
    lines = []
    for note, names in systems.items():
        on = f" (on {', '.join(places[note])})" if places[note] else ""
        lines.append((", ".join(names) + on, note))
    return lines
