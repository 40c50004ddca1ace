"""Agreement between the people reviewing a review queue: observed agreement and Cohen's kappa (pure).

Contract: given, per item, each reviewer's decision label (accept/reject/edit), decisions by the pipeline's
automatic reviewer (``auto``, ``auto:<method>``: :func:`review.model.is_auto_reviewer`) are left out and only
counted (``automatic``): agreement is between people. Of the people, the pair sharing the most items is chosen
(ties: alphabetical order of the pair); over the items both decided, ``observed`` is the fraction with the same
label and ``kappa`` is Cohen's kappa over :data:`review.model.ACTIONS`, None when undefined (chance agreement of
1). No pair of people: ``items=0``, ``reviewers=None``, ``observed=0.0``, ``kappa=None``.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from review.model import ACTIONS, is_auto_reviewer


@dataclass(frozen=True)
class Agreement:
    """Agreement of one queue between the two people of ``reviewers`` over the items both decided.

    ``observed`` is the fraction of those items with the same action (0.0 when ``items == 0``);
    ``kappa`` is Cohen's kappa over accept/reject/edit, None when undefined (no pair of people, or chance
    agreement of 1). ``automatic``: the automatic decisions of the queue that were left out.
    """

    task: str
    kind: str
    items: int
    reviewers: tuple[str, str] | None
    observed: float
    kappa: float | None
    automatic: int


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
    """Agreement of the pair of people sharing the most items of ``labels`` (item -> reviewer -> action);
    automatic reviewers' decisions are left out and counted in ``automatic``."""
    people: list[dict[str, str]] = []
    automatic = 0
    for by_reviewer in labels.values():
        by_person = {name: label for name, label in by_reviewer.items() if not is_auto_reviewer(name)}
        automatic += len(by_reviewer) - len(by_person)
        people.append(by_person)
    shared: Counter[tuple[str, str]] = Counter()
    for by_person in people:
        shared.update(itertools.combinations(sorted(by_person), 2))
    if not shared:
        return Agreement(task, kind, items=0, reviewers=None, observed=0.0, kappa=None, automatic=automatic)
    pair = min(shared, key=lambda key: (-shared[key], key))
    first, second = pair
    pairs = [(by[first], by[second]) for by in people if first in by and second in by]
    observed, kappa = cohen_kappa(pairs)
    return Agreement(task, kind, len(pairs), pair, observed, kappa, automatic)
