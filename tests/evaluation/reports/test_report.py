"""Reports: records layout, Markdown / HTML / results.json agreement, escaping, plots, JSON round trip."""

from __future__ import annotations

import io
import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from evaluation.metrics.stats import adjust_family
from evaluation.reports import plots
from evaluation.reports.formatting import format_metric
from evaluation.reports.html import render_html
from evaluation.reports.markdown import markdown_escape, render_markdown
from evaluation.reports.overall import overall_document
from evaluation.reports.publish import dagster_markdown_overall, dagster_markdown_task, write_reports
from evaluation.reports.task import task_document
from evaluation.results import (
    ChunkSizePoint,
    Comparison,
    PositionPoint,
    ScalingPoint,
    Summary,
    SystemRun,
    TaskEvaluation,
    from_json,
    results_records,
    to_json,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
METRICS = [f"{m}@{k}" for m in ("ndcg", "map", "recall", "p") for k in (1, 5, 10, 50, 100)] + ["mrr@10"]
EVIL_SYSTEM = "evil<script>alert('s')</script>|x"
EVIL_REASON = "needs <script>alert('r')</script> | a pipe"
RECORD_KEYS = {"task", "system", "metric", "value", "ci_low", "ci_high", "n_queries", "n_documents", "subset"}
NEEDS_CONTEXT_N = 30  # task 1 ("squad-ctx") is labelled; task 2 ("football") is not
NEEDS_CONTEXT_DOCUMENTS = 12
SUBSET = "needs_context"


def documents_of(n: int) -> int:
    """The documents ``n`` queries come from in these fixtures (40 for every query, as the task counts)."""
    return {NEEDS_CONTEXT_N: NEEDS_CONTEXT_DOCUMENTS}.get(n, min(40, n))


def _summary(rng: np.random.Generator, n: int) -> Summary:
    value = float(rng.uniform(0.2, 0.9))
    low, high = value - float(rng.uniform(0.01, 0.05)), value + float(rng.uniform(0.01, 0.05))
    return Summary(value, low, high, n, documents_of(n))


def comparison(task: str, a: str, b: str, means: tuple[float, float], p: float, n: int, **extra) -> Comparison:
    """A paired comparison as the runner writes it: document-level p, interval, query-level p, detectable
    difference; ``p_adjusted`` is set by :func:`adjust_family` over the task's comparisons."""
    difference = round(means[0] - means[1], 6)
    return Comparison(
        task, a, b, "ndcg@10", *means, difference, p, n, "randomization", 10000, n_documents=documents_of(n),
        p_query=p / 10, ci_low=difference - 0.02, ci_high=difference + 0.02, mdd=0.031, **extra,
    )  # fmt: skip


def _run(rng: np.random.Generator, task: str, system: str, kind: str, n_queries: int, **extra) -> SystemRun:
    return SystemRun(
        task=task,
        system=system,
        kind=kind,
        status="ok",
        description=f"{kind} baseline",
        metrics={m: _summary(rng, n_queries) for m in METRICS},
        document_ndcg10=_summary(rng, n_queries),
        by_position=[
            PositionPoint(p, v.value, v.ci_low, v.ci_high, n, documents_of(n))
            for p, n in enumerate((40, 30, 20, 10))
            for v in [_summary(rng, n)]
        ],
        scaling=[
            ScalingPoint(n, float(rng.uniform(0.3, 0.9)), float(rng.uniform(0.0, 0.05)), 5, n * 2.5)
            for n in (1, 4, 16, 40)
        ],
        index_seconds=float(rng.uniform(1, 10)),
        documents_per_second=float(rng.uniform(10, 100)),
        query_seconds=float(rng.uniform(0.1, 1)),
        **extra,
    )


def _with_subset(rng: np.random.Generator, run: SystemRun) -> SystemRun:
    run.subset_metrics = {"needs_context": {m: _summary(rng, NEEDS_CONTEXT_N) for m in METRICS}}
    return run


def make_evaluations() -> list[TaskEvaluation]:
    """Two tasks; 4 ok systems + insent not run + an evil name on task 1; contextual failed on task 2."""
    rng = np.random.default_rng(7)
    evaluations = []
    for t, task in enumerate(("squad-ctx", "football")):
        n = 100 + 20 * t
        runs = [
            _run(rng, task, "bm25", "bm25", n),
            _run(rng, task, "independent", "dense", n),
            _run(rng, task, "late-chunking", "dense", n),
        ]
        if t == 0:
            runs.append(_run(rng, task, "contextual", "contextual", n, llm_tokens=123_456, llm_usd=0.0421))
            runs.append(SystemRun(task, "insent", "dense", "not_run", reason="training asset insent_model missing"))
            runs.append(SystemRun(task, EVIL_SYSTEM, "dense", "not_run", reason=EVIL_REASON))
        else:
            runs.append(
                SystemRun(task, "contextual", "contextual", "failed", reason="RuntimeError: no contexts\nline 2")
            )
        runs[0].metrics["ndcg@10"].ci_low = float("nan")  # NaN must come out as null
        if t == 0:
            runs = [_with_subset(rng, r) if r.status == "ok" else r for r in runs]
        comparisons = [
            comparison(task, "late-chunking", "independent", (0.71, 0.65), 0.0004, n),
            comparison(task, "independent", "bm25", (0.65, 0.64), 0.4321, n),
        ]
        chunk_sizes = [
            ChunkSizePoint(task, system, size, v, v - 0.02, v + 0.02, n, 1000 // size + 5, documents_of(n))
            for system in ("bm25", "independent", "late-chunking")
            for size in (8000, 1000, 300, 100)
            for v in [float(rng.uniform(0.3, 0.9))]
        ]
        evaluations.append(
            TaskEvaluation(
                task=task,
                source=f"/data/conteb/{task}",
                split="test",
                n_documents=40,
                n_chunks=200 + t,
                n_queries=n,
                runs=runs,
                comparisons=comparisons,
                chunk_sizes=chunk_sizes if t == 0 else [],
                chunk_size_note=None if t == 0 else "no span annotations: the chunk-size study needs them",
                notes=["a note with *stars* and a | pipe"],
                created_at="2025-01-01T00:00:00+00:00",
                n_needs_context=NEEDS_CONTEXT_N if t == 0 else None,
                subset_comparisons=[
                    comparison(task, "late-chunking", "independent", (0.61, 0.5), 0.002, NEEDS_CONTEXT_N, subset=SUBSET)
                ]
                if t == 0
                else [],
            )
        )
        adjust_family(evaluations[-1].comparisons + evaluations[-1].subset_comparisons)  # as the runner does
    return evaluations


@pytest.fixture(scope="module")
def evaluations() -> list[TaskEvaluation]:
    return make_evaluations()


@pytest.fixture(scope="module")
def written(evaluations: list[TaskEvaluation], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_reports(evaluations, tmp_path_factory.mktemp("reports"))


# --------------------------------------------------------------------------------------------- helpers


class _Tables(HTMLParser):
    """Every <table> of a page: id -> rows of (cell text, bold)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[tuple[str, bool]]]] = {}
        self._table: list[list[tuple[str, bool]]] | None = None
        self._cell: list[str] | None = None
        self._bold = False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._table = self.tables.setdefault(dict(attrs)["id"], [])
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell, self._bold = [], False
        elif tag == "strong" and self._cell is not None:
            self._bold = True

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self._table[-1].append(("".join(self._cell).strip(), self._bold))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def html_tables(html: str) -> dict[str, list[list[tuple[str, bool]]]]:
    parser = _Tables()
    parser.feed(html)
    return parser.tables


def markdown_table(markdown: str, heading: str) -> list[list[str]]:
    """The first table after ``## heading``: rows of raw cell text (header first, separator dropped)."""
    section = markdown.split(f"\n## {heading}\n", 1)[1]
    lines = next(part.strip() for part in section.split("\n\n") if part.strip().startswith("|")).splitlines()
    rows = [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]
    return [rows[0], *rows[2:]]


def headline(cell: str) -> str:
    return re.search(r"\d\.\d{3}", cell).group(0)


# --------------------------------------------------------------------------------------------- tests


def test_json_round_trip(evaluations: list[TaskEvaluation]) -> None:
    for evaluation in evaluations:
        text = to_json(evaluation)
        again = from_json(text)
        assert to_json(again) == text
        assert math.isnan(again.runs[0].metrics["ndcg@10"].ci_low)
        assert again.run("contextual").llm_usd == evaluation.run("contextual").llm_usd


def test_write_reports_creates_every_file(written: dict[str, Path]) -> None:
    per_task = ("report.md", "report.html", "positions.png", "scaling.png")
    expected = {
        *("results.json", "report.json", "report.md", "report.html", "overview.png", "chunk_sizes.png"),
        *(f"tasks/{t}/{f}" for t in ("squad-ctx", "football") for f in per_task),
        "tasks/squad-ctx/chunk_sizes.png",  # only the task with chunk-size points has its own plot
    }
    assert set(written) == expected
    root = written["report.md"].parent
    for name, path in written.items():
        assert path == root / name and path.is_file() and path.stat().st_size > 0
    assert not list(root.rglob("*.tmp"))
    full = json.loads(written["report.json"].read_text())
    assert [e["task"] for e in full] == ["squad-ctx", "football"]
    assert to_json(from_json(json.dumps(full[0]))) == to_json(make_evaluations()[0])


def test_pngs_are_valid(written: dict[str, Path]) -> None:
    from matplotlib.image import imread

    for name, path in written.items():
        if name.endswith(".png"):
            data = path.read_bytes()
            assert data.startswith(PNG_SIGNATURE), name
            image = imread(io.BytesIO(data), format="png")
            assert image.ndim == 3 and image.shape[0] > 50 and image.shape[1] > 50


def test_results_records(written: dict[str, Path], evaluations: list[TaskEvaluation]) -> None:
    records = json.loads(written["results.json"].read_text())
    assert records == results_records(evaluations)
    assert all(set(r) == RECORD_KEYS for r in records)
    systems = {(r["task"], r["system"]) for r in records}
    assert ("squad-ctx", "insent") not in systems and ("football", "contextual") not in systems
    by_key = {(r["task"], r["system"], r["metric"]): r for r in records if r["subset"] == "all"}
    for task in ("squad-ctx", "football"):
        for system in ("bm25", "independent", "late-chunking"):
            for metric in [*METRICS, "doc_ndcg@10", "ndcg@10@position=0", "ndcg@10@n_docs=16", "index_seconds"]:
                assert (task, system, metric) in by_key, (task, system, metric)
    assert by_key[("squad-ctx", "bm25", "ndcg@10")]["ci_low"] is None  # NaN -> null
    assert by_key[("squad-ctx", "contextual", "llm_usd")]["value"] == 0.0421
    tokens = by_key[("squad-ctx", "contextual", "llm_tokens")]
    assert tokens["value"] == 123_456 and tokens["ci_low"] is None and tokens["n_queries"] is None
    scaling = by_key[("squad-ctx", "bm25", "ndcg@10@n_docs=16")]
    point = evaluations[0].run("bm25").scaling[2]
    assert scaling["ci_low"] == pytest.approx(point.value - point.std) and scaling["n_queries"] == 40.0
    assert ("squad-ctx", "late-chunking", "ndcg@10@chunk_size=300") in by_key
    assert not any(r["metric"].startswith("ndcg@10@chunk_size") for r in records if r["task"] == "football")


def test_numbers_agree_across_markdown_html_json(written: dict[str, Path]) -> None:
    records = json.loads(written["results.json"].read_text())
    headlines = [r for r in records if r["metric"] == "ndcg@10" and r["subset"] == "all"]
    expected = {(r["task"], r["system"]): f"{round(r['value'], 3):.3f}" for r in headlines}
    assert all(format_metric(r["value"]) == expected[(r["task"], r["system"])] for r in headlines)

    md = markdown_table(written["report.md"].read_text(), "nDCG@10")
    html = html_tables(written["report.html"].read_text())["results"]
    assert md[0][:3] == ["System", "squad-ctx", "football"] and [c for c, _ in html[0]][:3] == md[0][:3]
    md_rows = {row[0]: row for row in md[1:]}
    html_rows = {row[0][0]: row for row in html[1:]}
    checked = 0
    for (task, system), value in expected.items():
        column = 1 + ["squad-ctx", "football"].index(task)
        assert headline(md_rows[system][column]) == value
        assert headline(html_rows[system][column][0]) == value
        checked += 1
    assert checked == 7

    # Best per task in bold, in both formats; mean column present.
    for task, column in (("squad-ctx", 1), ("football", 2)):
        best = max((v for (t, _), v in expected.items() if t == task), key=float)
        bold_md = [s for s, row in md_rows.items() if row[column].startswith("**")]
        bold_html = [s for s, row in html_rows.items() if row[column][1]]
        assert bold_md == bold_html == [s for (t, s), v in expected.items() if t == task and v == best]
    assert html_rows["contextual"][2][0] == "failed" and md_rows["contextual"][2] == "failed"
    tasks_column = [c for c, _ in html[0]].index("Tasks")
    assert html_rows["bm25"][tasks_column][0] == "2/2" and html_rows["contextual"][tasks_column][0] == "1/2"
    assert html_rows["contextual"][-1][0] == "failed: RuntimeError: no contexts line 2 (on football)"

    # The per-task reports show the same headline numbers.
    for task in ("squad-ctx", "football"):
        task_md = markdown_table(written[f"tasks/{task}/report.md"].read_text(), "Systems")
        task_html = html_tables(written[f"tasks/{task}/report.html"].read_text())["systems"]
        for row_md, row_html in zip(task_md[1:], task_html[1:], strict=True):
            if (task, row_html[0][0]) in expected:
                assert headline(row_md[3]) == headline(row_html[3][0]) == expected[(task, row_html[0][0])]


def test_reasons_pvalues_and_sections(written: dict[str, Path]) -> None:
    md = written["report.md"].read_text()
    html = written["report.html"].read_text()
    for page in (md, html):
        assert "training asset insent" in page and "RuntimeError: no contexts line 2" in page
        assert "4.0e-04" in page and "0.432" in page  # p-values
        assert "insent vs late-chunking: not tested (insent not run)" in page
        assert "tasks/squad-ctx/report." in page
    assert "![nDCG@10 per task and system](overview.png)" in md and "(chunk_sizes.png)" in md
    for figure in ("overview", "chunk-sizes-figure"):  # inline SVG in the page: its labels are text
        assert re.search(rf'<figure id="{figure}"><div class="svg"><svg\b', html)
    assert "<img" not in html.split('id="overview"')[1].split("</figure>")[0]
    comparisons = html_tables(html)["comparisons"]
    header = [cell for cell, _ in comparisons[0]]
    verdict = header.index("Verdict (adjusted p < 0.05)")
    significant = {(row[1][0], row[2][0]): row[verdict] for row in comparisons[1:]}
    assert significant[("late-chunking", "independent")] == ("significantly better", True)
    assert significant[("independent", "bm25")] == ("no measurable difference", False)
    assert comparisons[1][1][0] == "late-chunking"  # the key comparison first

    task_md = written["tasks/squad-ctx/report.md"].read_text()
    task_html = written["tasks/squad-ctx/report.html"].read_text()
    for page in (task_md, task_html):
        assert "123,456" in page and "0.0421" in page  # LLM tokens and dollars
        for section in ("All metrics", "Comparisons", "by gold-chunk position", "corpus size", "Chunk-size"):
            assert section in page
    tables = html_tables(task_html)
    assert len(tables["metrics"]) == 1 + len(METRICS)
    assert [row[1][0] for row in tables["positions"][1:]] == ["40 (40)", "30 (12)", "20 (20)", "10 (10)"]  # support
    assert [row[0][0] for row in tables["chunk-sizes"][1:]] == ["8,000", "1,000", "300", "100"]
    assert "over the same 100 queries of 40 documents at every size." in task_md  # the same at each size: said once
    assert 'src="positions.png"' in task_html and 'src="chunk_sizes.png"' in task_html
    football = written["tasks/football/report.md"].read_text()
    assert "no span annotations" in football and "chunk_sizes.png" not in football


def test_user_text_is_escaped(written: dict[str, Path], evaluations: list[TaskEvaluation]) -> None:
    for name in ("report.html", "tasks/squad-ctx/report.html"):
        html = written[name].read_text()
        assert "<script" not in html
        assert "&lt;script&gt;alert(&#39;r&#39;)&lt;/script&gt;" in html
        assert "evil&lt;script&gt;" in html
    md = written["report.md"].read_text()
    assert "\\<script\\>" in md and "<script>" not in md
    md_rows = {row[0]: row for row in markdown_table(md, "nDCG@10")[1:]}
    assert len(md_rows[markdown_escape(EVIL_SYSTEM)]) == len(md_rows["bm25"])  # the pipe did not split the row
    html_page = render_html(task_document(evaluations[0], {"positions": 'x.png" onerror="alert(1)'}))
    assert 'onerror="alert' not in html_page


def test_same_renderer_for_paths_and_data_uris(evaluations: list[TaskEvaluation]) -> None:
    images = {"overview": "overview.png"}
    assert render_markdown(overall_document(evaluations, images)).count("](overview.png)") == 1
    assert 'src="overview.png"' in render_html(overall_document(evaluations, images))
    assert "positions.png" in render_markdown(task_document(evaluations[0], {"positions": "positions.png"}))

    overall = dagster_markdown_overall(evaluations)
    task = dagster_markdown_task(evaluations[0])
    for markdown, count in ((overall, 2 + 2 * len(evaluations)), (task, 3)):  # + positions, scaling per task
        uris = re.findall(r"\]\((data:image/png;base64,[A-Za-z0-9+/=]+)\)", markdown)
        assert len(uris) == count
        assert len(markdown.encode()) < 1_000_000
    without_images = render_markdown(overall_document(evaluations, {}))
    assert overall.split("## Key comparisons")[0] == without_images.split("## Key comparisons")[0]


def test_plots_edge_cases(evaluations: list[TaskEvaluation]) -> None:
    assert plots.plot_chunk_sizes([evaluations[1]]) is None
    empty = TaskEvaluation("empty", "x", "test", 0, 0, 0)
    for data in (plots.plot_overview([empty]), plots.plot_positions(empty), plots.plot_scaling(empty)):
        assert data.startswith(PNG_SIGNATURE)
    markdown = render_markdown(overall_document([empty], {}))
    assert "No chunk-size study ran." in markdown


def test_needs_context_subset_in_records_and_reports(written: dict[str, Path], evaluations: list[TaskEvaluation]):
    records = json.loads(written["results.json"].read_text())
    subset = {(r["task"], r["system"], r["metric"]): r for r in records if r["subset"] == "needs_context"}
    assert {r["subset"] for r in records} == {"all", "needs_context"}
    assert {task for task, _, _ in subset} == {"squad-ctx"}  # the unlabelled task has no subset records
    assert {(s, m) for _, s, m in subset} == {
        (s, m) for s in ("bm25", "independent", "late-chunking", "contextual") for m in METRICS
    }
    late = evaluations[0].run("late-chunking").subset_metrics["needs_context"]["ndcg@10"]
    record = subset[("squad-ctx", "late-chunking", "ndcg@10")]
    assert (record["value"], record["ci_low"], record["n_queries"]) == (late.value, late.ci_low, NEEDS_CONTEXT_N)
    assert record["n_documents"] == NEEDS_CONTEXT_DOCUMENTS

    task_md = written["tasks/squad-ctx/report.md"].read_text()
    task_html = written["tasks/squad-ctx/report.html"].read_text()
    md = markdown_table(task_md, "Queries that need context")
    html = html_tables(task_html)["needs-context"]
    assert md[0][0] == "System" and "need context" in md[0][2]
    md_rows, html_rows = {r[0]: r for r in md[1:]}, {r[0][0]: r for r in html[1:]}
    for system in ("bm25", "independent", "late-chunking", "contextual"):
        run = evaluations[0].run(system)
        value = format_metric(run.subset_metrics["needs_context"]["ndcg@10"].value)
        assert headline(md_rows[system][2]) == headline(html_rows[system][2][0]) == value
        delta = run.subset_metrics["needs_context"]["ndcg@10"].value - run.metrics["ndcg@10"].value
        assert md_rows[system][3] == f"{delta:+.3f}"
    assert len(html_tables(task_html)["needs-context-metrics"]) == 1 + len(METRICS)
    [row] = html_tables(task_html)["needs-context-comparisons"][1:]
    # p Holm-adjusted over the task's 3 comparisons (2 x 0.002), then unadjusted; queries with their documents
    assert row[0][0] == "late-chunking" and row[3][0] == "0.610 / 0.500"
    assert row[5] == ("0.004", True) and row[6][0] == "0.002"
    assert row[7][0] == f"{NEEDS_CONTEXT_N} ({NEEDS_CONTEXT_DOCUMENTS})"
    counts = html_tables(task_html)["counts"]
    assert counts[0][-1][0] == "Queries that need context" and counts[1][-1][0] == "30"

    football = written["tasks/football/report.md"].read_text()
    assert "no context-necessity labels" in football and "| unlabelled |" in football
    overall_html = html_tables(written["report.html"].read_text())["needs-context"]
    assert [c for c, _ in overall_html[0]][:2] == ["System", "squad-ctx (30 queries of 12 documents)"]
    assert "Unlabelled (subset not reported): football" in written["report.md"].read_text()


def test_reports_open_with_their_reading(written: dict[str, Path], evaluations: list[TaskEvaluation]) -> None:
    for name in ("report.md", "tasks/squad-ctx/report.md"):
        md = written[name].read_text()
        assert md.split("\n## ", 2)[1].startswith("Reading\n")  # the first section
    task_md = written["tasks/squad-ctx/report.md"].read_text()
    best = max((r for r in evaluations[0].runs if r.status == "ok"), key=lambda r: r.metrics["ndcg@10"].value)
    # "Best system" only when the report's paired test finds it (evaluation/reports/reading.py), else "Highest"
    figures = f"{markdown_escape(best.system)}, nDCG@10 {format_metric(best.metrics['ndcg@10'].value)}"
    assert f"Best system: {figures}" in task_md or f"Highest nDCG@10: {figures}" in task_md
    assert "30 of 100 queries (30%) need context" in task_md
    assert "<h2>Reading</h2>" in written["tasks/squad-ctx/report.html"].read_text().replace(' id="reading"', "")


def test_the_reading_has_one_comparison_per_row(written: dict[str, Path]) -> None:
    """The reading's paired comparisons: one row each in a small table under its group's heading, every figure kept
    (difference, p-value, queries, verdict), the same in Markdown and HTML; the task's subset in a group of its own."""
    md = written["tasks/squad-ctx/report.md"].read_text()
    reading = md.split("\n## Reading\n", 1)[1].split("\n## ", 1)[0]
    assert "### Other pairs" in reading and "### On the queries that need context" in reading
    rows = [line for line in reading.splitlines() if line.startswith("| independent vs bm25")]
    assert rows == [
        "| independent vs bm25 | +0.010 [-0.010, +0.030] | 0.432 | 100 (40) | ±0.031 | no measurable difference |"
    ]
    html = html_tables(written["tasks/squad-ctx/report.html"].read_text())
    assert html["reading-comparisons-1"] == [
        [("Comparison", False), ("Δ nDCG@10 (A − B) [95% CI over documents]", False), ("p (Holm-adjusted)", False),
         ("Queries (documents)", False), ("Detectable Δ (80% power)", False), ("Verdict (adjusted p < 0.05)", False)],
        [("late-chunking vs independent", False), ("+0.060 [+0.040, +0.080]", False), ("0.001", True),
         ("100 (40)", False), ("±0.031", False), ("significantly better", True)],
        [("independent vs bm25", False), ("+0.010 [-0.010, +0.030]", False), ("0.432", False), ("100 (40)", False),
         ("±0.031", False), ("no measurable difference", False)],
    ]  # fmt: skip
    assert html["reading-comparisons-2"][1] == [
        ("late-chunking vs independent", False), ("+0.110 [+0.090, +0.130]", False), ("0.004", True),
        ("30 (12)", False), ("±0.031", False), ("significantly better", True)
    ]  # fmt: skip
    overall = html_tables(written["report.html"].read_text())["reading-comparisons-1"]
    assert [row[0][0] for row in overall] == ["Task", "squad-ctx", "football", "squad-ctx", "football"]
    assert "reading-comparisons-2" not in html_tables(written["report.html"].read_text())  # subsets: per task
