"""``conteb.mteb_task``: a published task folder as an MTEB 2.x retrieval task, scored like our evaluation.

On the repository's sample (built once per session, :func:`tests.conftest.built_sample`) and on an XQuAD build (10
articles of ../shared/data/xquad-en.json.gz), MTEB's nDCG@10 for the offline model (all-MiniLM-L6-v2, 512-token
limit, no prompts) equals the nDCG@10 of our ``independent`` system, run through
``evaluation.targets.evaluate_target`` (what ``conteb evaluate`` calls), to 1e-4. MTEB rounds its scores to 5
decimals (``mteb/_evaluators/retrieval_metrics.py``), so the measured difference is below 5e-6.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conteb.storage import dataset_dir
from tests.conftest import ROOT, SAMPLE_DIR, BuiltSample, materialize_task

SYSTEMS = (
    "evaluation:\n  systems:\n    - {name: independent, kind: dense, model: offline-minilm, context: independent}\n"
    "  bootstrap: {resamples: 100}\n"
)


def build(tmp_path: Path, task: str) -> Path:
    """Materialize the registry holding ``task`` (YAML) and our ``independent`` system; its path."""
    config = tmp_path / "conteb.yaml"
    config.write_text(f"tasks:\n{task}{SYSTEMS}")
    result, _ = materialize_task(config)
    assert result.success
    return config


def ours(config_path: Path, data_dir: Path, name: str) -> float:
    from evaluation.targets import evaluate_target, find_target
    from project.config import load_config

    config = load_config(config_path)
    target = find_target(config.tasks, config.evaluation, data_dir, name)
    evaluation = evaluate_target(
        target, config.evaluation, data_dir, systems=["independent"], chunk_sizes=False, log=lambda _: None
    )
    (run,) = evaluation.runs
    assert run.status == "ok", run.reason
    return run.metrics["ndcg@10"].value


def theirs(folder: Path) -> float:
    import mteb

    from conteb import mteb_task
    from embedding.models import load_offline_minilm

    task = mteb_task(folder)
    result = mteb.evaluate(load_offline_minilm(), tasks=[task], cache=None, show_progress_bar=False)
    return result.task_results[0].get_score()


def test_sample_scores_the_same_in_mteb(built_sample: BuiltSample, tmp_path: Path) -> None:
    """The repository's sample (built once per session), its ``independent`` system."""
    from conteb import mteb_task

    meta = mteb_task(built_sample.dataset).metadata
    assert (meta.name, meta.license, meta.main_score, meta.eval_splits) == ("sample", "cc0-1.0", "ndcg_at_10", ["test"])
    assert meta.description.startswith("Same-template demo corpus")
    data_dir = built_sample.copy_data(tmp_path / "data")  # conteb evaluate writes its reports there
    config = tmp_path / "conteb.yaml"  # the repository's task, our system alone (no selection on validation)
    tasks = yaml.safe_load((ROOT / "conteb.yaml").read_text())["tasks"]
    tasks[0]["source"]["path"] = str(SAMPLE_DIR)
    config.write_text(yaml.safe_dump({"tasks": tasks}) + SYSTEMS)
    assert ours(config, data_dir, "sample") == pytest.approx(theirs(built_sample.dataset), abs=1e-4)


@pytest.mark.shared_data
def test_xquad_scores_the_same_in_mteb(tmp_path: Path, isolated_env: Path, shared_data: Path) -> None:
    task = (
        f"  - name: xquad\n    source: {{kind: squad_json, path: {shared_data / 'xquad-en.json.gz'}}}\n"
        "    max_documents: 10\n    license: cc-by-sa-4.0\n"
    )
    config = build(tmp_path, task)
    assert ours(config, isolated_env, "xquad") == pytest.approx(theirs(dataset_dir(isolated_env, "xquad")), abs=1e-4)


def test_a_missing_split_is_named(tmp_path: Path) -> None:
    from conteb import mteb_task
    from conteb.mteb_tasks import MtebTaskError

    (tmp_path / "documents").mkdir()
    with pytest.raises(MtebTaskError, match="no 'documents' shards of split 'test'"):
        mteb_task(tmp_path)
