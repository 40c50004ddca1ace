"""End-to-end: ``conteb evaluate`` on the built sample tests every contextual system against the best cheap baseline.

Its own file (not tests/test_evaluation_e2e.py's) so that ``make test`` (``--dist loadfile``) runs it beside that
file's sample evaluation, not after it.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
from click.testing import CliRunner

from cli.main import main as conteb_cli
from tests.conftest import SAMPLE_DIR
from tests.test_evaluation_e2e import markdown_ndcg, materialize, with_model

BASELINES = """\
evaluation:
  systems:
    - {name: bm25, kind: bm25}
    - {name: bm25-title, kind: bm25, context: title}
    - {name: independent, kind: dense, model: offline-minilm, context: independent}
    - {name: title-prefix, kind: dense, model: offline-minilm, context: title}
    - {name: late-chunking, kind: dense, model: offline-minilm, context: late}
    - {name: late-chunking-title, kind: dense, model: offline-minilm, context: late, header: title}
    - {name: hybrid, kind: hybrid, systems: [bm25, independent]}
    - {name: hybrid-title, kind: hybrid, systems: [bm25-title, title-prefix], k: 60}
  bootstrap: {resamples: 200}
  significance: {resamples: 500}
  scaling: {points: 3, repeats: 2}
  chunk_sizes: {sizes: [300], systems: [hybrid, late-chunking-title]}
"""


def test_conteb_evaluate_tests_every_contextual_system_against_the_best_cheap_baseline(
    tmp_path: Path, isolated_env: Path, tiny_model_folder: Path
) -> None:
    """The plan, the roles and the reports' comparisons (mechanics: the dense systems run on a tiny random model)."""
    config = tmp_path / "conteb.yaml"
    systems = with_model(BASELINES, tiny_model_folder)
    config.write_text(f"tasks:\n  - name: sample\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n{systems}")
    assert materialize(config, "build_conteb", dg.DagsterInstance.ephemeral()).success
    result = CliRunner().invoke(conteb_cli, ["--config", str(config), "evaluate", "--task", "sample"])
    assert result.exit_code == 0, result.output

    reports = isolated_env / "reports"
    evaluation = json.loads((reports / "tasks" / "sample" / "evaluation.json").read_text())
    runs = {run["system"]: run for run in evaluation["runs"]}
    assert {name: run["status"] for name, run in runs.items()} == dict.fromkeys(runs, "ok")
    assert runs["hybrid"]["details"]["components"] == ["bm25", "independent"] and runs["hybrid"]["kind"] == "hybrid"
    assert runs["bm25-title"]["details"]["context"] == "title" and runs["late-chunking-title"]["details"]["header"]
    roles = {name: run["role"] for name, run in runs.items()}
    assert {name for name, role in roles.items() if role == "tested"} == {"late-chunking", "late-chunking-title"}
    for key in ("comparisons", "subset_comparisons"):
        if key == "subset_comparisons" and not evaluation["n_needs_context"]:
            continue
        best = [c for c in evaluation[key] if c["plan"] == "best_baseline"]
        assert [c["system_a"] for c in best] == ["late-chunking", "late-chunking-title"]
        for comparison in best:
            means = comparison["baselines"]
            assert set(means) == {n for n, r in roles.items() if r == "baseline"}
            assert (
                comparison["system_b"] == max(means, key=means.get)
                and comparison["mean_b"] == means[comparison["system_b"]]
            )
    values = {run["system"]: run["metrics"]["ndcg@10"]["value"] for run in evaluation["runs"]}
    best_on_all = next(c for c in evaluation["comparisons"] if c["plan"] == "best_baseline")
    assert best_on_all["baselines"] == pytest.approx({n: values[n] for n in best_on_all["baselines"]})
    assert {(p["system"], p["chunk_size"]) for p in evaluation["chunk_sizes"]} == {
        ("hybrid", 300), ("late-chunking-title", 300),
    }  # fmt: skip
    assert "vs the best cheap baseline (" in result.output

    for page in ("report.md", "tasks/sample/report.md", "report.html", "tasks/sample/report.html"):
        text = (reports / page).read_text()
        assert "Against the best cheap baseline" in text and "can only make the comparison harder" in text, page
        for system in ("bm25-title", "late-chunking-title", "hybrid-title"):
            assert system in text, (page, system)
    markdown = (reports / "report.md").read_text()
    for system in ("hybrid", "hybrid-title", "bm25-title", "late-chunking-title"):
        assert markdown_ndcg(markdown, system) == f"{values[system]:.3f}"
