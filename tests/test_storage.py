from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conteb.published import config_shards, config_splits
from conteb.storage import (
    PUBLISHED_CONFIGS,
    atomic_path,
    dataset_dir,
    read_shards,
    resolve_data_dir,
    shard_split,
    stage_dir,
    write_parquet_atomic,
)


def test_a_crash_mid_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out" / "t.parquet"
    write_parquet_atomic(pa.table({"x": [1, 2]}), target)
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_bytes(b"half a parquet file")
        raise RuntimeError("killed")
    assert pq.read_table(target).column("x").to_pylist() == [1, 2]
    assert [p.name for p in target.parent.iterdir()] == ["t.parquet"]


def test_data_dir_defaults_beside_the_registry_and_env_overrides(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("CONTEB_DATA_DIR")
    assert resolve_data_dir(tmp_path) == (tmp_path / "data").resolve()
    monkeypatch.setenv("CONTEB_DATA_DIR", str(tmp_path / "elsewhere"))
    assert resolve_data_dir(tmp_path) == (tmp_path / "elsewhere").resolve()
    assert dataset_dir(Path("/d"), "squad") == Path("/d/conteb/squad")
    assert stage_dir(Path("/d"), "squad") == Path("/d/stages/squad")


@pytest.mark.parametrize(
    ("name", "split"),
    [
        ("test-00000-of-00001.parquet", "test"),
        ("test.parquet", "test"),
        ("train-00001-of-00004-5a8fbd2b.parquet", "train"),  # hub shards with a suffix after the count
        ("test-hard-00000-of-00001.parquet", "test-hard"),  # not a shard of "test"
        ("dev.v2.parquet", "dev.v2"),
        ("notes.txt", "notes"),
    ],
)
def test_shard_split(name: str, split: str) -> None:
    assert shard_split(Path("documents") / name) == split


def test_a_folder_without_a_card_is_read_by_its_shard_names(tmp_path: Path) -> None:
    assert PUBLISHED_CONFIGS == ("documents", "queries", "synthetic_queries")
    ours = tmp_path / "ours"  # no card: shards by name; a content-named file of ours (an uncommitted publish) is not
    for split, values in (("test", [1, 2]), ("train", [3])):
        write_parquet_atomic(pa.table({"x": values}), ours / "documents" / f"{split}-00000-of-00001.parquet")
    write_parquet_atomic(pa.table({"x": [9]}), ours / "documents" / "test-hard-00000-of-00001.parquet")
    write_parquet_atomic(pa.table({"x": [7]}), ours / "documents" / "test-0123456789abcdef.parquet")
    assert config_shards(ours, "documents", "test") == [ours / "documents" / "test-00000-of-00001.parquet"]
    assert len(config_shards(ours, "documents", None)) == 3 and config_shards(ours, "queries", "test") == []
    assert config_splits(ours) == ("test", "test-hard", "train")

    hub = tmp_path / "hub"  # the hub's layout: data/<config>/, several shards of one split, one plain file
    write_parquet_atomic(pa.table({"x": [1]}), hub / "data" / "documents" / "test-00000-of-00002-ab12.parquet")
    write_parquet_atomic(
        pa.table({"x": [2], "y": ["b"]}), hub / "data" / "documents" / "test-00001-of-00002-cd34.parquet"
    )
    write_parquet_atomic(pa.table({"x": [3]}), hub / "data" / "queries" / "test.parquet")
    shards = config_shards(hub, "documents", "test")
    assert [path.name for path in shards] == ["test-00000-of-00002-ab12.parquet", "test-00001-of-00002-cd34.parquet"]
    table = read_shards(shards)
    assert table.column("x").to_pylist() == [1, 2] and table.column("y").to_pylist() == [None, "b"]
    assert config_splits(hub, "queries") == ("test",)
    with pytest.raises(ValueError, match="at least one file"):
        read_shards([])
