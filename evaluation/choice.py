"""The choice among the validation candidates: the simplest, unless a more complex one leads by a margin that the
document-level bootstrap supports.

**Complexity**, from the declaration alone (:func:`complexity`): tier 0, a cheap baseline
(:func:`evaluation.comparisons.system_role` is ``baseline``: BM25, independent chunks, title headers, their hybrids and
fusions); tier 1, one tested system (a model: late chunking, InSeNT, LLM contexts); tier 2, a hybrid or fusion
containing a tested system. Within a tier, fewer fused systems is simpler. The order of declaration never decides.

**Values**: each candidate's nDCG@10 per validation query, a fitted fusion's out of fold (:mod:`evaluation.weights`);
the criterion is :func:`evaluation.weights.criterion` (needs_context, then all), its criterion queries those labelled
needs_context, else all.

**Rule** (:func:`choose`):

1. Start from the best candidate of the lowest tier present: the highest criterion; exact ties (12 decimals) to the
   simpler (fewer fused systems), then to the name in alphabetical order.
2. For each higher tier in turn, with ``k`` candidates: a candidate's lead over the current choice is *supported* when
   the one-sided ``1 - alpha / k`` lower bound of the document-bootstrap interval of its paired per-query differences
   on the criterion queries (:func:`evaluation.metrics.stats.bootstrap_ci` at confidence ``1 - 2 alpha / k``: the
   expanded percentile interval over documents) is above 0, and those queries span enough documents for a one-sided
   document-level sign-flip test to reach ``alpha / k`` at all (``2**-m <= alpha / k``,
   :func:`evaluation.metrics.stats.smallest_p`; ``m >= 5`` for one candidate at ``alpha = 0.05``: below that a
   bootstrap interval cannot fall under the smallest document's mean, and four documents all ahead happen by chance
   one time in sixteen). ``alpha / k``: Bonferroni over the tier's candidates (Dunn, *JASA* 56, 1961), the step being
   one family of comparisons. The supported candidate with the highest criterion (ties as in 1) replaces the choice.
3. Any candidate whose criterion ties the chosen one's exactly is named in a note: the validation split cannot decide
   between them.
4. A validation split whose criterion queries span fewer documents than rule 2 needs for every more complex tier
   present says so in a note (``cannot decide on validation: 2 documents cannot support any lead (needs >= 5); bm25
   kept as the simplest, not as the best``): the choice is then the simplest tier's best by default, not a finding;
   a tier it cannot test while another it can is named in a note too (:func:`size_notes`).

**The record** (:data:`RULES`): the choice of the earlier rule (the highest in-sample criterion, a fitted fusion at the
grid's best weights, ties to the first declared), then the choice after adding each rule in turn: shrunk weights,
cross-validated fusion scores, the tie rule, the simplicity preference (the last is :func:`choose`'s choice).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from evaluation.comparisons import BASELINE, system_role
from evaluation.config import FUSING, EvaluationConfig, SystemConfig
from evaluation.metrics.stats import bootstrap_ci, clustered, smallest_p
from evaluation.results import RULES
from evaluation.weights import criterion, criterion_rows, rounded

ALPHA = 0.05
"""The one-sided level of a supported lead, shared by a tier's candidates (module docstring)."""

TIER_WORDS = ("cheap baseline", "one model", "fusion with a model")
"""Tier -> its name in words."""


def complexity(system: SystemConfig, config: EvaluationConfig) -> tuple[int, int]:
    """``(tier, fused systems)`` of a declared system (module docstring); 1 fused system for a single one."""
    parts = len(system.systems) if isinstance(system, FUSING) else 1
    if system_role(system, config) == BASELINE:
        return 0, parts
    return (2 if isinstance(system, FUSING) else 1), parts


@dataclass(frozen=True)
class Candidate:
    """One candidate on validation: per-query nDCG@10 ``[Q]`` as compared (``values``: a fitted fusion's out of fold;
    None when it has none), with the weights used on test (``in_sample``) and with the grid's best weights
    (``grid_best``: what the earlier rule scored); all three the same for a candidate that fits nothing."""

    name: str
    tier: int
    parts: int
    values: np.ndarray | None
    in_sample: np.ndarray
    grid_best: np.ndarray

    @property
    def simplicity(self) -> tuple[int, int, str]:
        """The order of simplicity: tier, fused systems, then the name (alphabetical)."""
        return self.tier, self.parts, self.name


@dataclass(frozen=True)
class Lead:
    """``challenger`` − ``current`` on the criterion queries: mean difference, one-sided lower bound, documents."""

    challenger: str
    difference: float
    lower: float
    n_documents: int
    needed: int  # the fewest documents at which the lead could be supported
    supported: bool

    def words(self) -> str:
        """The lead in words: ``+0.040 [lower bound +0.010] over 12 documents`` (or why it cannot be supported)."""
        if self.n_documents < self.needed:
            return (
                f"{self.difference:+.3f} over {self.n_documents} document(s), too few to support "
                f"a lead (at least {self.needed})"
            )
        bound = f"lower bound {self.lower:+.3f}"
        return f"{self.difference:+.3f} [{bound}] over {self.n_documents} documents"


@dataclass
class Choice:
    """What :func:`choose` decided: ``chosen`` (None: no candidate), the rule that decided in words (``decision``),
    tie ``notes`` and ``by_rule`` (:data:`RULES` -> the choice after that rule)."""

    chosen: str | None
    decision: str
    notes: list[str] = field(default_factory=list)
    by_rule: dict[str, str | None] = field(default_factory=dict)


Values = Callable[[Candidate], np.ndarray]


def best_of(
    candidates: Sequence[Candidate], values: Values, needs_context: np.ndarray | None, *, declared: bool = False
) -> Candidate | None:
    """The candidate with the highest criterion of ``values``; exact ties to the simplest (``declared``: to the first
    in ``candidates``, the earlier rule)."""
    best: Candidate | None = None
    for candidate in candidates:
        if best is None:
            best = candidate
            continue
        a, b = rounded(criterion(values(candidate), needs_context)), rounded(criterion(values(best), needs_context))
        if a > b or (a == b and not declared and candidate.simplicity < best.simplicity):
            best = candidate
    return best


def fewest_documents(level: float) -> int:
    """The fewest documents at which a one-sided document-level sign-flip test can reach ``level``."""
    m = 1
    while smallest_p(m) / 2 > level:
        m += 1
    return m


def lead(
    challenger: Candidate,
    current: Candidate,
    needs_context: np.ndarray | None,
    documents: np.ndarray,
    family: int,
    *,
    alpha: float = ALPHA,
    resamples: int = 2000,
    seed: int = 0,
) -> Lead:
    """``challenger``'s lead over ``current`` tested at one-sided ``alpha / family`` (module docstring, rule 2)."""
    assert challenger.values is not None and current.values is not None
    rows = criterion_rows(needs_context, np.ones(len(documents), dtype=bool))
    differences = challenger.values[rows] - current.values[rows]
    labels = documents[rows]
    level = alpha / family
    m = clustered(differences, labels).n_documents
    needed = fewest_documents(level)
    low, _ = bootstrap_ci(differences, labels, resamples, 1.0 - 2.0 * level, seed)
    supported = bool(m >= needed and low > 1e-12)
    return Lead(challenger.name, float(np.mean(differences)), low, m, needed, supported)


def choose(
    candidates: Sequence[Candidate],
    needs_context: np.ndarray | None,
    documents: Sequence[object] | np.ndarray,
    *,
    alpha: float = ALPHA,
    resamples: int = 2000,
    seed: int = 0,
) -> Choice:
    """The choice among ``candidates`` (declared order, which only the earlier rule's record reads) by the module
    docstring's rule, with its record."""
    labels = np.asarray(documents).reshape(-1)
    scored = [c for c in candidates if c.values is not None]
    if not scored:
        return Choice(None, "no candidate has a validation score", by_rule=dict.fromkeys(RULES))
    current = best_of([c for c in scored if c.tier == min(c.tier for c in scored)], _values, needs_context)
    assert current is not None
    steps: list[str] = []
    closest: Lead | None = None  # the unsupported lead nearest support since the last replacement
    for tier in sorted({c.tier for c in scored if c.tier > current.tier}):
        family = [c for c in scored if c.tier == tier]
        leads = [lead(c, current, needs_context, labels, len(family), alpha=alpha, resamples=resamples, seed=seed)
                 for c in family]  # fmt: skip
        winner = best_of([c for c, x in zip(family, leads, strict=True) if x.supported], _values, needs_context)
        if winner is None:
            closest = max([*leads, *([closest] if closest else [])], key=lambda x: (x.lower, x.difference))
            continue
        found = next(x for x in leads if x.challenger == winner.name)
        steps.append(
            f"{winner.name} replaced {current.name} ({TIER_WORDS[current.tier]}): lead {found.words()} (one-sided "
            f"{1 - alpha / len(family):.1%} document bootstrap, {len(family)} candidate(s) in its tier)"
        )
        current, closest = winner, None
    decision = "; ".join(steps) if steps else f"simplest: {current.name}, the best {TIER_WORDS[current.tier]}"
    if closest is not None:
        decision += "; no more complex candidate led by a supported margin"
        decision += f" (closest: {closest.challenger} {closest.words()})"
    elif not steps:
        decision += "; no more complex candidate"
    labelled = needs_context is not None and bool(needs_context.any())
    return Choice(
        current.name,
        decision,
        size_notes(current, scored, needs_context, labels, alpha)
        + _tie_notes(current, scored, needs_context, labelled),
        _record(candidates, needs_context, current),
    )


def tier_needs(tiers: Sequence[int], alpha: float = ALPHA) -> dict[int, int]:
    """``{tier: the fewest documents at which a lead of one of its candidates can be supported}`` for every tier of
    ``tiers`` (one entry per candidate) above the lowest (rule 2: ``2**-m <= alpha / k``, ``k`` its candidates)."""
    above = [t for t in tiers if t > min(tiers, default=0)]
    return {t: fewest_documents(alpha / above.count(t)) for t in sorted(set(above))}


def documents_needed(config: EvaluationConfig, alpha: float = ALPHA) -> int | None:
    """The fewest validation documents (of the criterion queries) at which the choice among ``config.select`` can
    support any lead (rule 4); None when no candidate is more complex than the simplest tier (nothing to support)."""
    needed = tier_needs([complexity(config.system(name), config)[0] for name in config.select], alpha)
    return min(needed.values()) if needed else None


def size_notes(
    chosen: Candidate,
    scored: Sequence[Candidate],
    needs_context: np.ndarray | None,
    documents: np.ndarray,
    alpha: float = ALPHA,
) -> list[str]:
    """The notes of rule 4 (module docstring): none when the criterion queries span enough documents for a lead of
    every more complex tier than the lowest to be supported."""
    needed = tier_needs([c.tier for c in scored], alpha)
    if not needed:
        return []
    families = {t: sum(1 for c in scored if c.tier == t) for t in needed}
    rows = criterion_rows(needs_context, np.ones(len(documents), dtype=bool))
    m = len(set(documents[rows].tolist()))
    where = " of the needs_context queries" if rows.sum() < len(documents) else ""
    if m < min(needed.values()):
        simplest = chosen.simplicity == min(c.simplicity for c in scored)
        kept = "as the simplest" if simplest else f"as the best {TIER_WORDS[chosen.tier]}, the simplest kind"
        return [
            f"cannot decide on validation: {m} document(s){where} cannot support any lead (needs >= "
            f"{min(needed.values())}); {chosen.name} kept {kept}, not as the best"
        ]
    return [
        f"cannot decide on validation for the {TIER_WORDS[t]} candidates: {m} document(s){where} cannot support a "
        f"lead among {families[t]} (needs >= {needed[t]})"
        for t in sorted(needed)
        if m < needed[t]
    ]


def _values(candidate: Candidate) -> np.ndarray:
    assert candidate.values is not None
    return candidate.values


def _tie_notes(
    chosen: Candidate, scored: Sequence[Candidate], needs_context: np.ndarray | None, labelled: bool
) -> list[str]:
    """A note naming the candidates tied exactly with ``chosen`` (none when no candidate ties)."""
    value = criterion(_values(chosen), needs_context)
    tied = sorted(
        (c for c in scored if rounded(criterion(_values(c), needs_context)) == rounded(value)),
        key=lambda c: c.simplicity,
    )
    if len(tied) < 2:
        return []
    alike = any(c is not chosen and c.simplicity[:2] == chosen.simplicity[:2] for c in tied)
    how = "by name among the equally simple" if alike else "as the simplest"
    score = f"{value[0]:.3f} / {value[1]:.3f} (needs_context / all)" if labelled else f"{value[1]:.3f}"
    return [
        f"cannot decide between {', '.join(c.name for c in tied)} on validation: each {score}; {chosen.name} taken "
        f"{how}"
    ]


def _record(candidates: Sequence[Candidate], needs_context: np.ndarray | None, final: Candidate) -> dict:
    """:data:`RULES` -> the choice after adding that rule (module docstring)."""
    scored = [c for c in candidates if c.values is not None]
    steps = (
        best_of(candidates, lambda c: c.grid_best, needs_context, declared=True),
        best_of(candidates, lambda c: c.in_sample, needs_context, declared=True),
        best_of(scored, _values, needs_context, declared=True),
        best_of(scored, _values, needs_context),
        final,
    )
    return {rule: None if step is None else step.name for rule, step in zip(RULES, steps, strict=True)}
