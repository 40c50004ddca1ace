"""End-to-end: build the sample, then ``evaluate_conteb`` in process and ``conteb evaluate``.

Checks that every configured system either reports or says why not, that the report files exist,
that the numbers agree across Markdown, HTML, results.json and pytrec_eval on the TREC files, and
that the contextual baseline shows what its LLM contexts cost.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import dagster as dg
import pytest
from click.testing import CliRunner

from cli.main import main as conteb_cli
from evaluation.metrics.trec import read_qrels, read_run
from pipelines.definitions import build_definitions
from project.config import load_config
from tests.conftest import SAMPLE_DIR, sample_counts
from tests.support.openai_server import OpenAICompatibleServer

SYSTEMS = """\
evaluation:
  systems:
    - {name: bm25, kind: bm25}
    - {name: bm25-subword, kind: bm25, tokenizer: model, stemmer: null, stopwords: null}
    - {name: independent, kind: dense, model: offline-minilm, context: independent}
    - {name: late-chunking, kind: dense, model: offline-minilm, context: late}
    - {name: insent, kind: dense, trained: insent_model, context: late}
    - {name: contextual, kind: contextual, model: offline-minilm}
    - {name: late-interaction, kind: late_interaction, model: offline-minilm, context: late}
  bootstrap: {resamples: 200}
  significance: {resamples: 500}
  scaling: {points: 4, repeats: 2}
  chunk_sizes: {sizes: [1000, 300], systems: [bm25, late-chunking]}
"""


def registry(tmp_path: Path, model: Path | str = "offline-minilm", llm_url: str | None = None) -> Path:
    """The sample with chunk contexts and :data:`SYSTEMS`, each model-based system on ``model`` (the end-to-end test
    gives a tiny random model: it checks mechanics, not MiniLM's scores)."""
    llm = f"llm:\n  base_url: {llm_url}\n  backoff_initial_s: 0.01\n" if llm_url else ""
    path = tmp_path / "conteb.yaml"
    path.write_text(
        f"{llm}tasks:\n  - name: sample\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n"
        f"    chunk_contexts: true\n{with_model(SYSTEMS, model)}"
    )
    return path


def with_model(systems: str, model: Path | str) -> str:
    """``systems`` (registry text) with every ``model: offline-minilm`` replaced by the folder ``model``."""
    return systems.replace("model: offline-minilm", f"model: {model}")


def materialize(
    config_path: Path, job: str, instance: dg.DagsterInstance, assets: list[dg.AssetKey] | None = None
) -> dg.ExecuteInProcessResult:
    """Run ``job`` in process (only ``assets`` of it, with their checks, when given)."""
    defs = build_definitions(load_config(config_path))
    return defs.resolve_job_def(job).execute_in_process(instance=instance, raise_on_error=False, asset_selection=assets)


def markdown_ndcg(text: str, system: str) -> str:
    """The nDCG@10 cell of ``system`` in the overall Markdown table (the first row that starts with its name; the
    reading's comparison tables start with a task or a comparison)."""
    row = next(line for line in text.splitlines() if line.startswith(f"| {system} |"))
    return re.search(r"(\d\.\d{3}) \[", row).group(1)


@pytest.fixture(scope="module")
def server():
    def answer(body):
        stage = body["response_format"]["json_schema"]["name"]
        assert stage in ("chunk_context", "answerable_alone"), stage
        if stage == "answerable_alone":
            return {"answerable": False, "reason": "The passage does not name the entity."}
        return {"context": "From the sample corpus; the passage continues the document's topic."}

    with OpenAICompatibleServer(answer) as running:
        yield running


def test_evaluate_conteb_on_the_sample(
    tmp_path: Path, isolated_env: Path, server, monkeypatch, tiny_model_folder: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-eval")
    config = registry(tmp_path, tiny_model_folder, server.url)
    instance = dg.DagsterInstance.ephemeral()
    assert materialize(config, "build_conteb", instance).success
    result = materialize(config, "evaluate_conteb", instance)
    assert result.success

    reports = isolated_env / "reports"
    evaluation = json.loads((reports / "tasks" / "sample" / "evaluation.json").read_text())
    runs = {run["system"]: run for run in evaluation["runs"]}
    assert runs["insent"]["status"] == "not_run" and "insent_model" in runs["insent"]["reason"]
    for name in ("bm25", "bm25-subword", "independent", "late-chunking", "contextual", "late-interaction"):
        assert runs[name]["status"] == "ok", runs[name]
        assert 0.0 < runs[name]["metrics"]["ndcg@10"]["value"] <= 1.0
        assert (reports / runs[name]["run_file"]).is_file()
    assert runs["contextual"]["llm_tokens"] > 0 and runs["contextual"]["llm_usd"] is not None
    assert runs["late-chunking"]["by_position"] and runs["late-chunking"]["scaling"]
    assert {(p["system"], p["chunk_size"]) for p in evaluation["chunk_sizes"]} == {
        (s, n) for s in ("bm25", "late-chunking") for n in (1000, 300)
    }
    assert any(c["system_a"] == "late-chunking" and c["system_b"] == "independent" for c in evaluation["comparisons"])

    # The fixed layout other tools read.
    records = json.loads((reports / "results.json").read_text())
    assert {tuple(sorted(r)) for r in records} == {
        ("ci_high", "ci_low", "metric", "n_documents", "n_queries", "subset", "system", "task", "value")
    }
    ndcg = {r["system"]: r["value"] for r in records if r["task"] == "sample" and r["metric"] == "ndcg@10"}
    qrels = read_qrels(reports / "runs" / "sample" / "qrels.trec")
    assert len(qrels) == evaluation["n_queries"]
    run = read_run(reports / "runs" / "sample" / "bm25.trec")
    assert max(len(ranked) for ranked in run.values()) == min(100, evaluation["n_chunks"])

    # Markdown, HTML and JSON show the same numbers.
    markdown = (reports / "report.md").read_text()
    html = (reports / "report.html").read_text()
    for system, value in ndcg.items():
        assert markdown_ndcg(markdown, system) == f"{value:.3f}"
        assert f"{value:.3f}" in html
    for name in ("overview.png", "chunk_sizes.png"):
        assert (reports / name).read_bytes().startswith(b"\x89PNG")
    for name in ("report.md", "report.html", "positions.png", "scaling.png"):
        assert (reports / "tasks" / "sample" / name).is_file()

    # Dagster: numeric metadata per system, the report as Markdown, the trec_eval check passed.
    event = instance.get_latest_materialization_event(dg.AssetKey(["sample", "evaluation"]))
    metadata = event.asset_materialization.metadata
    assert metadata["ndcg@10/bm25"].value == pytest.approx(ndcg["bm25"], abs=1e-6)
    assert "data:image/png;base64," in metadata["report"].value
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {"metrics_match_trec_eval": True}
    report_event = instance.get_latest_materialization_event(dg.AssetKey("evaluation_report"))
    assert "ndcg@10/sample/bm25" in report_event.asset_materialization.metadata
    assert sample_counts().documents <= 1000 and metadata["encode_shards"].value == 1  # 1,000 a shard by default

    # Encoding in shards: the sample in three encode steps; the same chunks are ranked, the vectors differ only
    # by float rounding (tests/evaluation/test_sharding.py), so the numbers agree.
    size = sample_counts().shard_size(3)
    assert sample_counts().shard_count(size) == 3
    before = {r["system"]: r["value"] for r in records if r["metric"] == "ndcg@10" and r["subset"] == "all"}
    sharded = tmp_path / "sharded.yaml"
    sharded.write_text(
        config.read_text().split("evaluation:")[0]
        + f"execution:\n  encode_shard_documents: {size}\n"
        + "evaluation:\n  systems:\n"
        + f"    - {{name: independent, kind: dense, model: {tiny_model_folder}, context: independent}}\n"
        + "  chunk_sizes: {enabled: false, systems: []}\n  significance: {comparisons: []}\n"
    )
    result = materialize(sharded, "evaluate_conteb", instance, [dg.AssetKey(["sample", "evaluation"])])
    assert result.success
    steps = {event.step_key.split(".")[-1] for event in result.all_events if event.step_key}  # graph.op[key]
    assert {key for key in steps if key.startswith("sample__evaluation__encode")} == {
        f"sample__evaluation__encode[s000{i}]" for i in range(3)
    }
    again = json.loads((reports / "tasks" / "sample" / "evaluation.json").read_text())
    for run in again["runs"]:
        assert run["details"]["encode_shards"] == 3
        assert run["metrics"]["ndcg@10"]["value"] == pytest.approx(before[run["system"]], abs=1e-3), run["system"]
    event = instance.get_latest_materialization_event(dg.AssetKey(["sample", "evaluation"]))
    assert event.asset_materialization.metadata["encode_shards"].value == 3


def test_conteb_evaluate_cli_and_an_external_folder(tmp_path: Path, isolated_env: Path) -> None:
    config = registry(tmp_path)
    instance = dg.DagsterInstance.ephemeral()
    assert materialize(config, "build_conteb", instance).success
    runner = CliRunner()

    result = runner.invoke(
        conteb_cli, ["--config", str(config), "evaluate", "--task", "sample", "--system", "bm25", "--no-chunk-sizes"]
    )
    assert result.exit_code == 0, result.output
    assert "bm25" in result.output and "nDCG@10" in result.output
    evaluation = json.loads((isolated_env / "reports" / "tasks" / "sample" / "evaluation.json").read_text())
    assert [run["system"] for run in evaluation["runs"]] == ["bm25"]

    # A second system later keeps the first one's results.
    result = runner.invoke(
        conteb_cli, ["--config", str(config), "evaluate", "--task", "sample", "--system", "contextual"]
    )
    assert result.exit_code == 0, result.output
    evaluation = json.loads((isolated_env / "reports" / "tasks" / "sample" / "evaluation.json").read_text())
    statuses = {run["system"]: run["status"] for run in evaluation["runs"]}
    assert statuses == {"bm25": "ok", "contextual": "not_run"}  # offline: no chunk contexts
    reason = next(run["reason"] for run in evaluation["runs"] if run["system"] == "contextual")
    assert reason.startswith("chunk_contexts is set, but no contexts were produced") and "OPENAI_API_KEY" in reason

    # Any ConTEB-layout folder (not built by this registry): by path, chunk-size study from offsets.
    external = tmp_path / "elsewhere" / "my-task"
    shutil.copytree(isolated_env / "conteb" / "sample", external)
    result = runner.invoke(
        conteb_cli, ["--config", str(config), "evaluate", "--task", str(external), "--system", "bm25"]
    )
    assert result.exit_code == 0, result.output
    evaluation = json.loads((isolated_env / "reports" / "tasks" / "my-task" / "evaluation.json").read_text())
    assert evaluation["runs"][0]["status"] == "ok"
    assert {p["chunk_size"] for p in evaluation["chunk_sizes"]} == {1000, 300}


def test_unknown_system_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(conteb_cli, ["--config", str(registry(tmp_path)), "evaluate", "--system", "nope"])
    assert result.exit_code == 2
    assert "nope" in result.output
