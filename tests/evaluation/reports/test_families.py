"""One Holm family per task in the reproduce report (evaluation/reports/families.py): a comparison the report states
in several sections (the evaluation's comparisons, the pipeline's target, the trained model's target, the paper's
effects) reads one adjusted p everywhere, adjusted over every distinct test of the task."""

from __future__ import annotations

import numpy as np
import pytest

from conteb.names import SystemName
from evaluation.metrics.stats import adjust_family, holm, paired
from evaluation.reports.families import ReportInputs, key_of, one_family_per_task, task_family
from evaluation.reports.paper import compare_with_paper
from evaluation.reports.pipeline_target import pipeline_target
from evaluation.reports.target import task_target
from evaluation.results import ALL, NEEDS_CONTEXT, Comparison, SystemRun, TaskEvaluation

N = 80
QUERIES = [f"q{i:02d}" for i in range(N)]
NEEDS = {q: i < 60 for i, q in enumerate(QUERIES)}
DOCUMENTS = {q: f"d{i // 4:02d}" for i, q in enumerate(QUERIES)}  # 20 documents of 4 queries
BASELINES = ("bm25", "bm25-title", "independent", "title-prefix", "hybrid", "hybrid-title")
MEANS = {
    "bm25": 0.40, "bm25-title": 0.85, "independent": 0.30, "title-prefix": 0.80, "hybrid": 0.40, "hybrid-title": 0.86,
    SystemName.LATE_CHUNKING: 0.5, SystemName.LATE_CHUNKING_ANCHORED: 0.55, SystemName.INSENT: 0.7,
    SystemName.INSENT_ANCHORED: 0.75, SystemName.FINETUNE_CONTROL: 0.72,
}  # fmt: skip


def per_query(seed: int = 0) -> dict[str, dict[str, float]]:
    """Per-query nDCG@10 around each mean, each system with noise of its own (so that small gaps are uncertain)."""
    rng = np.random.default_rng(seed)
    return {s: {q: float(np.clip(m + rng.normal(0, 0.15), 0, 1)) for q in QUERIES} for s, m in MEANS.items()}


def comparison(values: dict[str, dict[str, float]], a: str, b: str, subset: str) -> Comparison:
    ids = [q for q in QUERIES if subset == ALL or NEEDS[q]]
    x, y = np.array([values[a][q] for q in ids]), np.array([values[b][q] for q in ids])
    r = paired(x, y, [DOCUMENTS[q] for q in ids])
    figures = {"n_documents": r.n_documents, "ci_low": r.ci_low, "ci_high": r.ci_high, "mdd": r.mdd}
    return Comparison("t", a, b, "ndcg@10", x.mean(), y.mean(), r.difference, r.p_value, len(ids), "randomization",
                      10000, subset, **figures)  # fmt: skip


def inputs(values: dict[str, dict[str, float]]) -> ReportInputs:
    evaluation = TaskEvaluation("t", "s", "test", 20, 80, N, runs=[SystemRun("t", s, "x", "ok") for s in values])
    # the evaluation's own comparison of the pipeline with the best cheap baseline, written b − a (the same test)
    evaluation.comparisons = [comparison(values, "hybrid-title", "bm25-title", ALL)]
    evaluation.subset_comparisons = [comparison(values, "hybrid-title", "bm25-title", NEEDS_CONTEXT)]
    adjust_family(evaluation.comparisons + evaluation.subset_comparisons)
    return ReportInputs(
        evaluation,
        compare_with_paper(evaluation, values, NEEDS, DOCUMENTS),
        [task_target("t", "about", values, NEEDS, DOCUMENTS)],
        [pipeline_target("t", "bm25-title", False, BASELINES, values, NEEDS, DOCUMENTS)],
    )


def test_one_comparison_reads_one_adjusted_p_in_every_section() -> None:
    stated = inputs(per_query())
    before = stated.evaluation.comparisons[0].p_adjusted
    unified = one_family_per_task(stated)
    raw = task_family(stated, "t")
    assert len(raw) > 40  # the targets' margins, the paper's effects and the evaluation's comparisons, once each
    expected = dict(zip(raw, holm(list(raw.values())), strict=True))
    answer = unified.evaluation.comparisons[0]
    target_margin = unified.pipeline_targets[0].against_best[ALL]  # bm25-title − hybrid-title: the same test
    assert key_of(answer.system_a, answer.system_b, ALL) == key_of(target_margin.system, target_margin.rival, ALL)
    assert answer.p_value == target_margin.p_value  # computed the same, in another order of queries
    assert answer.p_adjusted == target_margin.p_adjusted == expected[key_of("bm25-title", "hybrid-title", ALL)]
    assert answer.p_adjusted >= before  # a larger family than the evaluation's two comparisons
    for margin in unified.targets[0].margins:
        assert margin.p_adjusted == expected[key_of(margin.system, margin.rival, margin.subset)]
    for effect in unified.comparison.effects:
        if effect.p_value is not None:
            assert effect.p_adjusted == expected[key_of(effect.system_a, effect.system_b, effect.subset)]
    assert stated.evaluation.comparisons[0].p_adjusted == before  # the inputs are left as they were


def test_verdicts_and_causes_are_read_again_from_the_report_family() -> None:
    """An effect significant in the paper table's own family but not in the report's reads inconclusive there, and
    the summary says so; the target's causes are named again from the report family's adjusted p."""
    stated = inputs(per_query())
    [effect] = [e for e in stated.comparison.effects if (e.system_a, e.system_b, e.subset) == ("late-chunking",
                "independent", ALL)]  # fmt: skip
    effect.p_value = effect.p_adjusted = 0.004  # significant alone; the pair appears in no other section
    effect.verdict = "reproduces"
    unified = one_family_per_task(stated)
    raw = task_family(stated, "t")
    [after] = [e for e in unified.comparison.effects if e.effect == effect.effect and e.subset == ALL]
    assert after.p_adjusted == dict(zip(raw, holm(list(raw.values())), strict=True))[key_of(
        "late-chunking", "independent", ALL)]  # fmt: skip
    assert after.p_adjusted > 0.05 and after.verdict == "inconclusive"
    assert any(effect.claim in line and "inconclusive" in line for line in unified.comparison.summary)
    assert unified.targets[0].causes != stated.targets[0].causes  # read again, not carried over
    assert all("adjusted p" in cause for cause in unified.targets[0].causes)


@pytest.mark.parametrize("subset", [ALL, NEEDS_CONTEXT])
def test_a_pair_written_either_way_is_one_test(subset: str) -> None:
    assert key_of("a", "b", subset) == key_of("b", "a", subset) != key_of("a", "b", "other")
