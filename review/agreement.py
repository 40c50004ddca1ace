"""Inter-reviewer agreement of a review queue: observed agreement and Cohen's kappa (pure).

Contract: given, per item, each reviewer's decision label (accept/reject/edit), the pair of
reviewers sharing the most items is chosen (ties: alphabetical order of the pair); over the items
both decided, ``observed`` is the fraction with the same label and ``kappa`` is Cohen's kappa over
:data:`review.model.ACTIONS`, None when undefined (chance agreement of 1). No pair: ``items=0``,
``reviewers=None``, ``observed=0.0``, ``kappa=None``.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from review.model import ACTIONS


@dataclass(frozen=True)
class Agreement:
    """Inter-reviewer agreement of one queue over the items both reviewers of ``reviewers`` decided.

    ``observed`` is the fraction of those items with the same action (0.0 when ``items == 0``);
    ``kappa`` is Cohen's kappa over accept/reject/edit, None when undefined (no pair, or chance
    agreement of 1).
    """

    task: str
    kind: str
    items: int
    reviewers: tuple[str, str] | None
    observed: float
    kappa: float | None


def cohen_kappa(pairs: Sequence[tuple[str, str]], labels: Sequence[str] = ACTIONS) -> tuple[float, float | None]:
    """``(observed agreement, Cohen's kappa)`` of two raters' ``pairs`` of labels (at least one pair); kappa
    is None when chance agreement is 1."""
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    count_a = Counter(a for a, _ in pairs)
    count_b = Counter(b for _, b in pairs)
    chance = sum(count_a[label] * count_b[label] for label in labels) / (n * n)
    kappa = None if chance >= 1.0 - 1e-12 else (observed - chance) / (1.0 - chance)
    return observed, kappa


def queue_agreement(task: str, kind: str, labels: Mapping[str, Mapping[str, str]]) -> Agreement:
    """Agreement of the reviewer pair sharing the most items of ``labels`` (item -> reviewer -> action)."""
    shared: Counter[tuple[str, str]] = Counter()
    for by_reviewer in labels.values():
        shared.update(itertools.combinations(sorted(by_reviewer), 2))
    if not shared:
        return Agreement(task=task, kind=kind, items=0, reviewers=None, observed=0.0, kappa=None)
    pair = min(shared, key=lambda key: (-shared[key], key))
    first, second = pair
    pairs = [(by[first], by[second]) for by in labels.values() if first in by and second in by]
    observed, kappa = cohen_kappa(pairs)
    return Agreement(task=task, kind=kind, items=len(pairs), reviewers=pair, observed=observed, kappa=kappa)
