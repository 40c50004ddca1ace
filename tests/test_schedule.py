"""The longest-first order of ``make test`` (tests/support/schedule.py): recorded durations, longest first."""

from __future__ import annotations

from tests.support.schedule import UNTIMED_FIRST, order_key


def ordered(nodeids: list[str], durations: dict[str, float]) -> list[str]:
    indexed = sorted(enumerate(nodeids), key=lambda pair: (*order_key(pair[1], durations), pair[0]))
    return [nodeid for _, nodeid in indexed]


def test_timed_tests_run_longest_first_then_unknown_then_short() -> None:
    durations = {"tests/a.py::short": 0.1, "tests/a.py::long": 40.0, "tests/b.py::medium": 9.0}
    nodeids = ["tests/a.py::short", "tests/c.py::untimed", "tests/b.py::medium", "tests/a.py::long"]
    assert ordered(nodeids, durations) == [
        "tests/a.py::long",
        "tests/b.py::medium",
        "tests/c.py::untimed",
        "tests/a.py::short",
    ]


def test_a_fresh_clone_starts_with_the_slow_modules_in_collection_order() -> None:
    slow = f"{UNTIMED_FIRST[0]}::test_x"
    nodeids = ["tests/x.py::one", slow, "tests/x.py::two"]
    assert ordered(nodeids, {}) == [slow, "tests/x.py::one", "tests/x.py::two"]
    assert ordered(nodeids, {slow: 0.5}) == ["tests/x.py::one", "tests/x.py::two", slow]  # timed: it is short
