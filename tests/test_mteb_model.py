"""``conteb.mteb_model``: late chunking, anchored windows and a trained InSeNT model inside MTEB, scored like ours.

On the built sample (the session's :func:`tests.conftest.built_sample`), ``mteb.evaluate(conteb.mteb_model(...),
conteb.mteb_task(folder))`` (MTEB's own retrieval evaluator and metric) gives the nDCG@10 that ``conteb evaluate``
(:func:`evaluation.runner.evaluate_task` on :func:`evaluation.load.load_corpus`) reports for the same system, to
MTEB's rounding (5 decimals): the offline MiniLM with late chunking, anchored windows asked for by name (over a tiny
random ModernBERT: cheap), and a model trained here (that ModernBERT after one InSeNT step, anchored windows under the
title header), given to MTEB as its folder, whose training YAML sets the layout. A task whose chunk ids carry no
document is refused in one line.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import BuiltSample, published_path

LATE = {"name": "late-chunking", "kind": "dense", "model": "offline-minilm", "context": "late"}
INSENT = {"name": "insent", "kind": "dense", "trained": "insent_model", "context": "late"}
MTEB_DECIMALS = 5  # MTEB rounds its scores (mteb/_evaluators/retrieval_metrics.py)


def anchored(base: Path) -> dict:
    """Anchored windows over the untrained tiny model ``base`` (MiniLM's late chunking runs once already)."""
    return {**LATE, "name": "late-chunking-anchored", "model": str(base), "window_policy": "anchored"}


@pytest.fixture(scope="module")
def models_dir(built_sample: BuiltSample, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``<models>/insent_model``: one InSeNT step of a tiny ModernBERT (saved untrained in ``<models>/../tiny``) on the
    sample's train split (anchored windows, title header), with ``insent_model.train.yaml`` beside it as the training
    asset writes it."""
    from embedding.models import offline_minilm_path
    from tests.support.tiny_models import tiny_modernbert
    from training.config import make_config
    from training.loop import train

    root = tmp_path_factory.mktemp("mteb-model")
    base = root / "tiny"
    tiny_modernbert(offline_minilm_path(), seed=0, device="cpu").save(str(base))
    models = root / "models"
    values = {
        "data": [str(built_sample.dataset)],
        "base_model": str(base),
        "output": str(models / "insent_model"),
        "max_steps": 1,
        "eval_every": 0,
        "checkpoint_every": 0,
        "batch_docs": 2,
        "window_policy": "anchored",
        "header": "title",
        "device": "cpu",
    }
    models.mkdir()
    (models / "insent_model.train.yaml").write_text(yaml.safe_dump(values, sort_keys=False))
    assert train(make_config(values)).steps == 1
    return models


def ours(folder: Path, models_dir: Path, tmp_path: Path) -> dict[str, float]:
    """nDCG@10 per system, from the evaluation ``conteb evaluate`` runs (one run of the three systems)."""
    from evaluation.config import EvaluationConfig
    from evaluation.load import load_corpus
    from evaluation.runner import evaluate_task

    systems = [LATE, anchored(models_dir.parent / "tiny"), INSENT]
    config = EvaluationConfig.model_validate({"systems": systems, "bootstrap": {"resamples": 100}})
    corpus = load_corpus(folder, name="sample")
    result = evaluate_task(
        corpus, config, models_dir=models_dir, reports_dir=tmp_path / "reports", chunk_sizes=False, log=lambda _: None
    )
    for run in result.runs:
        assert run.status == "ok", run.reason
    return {run.system: run.metrics["ndcg@10"].value for run in result.runs}


def theirs(model, folder: Path) -> float:
    import mteb

    import conteb

    result = mteb.evaluate(model, conteb.mteb_task(folder), cache=None, show_progress_bar=False)
    return result.task_results[0].get_score()


def test_contextual_systems_score_the_same_in_mteb(built_sample: BuiltSample, models_dir: Path, tmp_path: Path) -> None:
    import conteb

    folder = built_sample.dataset
    expected = ours(folder, models_dir, tmp_path)
    got = {
        "late-chunking": theirs(conteb.mteb_model("offline-minilm"), folder),
        "late-chunking-anchored": theirs(
            conteb.mteb_model(models_dir.parent / "tiny", window_policy="anchored"), folder
        ),
        "insent": theirs(conteb.mteb_model(models_dir / "insent_model"), folder),
    }
    assert got == {name: round(value, MTEB_DECIMALS) for name, value in expected.items()}, expected
    # the systems differ: a model that ignored window_policy or the trained layout would not match all three
    assert len(set(got.values())) == 3


def test_a_trained_folder_is_evaluated_as_trained(models_dir: Path) -> None:
    import conteb

    model = conteb.mteb_model(models_dir / "insent_model")
    assert (model.system.window_policy, model.system.header) == ("anchored", "title")
    meta = model.mteb_model_meta
    other = conteb.mteb_model(models_dir / "insent_model", window_policy="plain").mteb_model_meta
    assert meta.name == "conteb/insent_model-late" and meta.revision != other.revision  # MTEB's cache keeps both


def test_a_task_without_document_ids_is_refused(built_sample: BuiltSample, tmp_path: Path) -> None:
    import mteb

    import conteb
    from evaluation.mteb_model import MtebModelError

    folder = shutil.copytree(built_sample.dataset, tmp_path / "flat")
    documents = pq.read_table(published_path(folder, "documents", "test"))
    renamed = {cid: f"c{row}" for row, cid in enumerate(documents.column("chunk_id").to_pylist())}
    flat = pa.table({"chunk_id": list(renamed.values()), "chunk": documents.column("chunk")})
    pq.write_table(flat, published_path(folder, "documents", "test"))
    queries = pq.read_table(published_path(folder, "queries", "test"))
    gold = [renamed[cid] for cid in queries.column("chunk_id").to_pylist()]
    queries = queries.set_column(queries.schema.get_field_index("chunk_id"), "chunk_id", pa.array(gold))
    pq.write_table(queries, published_path(folder, "queries", "test"))

    with pytest.raises(MtebModelError) as error:
        mteb.evaluate(conteb.mteb_model("offline-minilm"), conteb.mteb_task(folder), cache=None)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("task flat: corpus row 0: id 'c0' carries no document (no doc_id and chunk_index")


def test_a_bad_model_or_setting_is_one_line(tmp_path: Path) -> None:
    import conteb
    from evaluation.mteb_model import MtebModelError

    with pytest.raises(MtebModelError, match=r"^mteb_model: model folder .*nowhere does not exist$"):
        conteb.mteb_model(tmp_path / "nowhere")
    with pytest.raises(MtebModelError, match=r"^mteb_model: settings: .*header: title applies to context: late only"):
        conteb.mteb_model("offline-minilm", context="independent", header="title")
    with pytest.raises(MtebModelError, match=r"^mteb_model: window_policy: "):
        conteb.mteb_model("offline-minilm", window_policy="sliding")
