"""Counts in the stages' log lines are words, not Python dicts (assets/metadata.py ``counts_in_words``)."""

from __future__ import annotations

from assets.metadata import counts_in_words


def test_counts_read_as_words_in_their_order() -> None:
    stats = {"accepted": 98, "edited": 0, "rejected": 0, "not_reviewed": 30}
    assert counts_in_words(stats) == "98 accepted, 0 edited, 0 rejected, 30 not reviewed"
    assert counts_in_words({}) == "none"
