"""evaluation.reports.paper: verdicts, paired effects on hand-built per-query values, the chunk-size effect, the
summary."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from evaluation.reports.paper import (
    PAPER,
    PAPER_EFFECTS,
    RELEASE_POST,
    PaperEffect,
    authors_figure,
    compare_with_paper,
    paired_effect,
    retention,
    verdict_of,
)
from evaluation.reports.reproduce import effect_marks, reproduce_document
from evaluation.results import ChunkSizePoint, Summary, SystemRun, TaskEvaluation


def documents(n: int, per_document: int = 5) -> dict[str, str]:
    """``q<i>`` -> its document: ``per_document`` queries each."""
    return {f"q{i}": f"d{i // per_document}" for i in range(n)}


EFFECT = PaperEffect("late_chunking", "late chunking beats independent chunks", "late", "indep", 9.0, RELEASE_POST)


def test_verdicts():
    assert verdict_of(5.0, 0.001) == "reproduces"
    assert verdict_of(-5.0, 0.001) == "opposite"
    assert verdict_of(5.0, 0.2) == "inconclusive"
    assert verdict_of(0.0, 0.0) == "inconclusive"
    assert verdict_of(3.0, float("nan")) == "inconclusive"


def _values(n: int, a: float, b: float) -> dict[str, dict[str, float]]:
    return {"late": {f"q{i}": a for i in range(n)}, "indep": {f"q{i}": b for i in range(n)}}


def test_paired_effect_points_ci_and_p():
    rng = np.random.default_rng(0)
    ids = [f"q{i}" for i in range(400)]
    late = {q: float(v) for q, v in zip(ids, rng.random(400), strict=True)}
    indep = {q: late[q] - 0.1 for q in ids}  # exactly 10 points better on every query
    result = paired_effect(EFFECT, "all", {"late": late, "indep": indep}, ids, documents(400, 20), {}, resamples=2000)
    assert result.verdict == "reproduces"
    assert result.points == pytest.approx(10.0)
    assert result.ci_low == pytest.approx(10.0) and result.ci_high == pytest.approx(10.0)
    assert result.p_value < 0.01 and result.n_queries == 400
    assert result.mean_a - result.mean_b == pytest.approx(0.1)


def test_paired_effect_opposite_and_inconclusive():
    ids = [f"q{i}" for i in range(50)]
    worse = paired_effect(EFFECT, "all", _values(50, 0.2, 0.6), ids, documents(50), {}, resamples=500)
    assert worse.verdict == "opposite" and worse.points == pytest.approx(-40.0)
    # half the queries +1, half -1: no effect on average
    a = {q: float(i % 2) for i, q in enumerate(ids)}
    b = {q: 1.0 - a[q] for q in ids}
    tied = paired_effect(EFFECT, "all", {"late": a, "indep": b}, ids, documents(50), {}, resamples=500)
    assert tied.verdict == "inconclusive" and tied.points == pytest.approx(0.0)


def test_paired_effect_not_measured_names_why():
    result = paired_effect(
        EFFECT, "all", {"indep": {"q0": 1.0}}, ["q0"], documents(1), {"late": "not trained yet: no folder"}
    )
    assert result.verdict == "not measured" and "late: not trained yet" in result.reason
    empty = paired_effect(EFFECT, "needs_context", _values(3, 1, 0), [], {}, {})
    assert empty.verdict == "not measured" and "no queries" in empty.reason


def _point(system: str, size: int, value: float) -> ChunkSizePoint:
    return ChunkSizePoint("t", system, size, value, value, value, 10, 10)


def test_retention_flatter_and_steeper():
    points = [
        _point("independent", 1000, 0.8), _point("independent", 300, 0.6), _point("independent", 100, 0.4),
        _point("late-chunking", 1000, 0.6), _point("late-chunking", 100, 0.45),
        _point("insent", 1000, 0.9), _point("insent", 100, 0.3),
    ]  # fmt: skip
    results = {r.system: r for r in retention(points)}
    assert results["late-chunking"].retention == pytest.approx(0.75) and results["late-chunking"].verdict == "flatter"
    assert results["insent"].retention == pytest.approx(1 / 3) and results["insent"].verdict == "steeper"
    assert results["late-chunking"].independent_retention == pytest.approx(0.5)
    assert "late-chunking-anchored" not in results  # not studied: left out, not invented
    assert retention([_point("independent", 1000, 0.8)]) == []


def _evaluation() -> TaskEvaluation:
    runs = [
        SystemRun("t", name, "dense", "ok", metrics={"ndcg@10": Summary(0.5, 0.4, 0.6, 4)})
        for name in ("independent", "late-chunking", "insent", "finetune-control")
    ]
    runs.append(SystemRun("t", "insent-anchored", "dense", "not_run", reason="not trained yet"))
    return TaskEvaluation("t", "folder", "test", 2, 8, 4, runs=runs)


def test_compare_with_paper_subsets_and_summary():
    ids = ["q0", "q1", "q2", "q3"]
    per_query = {
        "independent": dict.fromkeys(ids, 0.5),
        "late-chunking": {"q0": 1.0, "q1": 1.0, "q2": 0.5, "q3": 0.5},  # better on the queries needing context
        "insent": dict.fromkeys(ids, 0.5),
        "finetune-control": dict.fromkeys(ids, 0.5),
    }
    labels = {"q0": True, "q1": True, "q2": False, "q3": False}
    comparison = compare_with_paper(_evaluation(), per_query, labels, documents(4, 1), resamples=200)
    assert comparison.subsets == {"all": 4, "needs_context": 2}
    by_key = {(r.effect, r.subset): r for r in comparison.effects}
    assert len(comparison.effects) == 2 * len(PAPER_EFFECTS)
    assert by_key[("late_chunking", "all")].points == pytest.approx(25.0)
    assert by_key[("late_chunking", "needs_context")].points == pytest.approx(50.0)
    assert by_key[("insent_anchored", "all")].verdict == "not measured"
    assert "not trained yet" in by_key[("insent_anchored", "all")].reason
    assert by_key[("late_chunking_anchored", "all")].reason == "late-chunking-anchored: not evaluated"
    first = comparison.summary[0]
    assert first.startswith("late chunking beats independent chunks") and "the release post reports +9.0" in first
    assert (
        "On the queries that need context: +50.0 points [+50.0, +50.0] over documents, adjusted p = 1.000, 2 queries "
        "of 2 documents; 2 documents: too few for any difference to reach p < 0.05 (inconclusive)." in first
    )
    assert comparison.documents == {"all": 4, "needs_context": 2}
    unlabelled = compare_with_paper(_evaluation(), per_query, None, documents(4, 1), resamples=200)
    assert unlabelled.subsets == {"all": 4} and all(r.subset == "all" for r in unlabelled.effects)
    assert not math.isnan(by_key[("late_chunking", "all")].p_value)


def test_each_figure_is_the_one_its_source_measured() -> None:
    """The paper: InSeNT +14.6 over untrained late chunking, InSeNT above the +Training control; the authors' release
    post: late chunking +9.0, late chunking + InSeNT +23.6; anchored windows: ours, no figure."""
    by_name = {e.name: e for e in PAPER_EFFECTS}
    assert (by_name["insent_vs_late"].paper_points, by_name["insent_vs_late"].source) == (14.6, PAPER)
    assert (by_name["insent_vs_control"].paper_points, by_name["insent_vs_control"].source) == (None, PAPER)
    assert (by_name["late_chunking"].paper_points, by_name["late_chunking"].source) == (9.0, RELEASE_POST)
    assert (by_name["insent"].paper_points, by_name["insent"].source) == (23.6, RELEASE_POST)
    anchored = [e for e in PAPER_EFFECTS if "anchored" in e.system_a or "anchored" in e.system_b]
    assert {e.name for e in anchored} == {"late_chunking_anchored", "insent_anchored", "insent_anchored_vs_control"}
    assert all(e.paper_points is None and e.source is None for e in anchored)
    with pytest.raises(ValueError, match="needs its source"):
        PaperEffect("x", "x beats y", "x", "y", 5.0, None)
    with pytest.raises(ValueError, match="unknown source"):
        PaperEffect("x", "x beats y", "x", "y", 5.0, "a blog")


def test_our_own_effects_get_gain_or_loss_not_reproduces() -> None:
    assert verdict_of(5.0, 0.001, authors_measured=False) == "gain"
    assert verdict_of(-5.0, 0.001, authors_measured=False) == "loss"
    assert verdict_of(5.0, 0.2, authors_measured=False) == "inconclusive"
    ids = [f"q{i}" for i in range(50)]
    values = {"anchored": dict.fromkeys(ids, 0.8), "indep": dict.fromkeys(ids, 0.5)}
    ours = PaperEffect("anchored", "anchored beats independent", "anchored", "indep", None, None)
    result = paired_effect(ours, "all", values, ids, documents(50), {}, resamples=200)
    assert result.verdict == "gain" and result.paper_source is None and authors_figure(result) == "—"
    theirs = paired_effect(
        EFFECT, "all", {"late": values["anchored"], "indep": values["indep"]}, ids, documents(50), {}, resamples=200
    )
    assert theirs.verdict == "reproduces" and authors_figure(theirs) == "+9.0 (release post)"


def test_the_report_and_its_plot_show_a_figure_only_beside_the_effect_its_source_measured() -> None:
    ids = ["q0", "q1", "q2", "q3"]
    systems = (
        "independent",
        "late-chunking",
        "late-chunking-anchored",
        "insent",
        "insent-anchored",
        "finetune-control",
    )
    per_query = {s: {q: 0.25 * (i + 1) * (0.5 + 0.1 * n) for i, q in enumerate(ids)} for n, s in enumerate(systems)}
    runs = [SystemRun("t", name, "dense", "ok", metrics={"ndcg@10": Summary(0.5, 0.4, 0.6, 4)}) for name in systems]
    evaluation = TaskEvaluation("t", "folder", "test", 2, 8, 4, runs=runs)
    comparison = compare_with_paper(evaluation, per_query, None, documents(4, 1), resamples=200)
    rows = {(r.effect, r.subset): r for r in comparison.effects}
    figures = {name: authors_figure(rows[(name, "all")]) for name in (e.name for e in PAPER_EFFECTS)}
    assert figures == {
        "late_chunking": "+9.0 (release post)",
        "late_chunking_anchored": "—",
        "insent": "+23.6 (release post)",
        "insent_anchored": "—",
        "insent_vs_control": "positive (paper)",
        "insent_anchored_vs_control": "—",
        "insent_vs_late": "+14.6 (paper)",
    }
    assert all(rows[(n, "all")].verdict in {"gain", "loss", "inconclusive"} for n in figures if figures[n] == "—")
    marks = {m.label.split("\n")[0]: m for m in effect_marks(comparison)}
    assert len(marks) == len(PAPER_EFFECTS)
    assert (
        marks["late-chunking − independent"].authors_points,
        marks["late-chunking − independent"].authors_source,
    ) == (
        9.0,
        RELEASE_POST,
    )
    assert (marks["insent − late-chunking"].authors_points, marks["insent − late-chunking"].authors_source) == (
        14.6,
        PAPER,
    )
    assert marks["insent − finetune-control"].authors_points is None  # a direction: nothing to plot
    for label, mark in marks.items():
        if "anchored" in label:
            assert mark.authors_points is None and mark.authors_source is None, label
    from evaluation.reports.markdown import render_markdown

    report = render_markdown(reproduce_document(comparison, evaluation, [], {}))
    table = [line for line in report.splitlines() if line.startswith("| late chunking")]
    assert any("| +9.0 (release post) |" in line for line in table)
    assert all("| — |" in line for line in table if "anchored" in line)
    assert (
        "4 queries of 4 documents; 4 documents: too few for any difference to reach p \\< 0.05; the authors measured "
        "no anchored windows)" in report
    )
    assert "the paper reports +14.6" in report and "the release post reports +23.6" in report


def test_an_effect_carried_by_one_document_is_inconclusive_over_documents() -> None:
    """+50 points on the 20 queries of one document, level on the 2 queries of each of 9 others: the query-level p
    is tiny, the document-level one is not, and the verdict reads the documents."""
    ids = [f"q{i}" for i in range(38)]
    where = {q: "d0" if i < 20 else f"d{1 + (i - 20) // 2}" for i, q in enumerate(ids)}
    late = {q: 0.9 if where[q] == "d0" else 0.4 + (0.01 if i % 2 else -0.01) for i, q in enumerate(ids)}
    result = paired_effect(EFFECT, "all", {"late": late, "indep": dict.fromkeys(ids, 0.4)}, ids, where, {})
    assert (result.n_queries, result.n_documents) == (38, 10)
    assert result.p_query is not None and result.p_query < 0.001
    assert result.p_value is not None and result.p_value > 0.4 and result.verdict == "inconclusive"
    assert result.mdd_points is not None and result.mdd_points > 10  # one document: a wide resolution, said so
    assert "this test set detects differences of ±" in result.detectable()


def test_holm_over_the_effect_table_changes_a_verdict() -> None:
    """Late chunking above independent chunks in each of 6 documents: exact sign-flip p = 2 / 64 < 0.05 alone, but
    one of the task's 4 measured effects: adjusted 4 x 2 / 64 = 0.125, inconclusive."""
    ids = [f"q{i}" for i in range(12)]
    where = documents(12, 2)
    values = {q: 0.5 for q in ids}
    per_query = {
        "independent": values,
        "late-chunking": {q: 0.6 + 0.01 * i for i, q in enumerate(ids)},
        "insent": values,
        "finetune-control": values,
    }
    alone = paired_effect(PAPER_EFFECTS[0], "all", per_query, ids, where, {})
    assert alone.p_value == pytest.approx(2 / 64) and alone.verdict == "reproduces"
    comparison = compare_with_paper(_evaluation(), per_query, None, where)
    late = next(r for r in comparison.effects if r.effect == "late_chunking")
    assert late.p_value == pytest.approx(2 / 64) and late.p_adjusted == pytest.approx(4 * 2 / 64)
    assert late.verdict == "inconclusive" and "inconclusive: no measurable difference" in comparison.summary[0]
    measured = [r for r in comparison.effects if r.verdict != "not measured"]
    assert len(measured) == 4 and all(r.p_adjusted >= r.p_value for r in measured)


def test_comparison_json_is_strict_json_when_no_difference_is_detectable(tmp_path) -> None:
    """Four documents: the detectable difference is infinite, written "inf" as evaluation.json writes it."""
    from evaluation.reports.reproduce import write_reproduce_report

    ids = ["q0", "q1", "q2", "q3"]
    per_query = {s: {q: 0.1 * (i + 1) * (n + 1) for i, q in enumerate(ids)} for n, s in enumerate(
        ("independent", "late-chunking", "insent", "finetune-control")
    )}  # fmt: skip
    comparison = compare_with_paper(_evaluation(), per_query, None, documents(4, 1), resamples=200)
    assert any(r.mdd_points == float("inf") for r in comparison.effects)
    paths = write_reproduce_report(comparison, _evaluation(), tmp_path, [])

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in comparison.json")

    record = json.loads(paths["comparison.json"].read_text(), parse_constant=refuse)
    late = next(e for e in record["effects"] if (e["effect"], e["subset"]) == ("late_chunking", "all"))
    assert late["mdd_points"] == "inf" and late["n_documents"] == 4 and late["p_adjusted"] >= late["p_value"]
