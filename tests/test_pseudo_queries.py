"""Offline pseudo-queries (inverse cloze) for documents-only tasks: rules, the published folder, its check, the
evaluation's refusal, and the real State of the Union corpus."""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml
from pydantic import ValidationError

from assets.answerability import split_published
from assets.benchmark import dataset_inputs
from conteb.config import PseudoQueriesConfig, TaskConfig
from conteb.names import Pairing, StageTable
from conteb.published import config_shards
from conteb.schemas import PAIRED_QUERIES
from conteb.storage import read_shards, stage_table_path
from curation import validation
from curation.chunking import chunk_documents
from curation.pseudo_queries import (
    CAPS,
    FILTERS,
    Outcome,
    build_pseudo_queries,
    document_subject,
    pseudo_documents,
    remove_sentences,
    sentence_spans,
    with_sentences_removed,
)
from curation.sources import load_source
from curation.splits import assign_splits
from evaluation.load import CorpusError, corpus_from_tables, load_corpus
from tests.builders import HARBOUR, PROMISE, SPEAKERS, write_speeches
from tests.conftest import materialize_task

PATTERN = r"(?P<year>\d{4})-(?P<speaker>[A-Za-z]+)"
SETTINGS = {
    "per_document": 6,
    "per_chunk": 2,
    "seed": 0,
    "title_pattern": PATTERN,
    "subject": "the {year} address ({speaker})",
    "template": "In {subject}: {sentence}",
}
SUBJECT = re.compile(r"^In the (\d{4}) address \(([A-Za-z]+)\): (.+)$")


def speeches_task(folder: Path, **pseudo: object) -> TaskConfig:
    return TaskConfig.model_validate(
        {
            "name": "speeches",
            "source": {"kind": "text_folder", "path": str(folder)},
            "chunking": {"chunk_size": 400},
            "splits": {"train": 0.5, "test": 0.5, "seed": 0},
            "pseudo_queries": {**SETTINGS, **pseudo},
        }
    )


def build(task: TaskConfig, settings: PseudoQueriesConfig | None = None):
    docs = load_source(task.source).documents_table()
    chunks = chunk_documents(docs, task.chunking).chunks
    settings = settings or task.pseudo_queries
    assert settings is not None
    return docs, chunks, build_pseudo_queries(docs, chunks, pseudo_documents(task, chunks), settings)


# --- rules ---------------------------------------------------------------------------------------


def test_sentences_keep_abbreviations_initials_and_acronyms() -> None:
    text = 'Mr. Speaker, friends:\nWe met Dr. Smith in the U.S. Senate. John F. Kennedy said "go." Then? yes, we left!'
    assert [text[s:e] for s, e in sentence_spans(text)] == [
        "Mr. Speaker, friends:",
        "We met Dr. Smith in the U.S. Senate.",
        'John F. Kennedy said "go."',
        "Then? yes, we left!",
    ]


def test_removal_takes_the_sentence_and_one_side_of_its_whitespace() -> None:
    chunk = "One two. Three four. Five six."
    assert remove_sentences(chunk, [(9, 20)]) == "One two. Five six."
    assert remove_sentences(chunk, [(21, 30)]) == "One two. Three four."
    assert remove_sentences(chunk, [(9, 20), (21, 30)]) == "One two."
    with pytest.raises(ValueError, match="outside the chunk"):
        remove_sentences(chunk, [(25, 40)])


def test_subject_from_the_title_pattern_or_the_title_rule() -> None:
    settings = PseudoQueriesConfig.model_validate(SETTINGS)
    subject = document_subject("1962-Kennedy", "1962-kennedy", settings)
    assert subject is not None and subject.text == "the 1962 address (Kennedy)"
    assert {"1962", "Kennedy"} <= set(subject.variants)
    assert document_subject("Kennedy in 1962", "x", settings) is None  # the whole title must match
    plain = document_subject("Mercury (planet)", "mercury-planet", PseudoQueriesConfig())
    assert plain is not None and plain.text == "Mercury" and "Mercury" in plain.variants


def test_each_filter_refuses_its_sentences(tmp_path: Path) -> None:
    docs, chunks, result = build(speeches_task(write_speeches(tmp_path / "speeches")))
    texts = dict(zip(docs.column("doc_id").to_pylist(), docs.column("text").to_pylist(), strict=True))
    rows = result.sentences.to_pylist()
    first = dict(zip(chunks.column("chunk_id").to_pylist(), chunks.column("chunk_index").to_pylist(), strict=True))

    def outcomes_of(predicate) -> set[str]:  # of the sentences of later chunks
        later = [r for r in rows if r["chunk_id"] is None or first[r["chunk_id"]] > 0]
        return {r["outcome"] for r in later if predicate(texts[r["doc_id"]][r["char_start"] : r["char_end"]])}

    assert outcomes_of(lambda s: s == "(Applause.)") == {Outcome.BOILERPLATE}
    assert outcomes_of(lambda s: s == "Thank you.") == {Outcome.BOILERPLATE}
    assert outcomes_of(lambda s: s == PROMISE) == {Outcome.DUPLICATED}
    assert outcomes_of(lambda s: "thanks the workers" in s) == {Outcome.NAMES_SUBJECT}
    assert {r["outcome"] for r in rows if r["chunk_id"] and first[r["chunk_id"]] == 0} == {Outcome.FIRST_CHUNK}
    counts = result.stats
    outcomes = [str(o) for o in (*FILTERS, *CAPS)]
    assert counts["sentences"] == len(rows) == counts["pseudo_queries"] + sum(counts[o] for o in outcomes)
    assert counts["pseudo_queries"] == result.queries.num_rows > 0


def test_bounds_per_document_and_per_chunk(tmp_path: Path) -> None:
    task = speeches_task(write_speeches(tmp_path / "speeches"), per_document=3, per_chunk=1)
    _, _, result = build(task)
    per_doc = pc.value_counts(result.queries.column("doc_id")).to_pylist()
    per_chunk = pc.value_counts(result.queries.column("chunk_id")).to_pylist()
    assert per_doc and max(entry["counts"] for entry in per_doc) <= 3
    assert max(entry["counts"] for entry in per_chunk) == 1
    assert Outcome.OVER_PER_DOCUMENT in result.sentences.column("outcome").to_pylist()


def test_a_sentence_holding_an_answer_is_never_taken(tmp_path: Path) -> None:
    task = speeches_task(write_speeches(tmp_path / "speeches"))
    docs, chunks, _ = build(task)
    text = docs.column("text")[0].as_py()
    doc_id = docs.column("doc_id")[0].as_py()
    start = text.index(HARBOUR.format(k=3))
    answer = {"query_id": "q", "query": "?", "chunk_id": f"{doc_id}_0", "chunk_ids": [f"{doc_id}_0"],
              "answer": "district 3", "answer_start": start + 22, "answer_end": start + 32, "doc_id": doc_id,
              "pairing": Pairing.SPAN, "source": "f"}  # fmt: skip
    answers = pa.Table.from_pylist([answer], schema=PAIRED_QUERIES)
    result = build_pseudo_queries(docs, chunks, [doc_id], task.pseudo_queries, answers)  # type: ignore[arg-type]
    row = next(r for r in result.sentences.to_pylist() if r["char_start"] == start)
    assert row["outcome"] == Outcome.HOLDS_ANSWER


def test_deterministic_by_seed_and_by_document(tmp_path: Path) -> None:
    task = speeches_task(write_speeches(tmp_path / "speeches"))
    _, _, first = build(task)
    _, _, again = build(task)
    assert first.queries.equals(again.queries) and first.sentences.equals(again.sentences)
    _, _, other_seed = build(task, task.pseudo_queries.model_copy(update={"seed": 1}))  # type: ignore[union-attr]
    assert other_seed.queries.column("query_id").to_pylist() != first.queries.column("query_id").to_pylist()
    # a document's picks depend on the seed and itself only: fewer documents, same picks for those left
    fewer = speeches_task(write_speeches(tmp_path / "fewer", count=5))
    _, _, subset = build(fewer)
    kept = set(subset.queries.column("doc_id").to_pylist())
    mine = first.queries.filter(pc.is_in(first.queries.column("doc_id"), pa.array(sorted(kept))))
    assert kept and mine.column("query_id").to_pylist() == subset.queries.column("query_id").to_pylist()


def test_a_title_that_does_not_match_is_quarantined(tmp_path: Path) -> None:
    folder = write_speeches(tmp_path / "speeches")
    # rename one address of the train split so that its title no longer matches the pattern
    renamed = {f"{1950 + i}-{speaker}": f"{speaker}-{1950 + i}" for i, speaker in enumerate(SPEAKERS)}
    splits = assign_splits([new.lower() for new in renamed.values()], {"train": 0.5, "test": 0.5}, 0)
    old, new = next((old, new) for old, new in renamed.items() if splits[new.lower()] == "train")
    (folder / f"{old}.txt").rename(folder / f"{new}.txt")
    task = speeches_task(folder)
    _, chunks, result = build(task)
    assert new.lower() in pseudo_documents(task, chunks)
    [record] = result.quarantine
    assert record.doc_id == new.lower() and record.reason == "title_unmatched" and repr(PATTERN) in record.detail
    assert new.lower() not in result.queries.column("doc_id").to_pylist()
    assert result.stats["documents_quarantined"] == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"splits": None}, "split 'train' is not declared"),
        ({"pseudo_queries": {"split": "test"}}, "is the split the evaluation reads"),
        ({"reformulation": True}, "not together with reformulation"),
        ({"pairing": "llm"}, "not together with pairing: llm"),
        ({"pseudo_queries": {"subject": "{speaker}"}}, r"unknown placeholder\(s\) \['speaker'\]"),
        ({"pseudo_queries": {"template": "{subject}?"}}, "exactly the placeholders"),
        ({"pseudo_queries": {"template": "{subject} {sentence"}}, "template: expected '}' before end of string"),
        ({"pseudo_queries": {"title_pattern": "(?P<year>"}}, "title_pattern: not a regular expression"),
        ({"pseudo_queries": {"title_pattern": "(?P<title>.*)"}}, "taken by the subject's own placeholders"),
        ({"pseudo_queries": {"min_words": 9, "max_words": 8}}, "must not exceed"),
        ({"pseudo_queries": {"per_doc": 3}}, "Extra inputs"),
    ],
)
def test_registry_refuses_pseudo_queries_that_could_reach_an_evaluation(change: dict, message: str) -> None:
    base = {"name": "t", "source": {"kind": "text_folder", "path": "."}, "splits": {"train": 0.5, "test": 0.5}}
    raw = {key: value for key, value in {**base, "pseudo_queries": {}, **change}.items() if value is not None}
    with pytest.raises(ValidationError, match=message):
        TaskConfig.model_validate(raw)


# --- the published folder, its check, training and evaluation -------------------------------------


@pytest.fixture
def published(tmp_path: Path, isolated_env: Path) -> tuple[Path, dg.ExecuteInProcessResult]:
    write_speeches(tmp_path / "speeches")
    task = {
        "name": "speeches",
        "source": {"kind": "text_folder", "path": "speeches"},
        "chunking": {"chunk_size": 400},
        "splits": {"train": 0.5, "test": 0.5, "seed": 0},
        "pseudo_queries": SETTINGS,
    }
    config_path = tmp_path / "conteb.yaml"
    config_path.write_text(yaml.safe_dump({"tasks": [task]}, sort_keys=False))
    result, _ = materialize_task(config_path)
    assert result.success
    return isolated_env / "conteb" / "speeches", result


def test_published_pseudo_queries_in_train_with_their_sentences_cut(
    published: tuple[Path, dg.ExecuteInProcessResult], isolated_env: Path
) -> None:
    folder, result = published
    evaluations = {ev.check_name: ev.passed for ev in result.get_asset_check_evaluations()}
    assert evaluations["pseudo_queries_only_in_training_split"] and all(evaluations.values()), evaluations
    queries = read_shards(config_shards(folder, "queries", "train"))
    docs = read_shards(config_shards(folder, "documents", "train")).to_pylist()
    assert config_shards(folder, "queries", "test") == []  # the test split has no queries at all
    test_docs = set(read_shards(config_shards(folder, "documents", "test")).column("doc_id").to_pylist())
    by_id = {row["chunk_id"]: row for row in docs}
    stage = pq.read_table(stage_table_path(isolated_env, "speeches", StageTable.PSEUDO_QUERIES))
    assert queries.num_rows == stage.num_rows > 0
    for row in queries.to_pylist():
        assert row["pairing"] == "pseudo" and row["source"] == "pseudo" and row["doc_id"] not in test_docs
        gold = by_id[row["chunk_id"]]
        assert gold["chunk_index"] >= 1
        local = row["answer_start"] - gold["char_start"], row["answer_end"] - gold["char_start"]
        assert gold["og_chunk"][local[0] : local[1]] == row["answer"]  # gold = the sentence's chunk, offsets true
        assert row["answer"] not in gold["chunk"]  # gone from the training copy
        match = SUBJECT.match(row["query"])
        assert match is not None and match.group(3) == row["answer"]
        assert gold["doc_id"] == f"{match.group(1)}-{match.group(2).lower()}"  # the subject is the document's
    changed = {row["chunk_id"] for row in docs if row["chunk"] != row["og_chunk"]}
    assert changed == set(queries.column("chunk_id").to_pylist())
    card = (folder / "README.md").read_text()
    assert "## Pseudo-queries (inverse cloze)" in card and "Lee, Chang and Toutanova 2019" in card
    assert f"| pseudo queries | {queries.num_rows:,} |" in card
    [materialization] = [
        m
        for m in result.asset_materializations_for_node("speeches__pseudo_queries")
        if m.asset_key.path[-1] == StageTable.PSEUDO_QUERIES
    ]
    metadata = materialization.metadata
    assert metadata["count/pseudo_queries"].value == queries.num_rows
    assert metadata["count/sentences"].value > queries.num_rows
    with pytest.raises(CorpusError, match=r"pseudo-queries \(pairing 'pseudo'"):
        load_corpus(folder, name="speeches", split="train")


def test_the_check_fails_when_a_pseudo_query_is_in_an_evaluated_split() -> None:
    row = {"query_id": "pseudo-a-10", "query": "In a: b.", "chunk_id": "a_1", "chunk_ids": ["a_1"], "doc_id": "a",
           "pairing": "pseudo", "source": "pseudo"}  # fmt: skip
    pseudo = pa.Table.from_pylist([row], schema=PAIRED_QUERIES)
    empty = PAIRED_QUERIES.empty_table()
    assert validation.pseudo_queries_only_in({"train": pseudo, "test": empty}, "train").passed
    failed = validation.pseudo_queries_only_in({"train": empty, "test": pseudo}, "train")
    assert not failed.passed and failed.failures == 1 and "split 'test'" in failed.examples[0]
    assert not validation.pseudo_queries_only_in({"test": pseudo}, None).passed  # a task without pseudo_queries


def test_the_evaluation_refuses_pseudo_queries() -> None:
    docs = pa.table({"chunk_id": ["a_0", "a_1"], "chunk": ["x", "y"]})
    queries = pa.table({"query_id": ["q1", "p1"], "query": ["x?", "In a: y."], "chunk_id": ["a_0", "a_1"],
                        "pairing": ["span", "pseudo"]})  # fmt: skip
    with pytest.raises(CorpusError, match=r"1 of the 2 queries of split 'test' are pseudo-queries.*'p1'"):
        corpus_from_tables(docs, queries, name="t", source="t", split="test")
    corpus = corpus_from_tables(docs, queries.slice(0, 1), name="t", source="t", split="test")
    assert corpus.query_ids == ["q1"]


def test_answerability_never_judges_pseudo_queries(tmp_path: Path) -> None:
    task = speeches_task(write_speeches(tmp_path / "speeches"))
    _, chunks, result = build(task)
    assert set(dataset_inputs(task)) >= {"pseudo_queries", "pseudo_sentences", StageTable.PSEUDO_QUARANTINE}
    gold = result.queries.column("chunk_id")[0].as_py()
    row = {"query_id": "q", "query": "Where?", "chunk_id": gold, "chunk_ids": [gold], "doc_id": gold.split("_")[0],
           "pairing": Pairing.SPAN, "source": "f"}  # fmt: skip
    span = pa.Table.from_pylist([row], schema=PAIRED_QUERIES)
    split = split_published(task)({"chunks": chunks, "span_queries": span, "pseudo_queries": result.queries}, 100)
    judged = [qid for _, tables in split.shards for qid in tables["queries"].column("query_id").to_pylist()]
    assert result.queries.num_rows > 0 and judged == ["q"]
    [(_, tables)] = split.shards  # the span query is judged on its gold chunk as trained on: the sentences cut
    assert tables["documents"].column("chunk")[0].as_py() != tables["documents"].column("og_chunk")[0].as_py()


def test_training_copy_refuses_a_stale_pseudo_table(tmp_path: Path) -> None:
    from curation.dataset import conteb_documents

    task = speeches_task(write_speeches(tmp_path / "speeches"))
    _, chunks, result = build(task)
    shifted = result.queries.set_column(
        result.queries.schema.get_field_index("answer_start"),
        "answer_start",
        pc.add(result.queries.column("answer_start"), 1),
    )
    with pytest.raises(ValueError, match="the pseudo_queries table is stale"):
        with_sentences_removed(conteb_documents(chunks), shifted)


# --- the real State of the Union addresses ----------------------------------------------------------


def test_state_of_the_union_pseudo_queries(shared_data: Path) -> None:
    folder = shared_data / "sotu"
    if not folder.is_dir():
        pytest.skip(f"{folder} is missing")
    task = TaskConfig.model_validate(
        {
            "name": "sotu",
            "source": {"kind": "text_folder", "path": str(folder)},
            "splits": {"train": 0.5, "test": 0.5, "seed": 0},
            "pseudo_queries": {
                "per_document": 20,
                "seed": 0,
                "title_pattern": r"(?P<year>\d{4})-(?P<president>[A-Za-z]+)(?:-\d+)?",
                "subject": "the {year} State of the Union address ({president})",
                "template": "In {subject}: {sentence}",
            },
        }
    )
    docs, chunks, result = build(task)
    train = set(pseudo_documents(task, chunks))
    assignment = assign_splits(chunks.column("doc_id").to_pylist(), {"train": 0.5, "test": 0.5}, 0)
    assert train == {doc for doc, split in assignment.items() if split == "train"}
    queries = result.queries.to_pylist()
    per_doc = pc.value_counts(result.queries.column("doc_id")).to_pylist()
    assert {entry["values"] for entry in per_doc} == train  # every address of the split has some
    assert max(entry["counts"] for entry in per_doc) <= 20 and not result.quarantine
    titles = dict(zip(docs.column("doc_id").to_pylist(), docs.column("title").to_pylist(), strict=True))
    for row in queries:
        year, president = titles[row["doc_id"]].split("-")[:2]
        assert row["query"].startswith(f"In the {year} State of the Union address ({president}): ")
        assert year not in row["answer"] and president.lower() not in row["answer"].lower()
    counts = result.stats
    filtered = sum(counts[str(o)] for o in FILTERS)
    print(
        f"\nSOTU: {len(queries)} pseudo-queries over {len(train)} train addresses "
        f"({len(queries) / len(train):.1f} per address), {counts['sentences']} sentences, "
        f"{filtered / counts['sentences']:.1%} filtered: "
        + ", ".join(f"{o}: {counts[str(o)]}" for o in Outcome if o != Outcome.SELECTED and counts.get(str(o)))
    )
    texts = {row["chunk_id"]: row["og_chunk"] for row in chunks.to_pylist()}
    for row in queries[:: max(1, len(queries) // 5)][:5]:
        print(f"  {row['query']}\n    gold {row['chunk_id']}: {' '.join(texts[row['chunk_id']].split()[:12])} ...")
