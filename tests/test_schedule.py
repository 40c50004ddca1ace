"""The longest-files-first order of ``make test`` (tests/support/schedule.py)."""

from __future__ import annotations

from tests.support.schedule import longest_files_first


def ordered(nodeids: list[str], durations: dict[str, float]) -> list[str]:
    return [nodeids[index] for index in longest_files_first(nodeids, durations)]


def test_files_run_longest_first_each_in_its_own_order() -> None:
    durations = {"tests/a.py::one": 0.1, "tests/a.py::two": 0.2, "tests/b.py::slow": 9.0, "tests/b.py::fast": 0.1}
    nodeids = ["tests/a.py::one", "tests/c.py::untimed", "tests/a.py::two", "tests/b.py::fast", "tests/b.py::slow"]
    assert ordered(nodeids, durations) == [
        "tests/b.py::fast",  # b: 9.1 s in all, its tests in collection order
        "tests/b.py::slow",
        "tests/a.py::one",  # a: 0.3 s
        "tests/a.py::two",
        "tests/c.py::untimed",  # never timed, not a known slow file: 0 s
    ]


def test_a_file_without_durations_keeps_its_place_among_the_untimed() -> None:
    nodeids = ["tests/x.py::one", "tests/y.py::slow", "tests/x.py::two"]
    assert ordered(nodeids, {}) == ["tests/x.py::one", "tests/x.py::two", "tests/y.py::slow"]  # files kept whole
    assert ordered(nodeids, {"tests/y.py::slow": 30.0}) == ["tests/y.py::slow", "tests/x.py::one", "tests/x.py::two"]
