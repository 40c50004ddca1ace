"""Longest test files first: the order that keeps ``pytest -n`` (``make test``) from ending on one long file.

``make test`` runs ``pytest -n N --dist loadfile``: each test file goes whole to one xdist worker, so its
module-scoped fixtures (a Celery cluster, a trained tiny model, a loaded encoder) are built once, not once per
worker, and the workers take the files in collection order. A long file collected last would then run alone at
the end while the other workers idle. This plugin (registered in ``tests/conftest.py``) records every test's
duration (setup, call and teardown) in pytest's cache (``.pytest_cache``, key :data:`CACHE_KEY`) and, on the next
run, orders the files by their recorded total, longest first (Graham's LPT rule), the tests of each file in their
collection order. The durations are those of :data:`COMMITTED` (``tests/durations.json``, in the repository, so a
fresh clone starts in a good order; ``make test-durations`` rewrites it), overlaid with the local cache's; the
order depends only on those two files, so every xdist worker collects the same order, as xdist requires. A file
never timed counts 0 s (it runs with the short ones until ``make test-durations`` times it).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

CACHE_KEY = "conteb/durations"
COMMITTED = Path(__file__).resolve().parents[1] / "durations.json"  # tests/durations.json
SAVE_OPTION = "--save-durations"


def file_of(nodeid: str) -> str:
    """``tests/x.py`` of ``tests/x.py::test_y[param]``."""
    return nodeid.split("::", 1)[0]


def file_seconds(nodeids: list[str], durations: dict[str, float]) -> dict[str, float]:
    """Expected seconds of each file of ``nodeids``: the sum of its tests' recorded durations (0 for a test never
    timed)."""
    totals: dict[str, float] = defaultdict(float)
    for nodeid in nodeids:
        totals[file_of(nodeid)] += durations.get(nodeid, 0.0)
    return totals


def longest_files_first(nodeids: list[str], durations: dict[str, float]) -> list[int]:
    """The indices of ``nodeids`` in run order: files by decreasing :func:`file_seconds` (ties: the file's first
    position), each file's tests in their given order."""
    seconds = file_seconds(nodeids, durations)
    first_seen: dict[str, int] = {}
    for index, nodeid in enumerate(nodeids):
        first_seen.setdefault(file_of(nodeid), index)

    def key(index: int) -> tuple[float, int, int]:
        path = file_of(nodeids[index])
        return (-seconds[path], first_seen[path], index)

    return sorted(range(len(nodeids)), key=key)


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--save-durations``: write this run's durations (of the tests it ran: run the whole suite) to
    :data:`COMMITTED`."""
    parser.addoption(SAVE_OPTION, action="store_true", help=f"write the tests' durations to {COMMITTED.name}")


class LongestFirst:
    """The plugin: reorders the collection, and records the durations of the run (on the controller, or alone)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.durations: dict[str, float] = {}

    def _committed(self) -> dict[str, float]:
        return json.loads(COMMITTED.read_text(encoding="utf-8")) if COMMITTED.is_file() else {}

    def _cached(self) -> dict[str, float]:
        cache = getattr(self.config, "cache", None)
        return dict(cache.get(CACHE_KEY, {})) if cache is not None else {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        durations = {**self._committed(), **self._cached()}
        order = longest_files_first([item.nodeid for item in items], durations)
        items[:] = [items[index] for index in order]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workerinput") or not self.durations:
            return  # an xdist worker: its reports reach the controller, which records them
        rounded = {nodeid: round(seconds, 3) for nodeid, seconds in self.durations.items()}
        cache = getattr(self.config, "cache", None)
        if cache is not None:
            cache.set(CACHE_KEY, {**self._cached(), **rounded})
        if self.config.getoption(SAVE_OPTION):  # this run's tests only: run it on the whole suite
            COMMITTED.write_text(json.dumps(dict(sorted(rounded.items())), indent=0) + "\n", encoding="utf-8")
