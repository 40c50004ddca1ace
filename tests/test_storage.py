from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conteb.storage import atomic_path, dataset_dir, resolve_data_dir, stage_dir, write_parquet_atomic


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
