"""The evaluation report as a reader sees it: report.html written by the real writer (``write_reports``) from
results in the real schema, opened in Debian's headless Chromium at 1400 × 1000.

A reader names every point of the overview at a glance: every system's name is text on the overview's axis, in the
order of its score (best on top, the systems that did not run at the bottom), the best cheap baseline's name bold.
The results table lists systems best first, those that did not run last with why in the same row. No table makes
the page scroll sideways. Screenshots of the overview, the chunk-size figure, the corpus-size figure and the widest
table go to ``$CONTEB_SCREENSHOTS`` when it is set.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluation.metrics.stats import adjust_family
from evaluation.reports.publish import write_reports
from evaluation.results import (
    BEST_BASELINE,
    ChunkSizePoint,
    Comparison,
    PositionPoint,
    ScalingPoint,
    Summary,
    SystemRun,
    TaskEvaluation,
)
from tests.support.browser import open_page, require_browser, screenshot

require_browser()

TASKS = ("squad-ctx", "football")
BASELINE = "bm25-title"
# name -> (kind, details): the registry's default systems as the runner records them
SYSTEMS: dict[str, tuple[str, dict[str, Any]]] = {
    "bm25": ("bm25", {"context": "independent"}),
    "bm25-subword": ("bm25", {"context": "independent"}),
    "bm25-title": ("bm25", {"context": "title"}),
    "independent": ("dense", {"context": "independent", "trained": None}),
    "title-prefix": ("dense", {"context": "title", "trained": None}),
    "late-chunking": ("dense", {"context": "late", "trained": None}),
    "late-chunking-anchored": ("dense", {"context": "late", "trained": None}),
    "late-chunking-title": ("dense", {"context": "late", "trained": None}),
    "late-chunking-anchored-title": ("dense", {"context": "late", "trained": None}),
    "insent": ("dense", {"context": "late", "trained": "insent_model"}),
    "finetune-control": ("dense", {"context": "independent", "trained": "finetune_control_model"}),
    "hybrid": ("hybrid", {}),
    "hybrid-title": ("hybrid", {}),
}
NOT_RUN = {"contextual": "no LLM endpoint: set llm.base_url in conteb.yaml"}


def _summary(value: float, n: int) -> Summary:
    return Summary(value, value - 0.04, value + 0.04, n, 40)


def _evaluations() -> list[TaskEvaluation]:
    rng = np.random.default_rng(28)
    evaluations = []
    for task in TASKS:
        runs, chunk_sizes = [], []
        for system, (kind, details) in SYSTEMS.items():
            value = float(rng.uniform(0.35, 0.85))
            runs.append(
                SystemRun(
                    task, system, kind, "ok", description=f"{kind}, {details.get('context', 'fused')}",
                    metrics={"ndcg@10": _summary(value, 200)}, document_ndcg10=_summary(value + 0.05, 200),
                    by_position=[PositionPoint(p, value - 0.03 * p, value - 0.03 * p - 0.05, value - 0.03 * p + 0.05,
                                               50, 40 - 5 * p) for p in range(5)],
                    scaling=[ScalingPoint(n, value + 0.1 / n, 0.02, 5, n * 5.0) for n in (1, 4, 16, 40)],
                    index_seconds=2.0, documents_per_second=20.0, query_seconds=0.4, details=dict(details),
                )
            )  # fmt: skip
            chunk_sizes += [
                ChunkSizePoint(task, system, size, value - 0.02 * i, value - 0.02 * i - 0.04, value - 0.02 * i + 0.04,
                               200, 8000 // size, 40)
                for i, size in enumerate((2000, 1000, 500, 250))
            ]  # fmt: skip
        runs += [SystemRun(task, name, "contextual", "not_run", reason=why) for name, why in NOT_RUN.items()]
        values = {r.system: r.metrics["ndcg@10"].value for r in runs if r.status == "ok"}
        baselines = {name: values[name] for name in ("bm25", "bm25-subword", BASELINE, "independent", "title-prefix")}
        comparisons = [  # as the runner writes them: over 40 documents, the floor of 10,000 sign vectors for some
            Comparison(task, name, BASELINE, "ndcg@10", values[name], values[BASELINE],
                       values[name] - values[BASELINE], 1 / 10_001 if i % 3 == 0 else 0.0123, 200, "randomization",
                       10_000, plan=BEST_BASELINE, baselines=baselines, n_documents=40,
                       ci_low=values[name] - values[BASELINE] - 0.051, ci_high=values[name] - values[BASELINE] + 0.049,
                       mdd=0.0712, p_query=1 / 10_001)
            for i, name in enumerate(n for n in values if n not in baselines)
        ]  # fmt: skip
        adjust_family(comparisons)
        evaluations.append(
            TaskEvaluation(task, f"/data/conteb/{task}", "test", 40, 320, 200, runs=runs, comparisons=comparisons,
                           chunk_sizes=chunk_sizes)
        )  # fmt: skip
    return evaluations


def _expected_order(evaluations: list[TaskEvaluation]) -> list[str]:
    """Systems by mean nDCG@10 over the tasks, best first; those that ran nowhere last (computed here, on its own)."""
    means = {
        system: float(np.mean([e.run(system).metrics["ndcg@10"].value for e in evaluations])) for system in SYSTEMS
    }
    return sorted(SYSTEMS, key=lambda s: -means[s]) + list(NOT_RUN)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reports = tmp_path_factory.mktemp("reports")
    write_reports(_evaluations(), reports)
    return reports


@pytest.fixture(scope="module")
def page(report: Path) -> Iterator[Any]:
    with open_page(1400, 1000) as page:
        page.goto((report / "report.html").as_uri())
        yield page


def _shot(page: Any, selector: str, name: str) -> None:
    """The element ``selector`` as ``$CONTEB_SCREENSHOTS/name`` when that variable is set."""
    folder = os.environ.get("CONTEB_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.locator(selector).first.screenshot(path=str(Path(folder) / name))


def test_every_system_is_named_on_the_overview_axis_in_score_order(page: Any) -> None:
    labels = page.evaluate(
        """() => [...document.querySelectorAll('#overview svg g[id^="ytick"] text')]
            .filter(t => t.getBoundingClientRect().height > 0)
            .map(t => ({name: t.textContent.trim(), top: t.getBoundingClientRect().top,
                        weight: getComputedStyle(t).fontWeight}))"""
    )
    on_axis = [label["name"] for label in sorted(labels, key=lambda label: label["top"])]
    assert on_axis == _expected_order(_evaluations())  # every name, as text, best on top, not run at the bottom
    weights = {label["name"]: int(label["weight"]) for label in labels}
    assert weights[BASELINE] >= 600 and weights["insent"] < 600  # the best cheap baseline marked
    texts = page.evaluate("() => [...document.querySelectorAll('#overview svg text')].map(t => t.textContent.trim())")
    assert f"best cheap baseline: {BASELINE}" in texts
    families = {"lexical", "dense", "contextual", "trained", "fusion"}
    assert families <= set(texts)  # the legend: the families
    assert not set(texts) & {"independent (dense)"}
    _shot(page, "#overview", "report-overview.png")


def test_results_table_is_best_first_with_not_run_last_and_why(page: Any) -> None:
    rows = page.evaluate(
        "() => [...document.querySelectorAll('#results tbody tr')].map(r => [...r.cells].map(c => c.innerText))"
    )
    assert [row[0] for row in rows] == _expected_order(_evaluations())
    header = page.evaluate("() => [...document.querySelectorAll('#results thead th')].map(c => c.innerText)")
    assert header[-1] == "Not run: why"
    assert rows[-1][-1].startswith("not run: no LLM endpoint") and rows[0][-1] == "—"


def test_no_table_scrolls_sideways_at_1400_px(page: Any, report: Path) -> None:
    measure = """() => ({page: document.scrollingElement.scrollWidth, view: window.innerWidth,
        tables: [...document.querySelectorAll('table')].filter(t => t.scrollWidth > t.parentElement.clientWidth)
            .map(t => t.id + ' ' + t.scrollWidth + '>' + t.parentElement.clientWidth)})"""
    overall = page.evaluate(measure)
    assert overall["tables"] == [] and overall["page"] <= overall["view"], overall
    _shot(page, "#baseline-comparisons", "report-baseline-table.png")
    _shot(page, "#chunk-sizes-figure", "report-chunk-sizes.png")
    _shot(page, f"#scaling-{TASKS[0]}", "report-corpus-size.png")
    task_page = page.context.new_page()
    task_page.goto((report / "tasks" / TASKS[0] / "report.html").as_uri())
    task = task_page.evaluate(measure)
    assert task["tables"] == [] and task["page"] <= task["view"], task
    systems = task_page.evaluate(
        "() => [...document.querySelectorAll('#systems tbody tr')].map(r => [...r.cells].map(c => c.innerText))"
    )
    assert systems[-1][0] == "contextual" and "no LLM endpoint" in systems[-1][-2]  # the reason in its row
    screenshot(task_page, "report-task.png")
    task_page.close()
