"""Train/test overlap is refused by content, whatever the names; a model's provenance is reported everywhere.

The training data is what training records (``training.data.load_samples`` -> ``documents_seen`` ->
``training.card.write_training_data``, as ``training.loop.train`` calls them); the model is a tiny random one.
"""

from __future__ import annotations

import json
import re
import shutil
import unicodedata
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from conteb.published import config_shards
from conteb.storage import dataset_dir, models_dir, reports_dir
from curation.chunking import chunk_documents
from curation.dataset import publish_task
from curation.pairing import pair_by_span
from curation.sources import load_source
from curation.sources.sample import load_sample
from embedding.model_folder import TRAINING_DATA_FILE, write_training_data
from evaluation.config import DenseSystem
from evaluation.reports.publish import dagster_markdown_task, write_reports
from evaluation.systems.dispatch import requirement_problem
from evaluation.targets import evaluate_target, find_target
from project.config import load_config
from tests.conftest import SAMPLE_DIR, published_table
from tests.evaluation.test_leakage import save_model
from training.data import documents_seen, load_samples

TASKS = f"""tasks:
  - name: demo
    source: {{kind: sample, path: {SAMPLE_DIR}}}
    splits: {{train: 0.5, test: 0.5, seed: 0}}
  - name: demo-again
    source: {{kind: sample, path: {SAMPLE_DIR}}}
    splits: {{train: 0.5, test: 0.5, seed: 1}}
  - name: renamed
    source: {{kind: sample, path: {SAMPLE_DIR}}}
"""
EVALUATION = """evaluation:
  {require}systems:
    - {{name: bm25, kind: bm25}}
    - {{name: independent, kind: dense, model: offline-minilm}}
    - {{name: insent, kind: dense, trained: insent_model, context: late}}
  chunk_sizes: {{enabled: false, systems: []}}
  bootstrap: {{resamples: 100}}
  significance: {{resamples: 100}}
"""
INSENT = DenseSystem(kind="dense", name="insent", trained="insent_model", context="late")
SILENT = {"log": lambda _: None}


def registry(folder: Path, require_provenance: bool = False):
    path = folder / ("strict.yaml" if require_provenance else "conteb.yaml")
    require = "require_provenance: true\n  " if require_provenance else ""
    path.write_text(TASKS + EVALUATION.format(require=require))
    return load_config(path)


@pytest.fixture
def project(tmp_path: Path):
    """The registry and its data folder, with task ``demo`` published (split by document, seed 0)."""
    config = registry(tmp_path)
    data_dir = tmp_path / "data"
    publish(config, "demo", data_dir)
    return config, data_dir


def publish(config, name: str, data_dir: Path, documents: pa.Table | None = None, queries: pa.Table | None = None):
    """Curate registry task ``name`` (its own source, or the given source tables) into ``data/conteb/<name>``."""
    task = next(t for t in config.tasks if t.name == name)
    if documents is None or queries is None:
        source = load_source(task.source)
        documents, queries = source.documents_table(), source.queries_table()
    chunks = chunk_documents(documents, task.chunking).chunks
    paired = pair_by_span(queries, documents, chunks).table()
    return publish_task(dataset_dir(data_dir, name), task, task.source.kind, chunks, paired, {})


def trained_model(data_dir: Path, *folders: Path) -> Path:
    """``models/insent_model``: a saved tiny model and what training on the ``train`` split of ``folders`` records."""
    model = save_model(models_dir(data_dir) / "insent_model", None)
    samples, _ = load_samples(list(folders), split="train")
    write_training_data(model, documents_seen(samples))
    return model


def hub_file(config: str, split: str) -> str:
    """A hand-made folder's file (no card): named as the hub's shards are."""
    return f"{config}/{split}-00000-of-00001.parquet"


def doc_ids(folder: Path, split: str) -> set[str]:
    return set(published_table(folder, "documents", split).column("doc_id").to_pylist())


def test_a_second_task_over_the_same_source_is_refused(project) -> None:
    config, data_dir = project
    publish(config, "demo-again", data_dir)
    trained_model(data_dir, dataset_dir(data_dir, "demo"))
    seen = doc_ids(dataset_dir(data_dir, "demo"), "train")
    evaluated = doc_ids(dataset_dir(data_dir, "demo-again"), "test")
    shared = seen & evaluated
    assert shared and evaluated - shared  # another split seed: some of its test documents were trained on

    target = find_target(config.tasks, config.evaluation, data_dir, "demo-again")
    evaluation = evaluate_target(target, config.evaluation, data_dir, systems=["insent"], chunk_sizes=False, **SILENT)
    run = evaluation.run("insent")
    assert run.status == "not_run"
    assert run.reason.startswith(
        f"refused: insent_model was trained on text of {len(shared)} of the {len(evaluated)} documents of the "
        "evaluated corpus 'demo-again' (split 'test'), whatever their names: "
        f"{len(shared)} identical documents"
    )
    assert "of training task 'demo' (split 'train')" in run.reason and TRAINING_DATA_FILE in run.reason
    assert "same `splits:` (same seed)" in run.reason  # what to do


def test_a_copy_of_the_training_folder_is_refused(project, tmp_path: Path) -> None:
    config, data_dir = project
    trained_model(data_dir, dataset_dir(data_dir, "demo"))
    copy = tmp_path / "elsewhere" / "my-copy"
    shutil.copytree(dataset_dir(data_dir, "demo"), copy)
    train = doc_ids(copy, "train")
    corpus = find_target(config.tasks, config.evaluation, data_dir, str(copy), split="train").load()
    problem = requirement_problem(INSENT, corpus, models_dir(data_dir))
    assert problem.startswith(
        f"refused: insent_model was trained on text of {len(train)} of the {len(train)} documents of the evaluated "
        f"corpus 'my-copy' (split 'train'), whatever their names: {len(train)} identical documents"
    )
    # the copy's test split holds other documents: evaluated
    disjoint = find_target(config.tasks, config.evaluation, data_dir, str(copy), split="test").load()
    assert requirement_problem(INSENT, disjoint, models_dir(data_dir)) is None


def test_the_same_documents_under_other_ids_and_titles_are_refused(project) -> None:
    config, data_dir = project
    trained_model(data_dir, dataset_dir(data_dir, "demo"))
    source = load_sample(SAMPLE_DIR)
    documents, queries = source.documents_table(), source.queries_table()
    originals = documents.column("doc_id").to_pylist()
    renamed = {doc: f"copy-{index}" for index, doc in enumerate(originals)}
    documents = documents.set_column(
        documents.schema.get_field_index("doc_id"), "doc_id", pa.array([renamed[d] for d in originals])
    ).set_column(
        documents.schema.get_field_index("title"), "title", pa.array([f"Document {i}" for i in range(len(originals))])
    )
    queries = queries.set_column(
        queries.schema.get_field_index("doc_id"),
        "doc_id",
        pa.array([renamed[d] for d in queries.column("doc_id").to_pylist()]),
    )
    publish(config, "renamed", data_dir, documents, queries)
    corpus = find_target(config.tasks, config.evaluation, data_dir, "renamed").load()
    assert not set(corpus.document_order) & set(originals)  # no id in common
    seen = doc_ids(dataset_dir(data_dir, "demo"), "train")
    problem = requirement_problem(INSENT, corpus, models_dir(data_dir))
    assert problem.startswith(
        f"refused: insent_model was trained on text of {len(seen)} of the {len(originals)} documents of the "
        f"evaluated corpus 'renamed' (split 'test'), whatever their names: {len(seen)} identical documents"
    )
    example = re.search(r"evaluated document '(copy-\d+)' is training document '([a-z-]+)'", problem)
    assert example and renamed[example[2]] == example[1] and example[2] in seen


def _text(stem: str, count: int = 30) -> str:
    """``count`` words no other text of these tests uses."""
    return " ".join(f"{stem}{index}" for index in range(count)) + "."


def write_folder(folder: Path, split: str, documents: dict[str, list[str]], *, reformulated=None, columns=None):
    """A hand-built ConTEB folder: ``documents`` (doc id -> chunk texts, in order; chunks joined by a blank line),
    one query per document; ``reformulated`` (chunk id -> embedded text); ``columns``: keep only these."""
    rows, queries = [], []
    for doc, chunks in documents.items():
        start = 0
        for index, text in enumerate(chunks):
            chunk_id = f"{doc}_{index}"
            rows.append(
                {
                    "chunk_id": chunk_id,
                    "chunk": (reformulated or {}).get(chunk_id, text),
                    "og_chunk": text,
                    "doc_id": doc,
                    "chunk_index": index,
                    "char_start": start,
                    "char_end": start + len(text),
                    "title": doc.title(),
                }
            )
            start += len(text) + 2
        queries.append({"query_id": f"q-{doc}", "query": f"what is in {doc}?", "chunk_id": f"{doc}_0"})
    table = pa.Table.from_pylist(rows)
    if columns:
        table = table.select(columns)
    for config, data in (("documents", table), ("queries", pa.Table.from_pylist(queries))):
        (folder / config).mkdir(parents=True, exist_ok=True)
        pq.write_table(data, folder / hub_file(config, split))
    return folder


def test_a_chunk_shared_inside_another_document_is_refused(tmp_path: Path) -> None:
    config = registry(tmp_path)
    data_dir = tmp_path / "data"
    shared = _text("harbour")  # 30 words: too short for a passage of 50, long enough for a chunk print
    train = write_folder(
        tmp_path / "short-train",
        "train",
        {"alpha": [_text("alpha"), shared, _text("omega")]},
        reformulated={"alpha_1": shared.replace("harbour3 ", "the subject ")},
    )
    trained_model(data_dir, train)
    models = models_dir(data_dir)

    other = write_folder(tmp_path / "other", "test", {"x": [_text("x"), shared, _text("xx")], "y": [_text("y")]})
    corpus = find_target(config.tasks, config.evaluation, data_dir, str(other)).load()
    problem = requirement_problem(INSENT, corpus, models)
    assert problem.startswith(
        "refused: insent_model was trained on text of 1 of the 2 documents of the evaluated corpus 'other' "
        "(split 'test'), whatever their names: 0 identical documents, 1 identical chunk (original or embedded "
        "text), 0 documents sharing a passage of 50+ words; e.g. evaluated chunk 'x_1' (document 'x') is training "
        "chunk 'alpha_1' of training task 'short-train' (split 'train')"
    )
    # a corpus that publishes only the embedded text: the model's reformulated chunk is found too
    embedded = write_folder(
        tmp_path / "embedded",
        "test",
        {"z": [_text("z"), shared.replace("harbour3 ", "the subject ")]},
        columns=["chunk_id", "chunk"],
    )
    corpus = find_target(config.tasks, config.evaluation, data_dir, str(embedded)).load()
    problem = requirement_problem(INSENT, corpus, models)
    assert (
        "1 identical chunk" in problem and "evaluated chunk 'z_1' (document 'z') is training chunk 'alpha_1'" in problem
    )
    unrelated = write_folder(tmp_path / "unrelated", "test", {"u": [_text("u"), _text("uu")]})
    assert (
        requirement_problem(INSENT, find_target([], config.evaluation, data_dir, str(unrelated)).load(), models) is None
    )


def _variant(text: str) -> str:
    """The same text re-encoded and re-typed: decomposed accents, CRLF, non-breaking and doubled spaces, a
    zero-width space, upper case."""
    text = unicodedata.normalize("NFD", text).replace("\n", "\r\n").replace(" ", "\u00a0", 2).replace(". ", ".  ")
    return ("\u200b" + text).upper()


def _rewrite(folder: Path, split: str, out: Path, change) -> Path:
    """``folder``'s ``split`` as the ``test`` split of ``out``: every chunk text changed by ``change``, offsets moved
    to match, doc ids prefixed ``v-`` (chunk ids follow)."""
    documents = published_table(folder, "documents", split)
    rows = sorted(documents.to_pylist(), key=lambda r: (r["doc_id"], r["chunk_index"]))
    shift: dict[str, int] = {}
    for row in rows:
        og = change(row["og_chunk"])
        row["char_start"] += shift.get(row["doc_id"], 0)
        shift[row["doc_id"]] = shift.get(row["doc_id"], 0) + len(og) - len(row["og_chunk"])
        row["og_chunk"], row["chunk"] = og, change(row["chunk"])
        row["char_end"] = row["char_start"] + len(og)
        row["doc_id"], row["chunk_id"] = f"v-{row['doc_id']}", f"v-{row['chunk_id']}"
    queries = published_table(folder, "queries", split).to_pylist()
    for query in queries:
        query["chunk_id"] = f"v-{query['chunk_id']}"
    for config, data in (("documents", pa.Table.from_pylist(rows)), ("queries", pa.Table.from_pylist(queries))):
        (out / config).mkdir(parents=True, exist_ok=True)
        pq.write_table(data.select([c for c in data.column_names if c != "chunk_ids"]), out / hub_file(config, "test"))
    return out


def test_whitespace_and_encoding_variants_are_the_same_documents_and_a_real_edit_is_not(project, tmp_path) -> None:
    config, data_dir = project
    trained_model(data_dir, dataset_dir(data_dir, "demo"))
    seen = doc_ids(dataset_dir(data_dir, "demo"), "train")
    variants = _rewrite(dataset_dir(data_dir, "demo"), "train", tmp_path / "variants", _variant)
    corpus = find_target(config.tasks, config.evaluation, data_dir, str(variants)).load()
    assert corpus.chunks[0] != corpus.chunks[0].lower()  # really changed
    problem = requirement_problem(INSENT, corpus, models_dir(data_dir))
    n = len(seen)
    assert problem.startswith(
        f"refused: insent_model was trained on text of {n} of the {n} documents of the evaluated corpus "
        f"'variants' (split 'test'), whatever their names: {n} identical documents"
    )
    # one word edited in every chunk: no longer the same documents or chunks, but runs of 60+ words are still shared
    edited = _rewrite(
        dataset_dir(data_dir, "demo"), "train", tmp_path / "edited", lambda t: t.replace(" ", " edited ", 1)
    )
    corpus = find_target(config.tasks, config.evaluation, data_dir, str(edited)).load()
    problem = requirement_problem(INSENT, corpus, models_dir(data_dir))
    assert (
        "whatever their names: 0 identical documents, 0 identical chunks (original or embedded text), "
        f"{n} documents sharing a passage"
    ) in problem


def test_xquad_documents_a_model_saw_as_squad_documents_are_refused(shared_data: Path, tmp_path: Path) -> None:
    path = tmp_path / "conteb.yaml"
    squad, xquad = shared_data / "squad-v1.1-dev.json.gz", shared_data / "xquad-en.json.gz"
    path.write_text(
        "tasks:\n"
        f"  - {{name: squad, source: {{kind: squad_json, path: {squad}}}, "
        "splits: {train: 0.5, test: 0.5, seed: 0}}\n"
        f"  - {{name: xquad, source: {{kind: squad_json, path: {xquad}}}}}\n"
        f"  - {{name: xquad-split, source: {{kind: squad_json, path: {xquad}}}, "
        "splits: {train: 0.5, test: 0.5, seed: 0}}\n"
        "evaluation:\n  systems: [{name: insent, kind: dense, trained: insent_model, context: late}]\n"
        "  chunk_sizes: {enabled: false, systems: []}\n"
    )
    config = load_config(path)
    data_dir = tmp_path / "data"
    for name in ("squad", "xquad", "xquad-split"):
        publish(config, name, data_dir)
    trained_model(data_dir, dataset_dir(data_dir, "squad"))
    seen = doc_ids(dataset_dir(data_dir, "squad"), "train")
    evaluated = doc_ids(dataset_dir(data_dir, "xquad"), "test")
    shared = seen & evaluated  # the same articles, the same ids (18 of 48 with seed 0)
    assert len(evaluated) == 48 and shared

    target = find_target(config.tasks, config.evaluation, data_dir, "xquad")
    evaluation = evaluate_target(target, config.evaluation, data_dir, chunk_sizes=False, **SILENT)
    run = evaluation.run("insent")
    assert run.status == "not_run" and run.provenance == "recorded"
    # XQuAD holds 5 of an article's paragraphs: never the same document, but the same chunks and passages
    assert run.reason.startswith(
        f"refused: insent_model was trained on text of {len(shared)} of the 48 documents of the evaluated corpus "
        f"'xquad' (split 'test'), whatever their names: 0 identical documents, "
    )
    assert f"{len(shared)} documents sharing a passage of 50+ words" in run.reason
    assert "of training task 'squad' (split 'train')" in run.reason
    # the same split seed keeps XQuAD's test articles out of SQuAD's train split: evaluated
    split = find_target(config.tasks, config.evaluation, data_dir, "xquad-split").load()
    assert not set(split.document_order) & seen
    assert requirement_problem(INSENT, split, models_dir(data_dir)) is None


def test_a_model_without_training_data_is_reported_as_provenance_unknown_and_refused_when_required(
    project, tmp_path: Path
) -> None:
    from assets.evaluation import run_metadata
    from evaluation.reports.html import render_html
    from evaluation.reports.markdown import render_markdown
    from evaluation.reports.reproduce import build_comparison, reproduce_document

    config, data_dir = project
    save_model(models_dir(data_dir) / "insent_model", None)  # a folder copied without its training_data.json
    target = find_target(config.tasks, config.evaluation, data_dir, "demo")
    evaluation = evaluate_target(
        target, config.evaluation, data_dir, systems=["bm25", "insent"], chunk_sizes=False, **SILENT
    )
    insent, bm25 = evaluation.run("insent"), evaluation.run("bm25")
    assert insent.status == "ok" and bm25.status == "ok"
    assert insent.provenance == "unknown" and bm25.provenance is None
    assert insent.provenance_note.startswith(f"provenance unknown: insent_model has no {TRAINING_DATA_FILE}")

    reports = reports_dir(data_dir)
    written = write_reports([evaluation], reports)
    pages = {name: written[name].read_text() for name in ("report.md", "report.html", "report.json")}
    for name in ("report.md", "report.html", "evaluation.json"):
        pages[f"tasks/demo/{name}"] = (reports / "tasks" / "demo" / name).read_text()
    pages["dagster"] = dagster_markdown_task(evaluation)
    pages["metadata"] = run_metadata(evaluation)["provenance/insent"].value
    comparison, saved = build_comparison(
        reports, "demo", config_shards(dataset_dir(data_dir, "demo"), "queries", "test")[0]
    )
    reproduce = reproduce_document(comparison, saved, [], {})
    pages["reproduce.md"], pages["reproduce.html"] = render_markdown(reproduce), render_html(reproduce)
    for name, page in pages.items():
        assert "provenance unknown" in page, name
    systems_section = pages["tasks/demo/report.md"].split("\n## Systems\n", 1)[1]
    systems_table = systems_section.split("\n## ", 1)[0].split("\n### ", 1)[0].splitlines()  # not the costs
    [insent_row] = [line for line in systems_table if line.startswith("| insent |")]
    [bm25_row] = [line for line in systems_table if line.startswith("| bm25 |")]
    assert insent_row.endswith("| provenance unknown |") and bm25_row.endswith("| – |")

    strict = registry(tmp_path, require_provenance=True).evaluation
    assert strict.require_provenance and not config.evaluation.require_provenance
    evaluation = evaluate_target(
        target, strict, data_dir, systems=["bm25", "insent", "independent"], chunk_sizes=False, **SILENT
    )
    insent, independent = evaluation.run("insent"), evaluation.run("independent")
    assert evaluation.run("bm25").status == "ok"
    assert insent.status == "not_run" and insent.reason.startswith(
        f"refused: provenance unknown: insent_model has no {TRAINING_DATA_FILE}"
    )
    assert "evaluation.require_provenance is true" in insent.reason and insent.provenance == "unknown"
    assert (
        independent.status == "not_run"
        and "offline-minilm (the packaged all-MiniLM-L6-v2) has no" in independent.reason
    )
    assert "Systems not run" in write_reports([evaluation], reports)["report.md"].read_text()

    trained_model(data_dir, dataset_dir(data_dir, "demo"))  # provenance recorded, disjoint from the test split
    evaluation = evaluate_target(target, strict, data_dir, systems=["insent"], chunk_sizes=False, **SILENT)
    assert evaluation.run("insent").status == "ok" and evaluation.run("insent").provenance == "recorded"


def test_an_old_format_training_data_file_is_read_as_ids_only(project, tmp_path: Path) -> None:
    config, data_dir = project
    target = find_target(config.tasks, config.evaluation, data_dir, "demo")
    folder = save_model(models_dir(data_dir) / "insent_model", None)
    train = sorted(doc_ids(dataset_dir(data_dir, "demo"), "train"))
    old = {"tasks": [{"folder": target.path, "task": "demo", "split": "train", "doc_ids": train}]}  # format 1
    (folder / TRAINING_DATA_FILE).write_text(json.dumps(old))
    evaluation = evaluate_target(target, config.evaluation, data_dir, systems=["insent"], chunk_sizes=False, **SILENT)
    run = evaluation.run("insent")
    assert run.status == "ok" and run.provenance == "ids only"
    assert run.provenance_note.startswith(
        f"provenance incomplete (ids only): {folder / TRAINING_DATA_FILE} has format 1: document ids only, "
        "no content fingerprints; overlap with the evaluated corpus was checked on task names, folders and "
        "document ids only"
    )
    report = write_reports([evaluation], reports_dir(data_dir))["tasks/demo/report.md"].read_text()
    assert "| provenance incomplete (ids only) |" in report and "retrain the model to record content" in report
    # its ids still refuse a leaked split; it is refused outright when provenance is required
    test = sorted(doc_ids(dataset_dir(data_dir, "demo"), "test"))
    (folder / TRAINING_DATA_FILE).write_text(json.dumps({"tasks": [{**old["tasks"][0], "doc_ids": train + test}]}))
    assert requirement_problem(INSENT, target.load(), models_dir(data_dir)).startswith(
        f"refused: insent_model was trained on {len(test)} documents of task 'demo'"
    )
    (folder / TRAINING_DATA_FILE).write_text(json.dumps(old))
    strict = registry(tmp_path, require_provenance=True).evaluation
    evaluation = evaluate_target(target, strict, data_dir, systems=["insent"], chunk_sizes=False, **SILENT)
    assert evaluation.run("insent").reason.startswith("refused: provenance incomplete (ids only):")
    (folder / TRAINING_DATA_FILE).write_text(json.dumps({"format": 3, "tasks": []}))
    problem = requirement_problem(INSENT, target.load(), models_dir(data_dir))
    assert (
        problem.startswith("refused: cannot tell which documents insent_model was trained on") and "format 3" in problem
    )


def test_the_recorded_prints_leave_a_disjoint_split_alone(project) -> None:
    """No false refusal: the sample's test documents share no document, chunk or passage with its train split."""
    config, data_dir = project
    trained_model(data_dir, dataset_dir(data_dir, "demo"))
    record = json.loads((models_dir(data_dir) / "insent_model" / TRAINING_DATA_FILE).read_text())
    [entry] = record["tasks"]
    assert record["format"] == 2 and len(entry["documents"]) == len(entry["doc_ids"])
    assert all(document["text"] and document["chunks"] and document["passages"] for document in entry["documents"])
    corpus = find_target(config.tasks, config.evaluation, data_dir, "demo").load()
    assert requirement_problem(INSENT, corpus, models_dir(data_dir)) is None
    documents = published_table(dataset_dir(data_dir, "demo"), "documents", "test")
    assert pc.count_distinct(documents.column("doc_id")).as_py() == corpus.n_documents
