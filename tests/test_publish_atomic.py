"""A task folder changes in one step for every reader, and ``datasets``' cache serves the rows on disk now.

The kill test republishes the sample (chunked at 1000, then at 300 characters: the same chunk ids name other texts)
in a real subprocess that SIGKILLs itself before each file operation of the publish in turn
(:func:`tests.support.publish_child.kill_before`, an audit hook: nothing in the code under test), and reads the folder
after each kill with ``datasets.load_dataset`` (its default cache) and with ``conteb evaluate``'s loader
(:func:`evaluation.load.load_corpus`).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from cli.main import main
from conteb.published import (
    CARD,
    CardError,
    PublishRefused,
    card_quarantine,
    config_shards,
    foreign_files,
    named_files,
    unnamed_files,
)
from evaluation.load import CorpusError, load_corpus
from tests.conftest import ROOT, SAMPLE_DIR
from tests.support.publish_child import publish, write_table_sets

OLD, NEW = 1000, 300  # chunk sizes: 128 and 420 chunks; every answer lies inside its gold chunk at both
SPLITS = ("train", "test")
Version = dict[str, tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]]


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample's chunks and queries at both chunk sizes, built once."""
    root = tmp_path_factory.mktemp("publish-tables")
    write_table_sets(SAMPLE_DIR, root, (OLD, NEW))
    return root


@pytest.fixture
def default_cache(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``datasets``' default cache (no ``cache_dir`` argument) under this test's ``HF_HOME``: ``datasets`` reads the
    variable once at import, so the module setting is pointed there as the import would have."""
    import datasets

    cache = Path(os.environ["HF_HOME"]) / "datasets"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    monkeypatch.setattr(datasets.config, "DOWNLOADED_DATASETS_PATH", cache / "downloads")
    return cache


def read_with_datasets(folder: Path, **options: object) -> Version:
    """Every split as ``datasets.load_dataset(folder, config, split=split)`` returns it (default cache), checked:
    every query's gold chunk exists and holds its answer."""
    import datasets

    version: Version = {}
    for split in SPLITS:
        documents = datasets.load_dataset(str(folder), "documents", split=split, **options)
        queries = datasets.load_dataset(str(folder), "queries", split=split, **options)
        text = dict(zip(documents["chunk_id"], documents["chunk"], strict=True))
        for query in queries:
            assert query["chunk_id"] in text, f"{split}: {query['query_id']}: gold {query['chunk_id']} missing"
            assert query["answer"] in text[query["chunk_id"]], f"{split}: {query['query_id']}: answer not in its gold"
        version[split] = (
            tuple(sorted(text.items())),
            tuple(sorted(zip(queries["query_id"], queries["chunk_id"], strict=True))),
        )
    return version


def read_with_evaluate(folder: Path) -> Version:
    """Every split as ``conteb evaluate`` loads it (which refuses a gold chunk missing from the documents)."""
    version: Version = {}
    for split in SPLITS:
        corpus = load_corpus(folder, name="sample", split=split)
        golds = [corpus.chunk_ids[index] for index in corpus.gold]
        version[split] = (
            tuple(sorted(zip(corpus.chunk_ids, corpus.chunks, strict=True))),
            tuple(sorted(zip(corpus.query_ids, golds, strict=True))),
        )
    return version


def files_of(folder: Path) -> set[Path]:
    return {path for path in folder.rglob("*") if path.is_file()}


def named_by_card(folder: Path) -> set[Path]:
    """The card and every file it names (the configs' data files and the quarantine tables)."""
    return {folder / CARD} | named_files(folder)


def run_child(tables: Path, folder: Path, chunk_size: int, kill_at: int) -> int:
    """Publish in a subprocess that SIGKILLs itself before its ``kill_at``-th operation changing ``folder``."""
    command = [sys.executable, "-m", "tests.support.publish_child", str(tables), str(folder), str(chunk_size)]
    return subprocess.run([*command, str(kill_at)], cwd=ROOT, capture_output=True, timeout=120).returncode


def test_a_publish_killed_at_any_file_operation_leaves_the_old_or_the_new_dataset(
    tables: Path, tmp_path: Path, default_cache: Path
) -> None:
    references = {}
    for size in (OLD, NEW):
        publish(tables, tmp_path / f"reference-{size}" / "sample", size)
        references[size] = read_with_datasets(tmp_path / f"reference-{size}" / "sample")
        assert read_with_evaluate(tmp_path / f"reference-{size}" / "sample") == references[size]
    assert references[OLD] != references[NEW]
    pristine = tmp_path / f"reference-{OLD}" / "sample"
    folder = tmp_path / "data" / "sample"
    seen = []
    for kill_at in range(1, 60):
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(pristine, folder)
        code = run_child(tables, folder, NEW, kill_at)
        if code == 0:
            break
        assert code == -9, f"kill point {kill_at}: the publish exited {code}, not by SIGKILL"
        loaded = read_with_datasets(folder)
        version = next((size for size, reference in references.items() if reference == loaded), None)
        assert version is not None, f"kill point {kill_at}: datasets reads neither the old nor the new dataset"
        assert read_with_evaluate(folder) == references[version], f"kill point {kill_at}: conteb evaluate differs"
        refused = pq.read_table(card_quarantine(folder)["chunking"]).column("object_id").to_pylist()
        assert refused == [f"blank-{version}"], f"kill point {kill_at}: the quarantine table is another version's"
        seen.append(version)
        publish(tables, folder, NEW)  # the next publish succeeds and leaves only what its card names
        assert read_with_datasets(folder) == references[NEW]
        assert files_of(folder) == named_by_card(folder) and unnamed_files(folder) == []
    else:
        pytest.fail("the publish never completed")
    # 4 data files and the chunking quarantine table (temporary created, written, renamed), the card (the same), then
    # the 5 old files removed
    assert len(seen) == 23 and seen == [OLD] * 18 + [NEW] * 5, seen
    assert read_with_datasets(folder) == references[NEW] and files_of(folder) == named_by_card(folder)


def test_status_names_leftovers_and_a_card_naming_a_missing_file(tables: Path, isolated_env: Path) -> None:
    folder = isolated_env / "conteb" / "sample"
    publish(tables, folder, OLD)
    assert run_child(tables, folder, NEW, 6) == -9  # killed before the second new data file's rename, before the card
    status = CliRunner().invoke(main, ["--config", str(ROOT / "conteb.yaml"), "status"])
    lines = status.output.splitlines()
    assert f"{folder}  [128 chunks, 195 queries]" in lines[2], status.output  # the old dataset, whole
    assert (
        lines[4]
        .strip()
        .startswith("leftovers of an interrupted publish: 2 file(s) no dataset card names (e.g. documents/.test-")
    ), status.output  # the new train file and the temporary of the test file

    named = min(path for path in named_by_card(folder) - {folder / CARD} if path.parent.name == "documents")
    named.unlink()
    status = CliRunner().invoke(main, ["--config", str(ROOT / "conteb.yaml"), "status"])
    assert f"[not built: {folder / CARD}: names {named.relative_to(folder)} (1 missing file(s))" in status.output
    assert "128 chunks" not in status.output


def test_datasets_default_cache_returns_the_rows_on_disk_now(tables: Path, tmp_path: Path, default_cache: Path) -> None:
    import datasets

    first, second = tmp_path / "a" / "sample", tmp_path / "b" / "sample"
    publish(tables, first, OLD)
    publish(tables, second, NEW)
    rows = {size: pq.read_table(tables / str(size) / "chunks.parquet").num_rows for size in (OLD, NEW)}

    def chunks(folder: Path, **options: object) -> int:
        return sum(len(datasets.load_dataset(str(folder), "documents", split=s, **options)) for s in SPLITS)

    assert chunks(first) == rows[OLD]
    assert chunks(second) == rows[NEW]  # the same task name in another folder: its own rows
    publish(tables, first, NEW)
    assert chunks(first) == rows[NEW]  # a republish: the new rows
    publish(tables, first, OLD)
    assert chunks(first) == rows[OLD]
    publish(tables, first, NEW)  # with fixed names the cached split sizes were OLD's: NonMatchingSplitsSizesError
    assert chunks(first, download_mode="force_redownload") == rows[NEW]
    assert chunks(first) == rows[NEW]


def test_a_first_publish_killed_before_its_card_is_no_dataset_and_is_cleaned_up(tables: Path, tmp_path: Path) -> None:
    folder = tmp_path / "sample"
    # the folder made, documents/ and its two files, queries/ and a temporary: killed before writing it, no card yet
    assert run_child(tables, folder, OLD, 11) == -9
    leftovers = unnamed_files(folder)
    assert len(leftovers) == 3 and not (folder / CARD).exists()  # and the queries' temporary
    assert config_shards(folder, "documents", "train") == []  # content-named files without a card are not read
    with pytest.raises(CorpusError, match="cannot load config 'documents'"):
        load_corpus(folder, name="sample", split="train")
    publish(tables, folder, OLD)
    assert files_of(folder) == named_by_card(folder)  # the temporary is gone; the same content's files are reused
    assert [path for path in leftovers if path.exists()] == sorted(named_by_card(folder) & set(leftovers))


def test_a_card_naming_a_file_outside_its_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "sample"
    folder.mkdir()
    (folder / CARD).write_text(
        "---\nconfigs:\n- config_name: documents\n  data_files:\n  - split: test\n    path: ../elsewhere.parquet\n---\n"
    )
    with pytest.raises(CardError, match=r"README.md: data file '../elsewhere.parquet' is outside the dataset folder"):
        config_shards(folder, "documents", "test")


def test_a_reader_overtaken_by_a_publish_reads_the_new_card(
    tables: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the card read and the file read, another publish commits and removes the files just listed."""
    import conteb.published as published

    folder = tmp_path / "sample"
    publish(tables, folder, OLD)
    real_read = published.read_shards
    overtaken = []

    def read_after_a_publish(files: list[Path]) -> pa.Table:
        if not overtaken:
            overtaken.append(files)
            publish(tables, folder, NEW)  # a real publish, committed while this reader holds the old list
        return real_read(files)

    monkeypatch.setattr(published, "read_shards", read_after_a_publish)
    found = published.read_config(folder, "documents", "test")
    assert found is not None and overtaken and not overtaken[0][0].exists()
    assert found[1] == config_shards(folder, "documents", "test") and found[0].num_rows == real_read(found[1]).num_rows
    assert set(found[0].column("chunk_id").to_pylist()) == set(
        pq.read_table(found[1][0]).column("chunk_id").to_pylist()
    )


def test_a_republish_removes_only_its_own_files_and_readers_read_only_the_card(
    tables: Path, tmp_path: Path, default_cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A user's notes and a stray parquet in ``documents/`` survive a republish (named in a warning each) and are
    never read; the files the replaced card named go, a fixed name of an older layout included."""
    import datasets

    folder = tmp_path / "sample"
    publish(tables, folder, OLD)
    old = named_files(folder)
    renamed = min(path for path in old if path.parent.name == "documents" and path.name.startswith("test-"))
    renamed.rename(folder / "documents" / "test.parquet")  # a card of an older layout named fixed names
    card = folder / CARD
    card.write_text(card.read_text().replace(str(renamed.relative_to(folder)), "documents/test.parquet"))
    notes, stray = folder / "documents" / "NOTES.txt", folder / "documents" / "test-00000-of-00001.parquet"
    notes.write_text("my notes\n")
    shutil.copyfile(min(path for path in old if path.name.startswith("train-")), stray)  # hub-style name, rows
    lookalike = folder / "documents" / "train-0123456789abcdef.parquet"  # named as ours, its bytes say otherwise
    lookalike.write_text("mine\n")
    with caplog.at_level(logging.WARNING, logger="conteb.published"):
        published = publish(tables, folder, NEW)
    assert notes.read_text() == "my notes\n" and stray.is_file() and lookalike.read_text() == "mine\n"
    assert not (folder / "documents" / "test.parquet").exists() and not any(path.exists() for path in old)
    assert sorted(record.getMessage() for record in caplog.records) == [
        f"left in place: documents/{name} (not written by conteb)" for name in ("NOTES.txt", stray.name, lookalike.name)
    ]
    assert unnamed_files(folder) == [] and foreign_files(folder) == [notes, stray, lookalike]
    for split in SPLITS:  # the stray's rows would be the test split's (the card names no glob)
        rows = published.split_counts[split]["chunks"]
        assert len(datasets.load_dataset(str(folder), "documents", split=split)) == rows, split
        assert sum(pq.read_metadata(path).num_rows for path in config_shards(folder, "documents", split)) == rows


def test_a_folder_or_config_folder_that_is_a_symbolic_link_is_refused(tables: Path, tmp_path: Path) -> None:
    folder = tmp_path / "sample"
    publish(tables, folder, OLD)
    elsewhere = tmp_path / "elsewhere"
    (folder / "documents").rename(elsewhere)
    (elsewhere / "NOTES.txt").write_text("mine\n")
    (folder / "documents").symlink_to(elsewhere)
    before = {path.name: path.read_bytes() for path in elsewhere.iterdir()}
    card = (folder / CARD).read_bytes()
    with pytest.raises(PublishRefused) as refused:
        publish(tables, folder, NEW)
    assert str(refused.value).startswith(f"{folder / 'documents'}: is a symbolic link (to {elsewhere})")
    assert "\n" not in str(refused.value)
    assert {path.name: path.read_bytes() for path in elsewhere.iterdir()} == before
    assert (folder / CARD).read_bytes() == card

    (folder / "documents").unlink()
    (folder / "documents").mkdir()
    link = tmp_path / "linked"
    link.symlink_to(folder)
    with pytest.raises(PublishRefused, match=f"^{link}: is a symbolic link"):
        publish(tables, link, NEW)
    assert (folder / CARD).read_bytes() == card
