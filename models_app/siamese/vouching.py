"""Answers the product can vouch for: the probability above which its answers meet a target
precision, derived from evidence (answers whose rightness is known) with a one-sided lower
confidence bound, so that a threshold is only claimed where the evidence is strong enough.

The threshold is the lowest probability at which the answers at or above it, in the evidence,
have a precision whose lower bound reaches the target. Choosing the lowest passing cut among
many looks at the evidence more than once, so the realized precision is measured on answers the
threshold was not derived from (``bench/vouching.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

CONFIDENCE = 0.95
# A taxonomy's own ranker vouches once it was fitted on this many verdicts: fewer say less than
# the starter's 523 answers on real titles.
MIN_OWN_EVIDENCE = 200


def precision_lower_bound(right: int, answers: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided Wilson lower bound on a precision of ``right`` out of ``answers``: the
    precision is at least this with the given confidence (0 without answers)."""
    return _wilson(right, answers, confidence, -1.0) if answers > 0 else 0.0


def precision_exact_upper_bound(right: int, answers: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided exact (Clopper-Pearson) upper bound: the largest precision under which
    ``right`` or fewer of ``answers`` happen with probability at least 1 - ``confidence`` (1
    without answers or with every answer right). Wider than Wilson's with few answers, where
    Wilson's undercovers: a policy paused on it after each audit stopped one in nine policies
    that were coding at 95% against a 90% target (``bench/audit_pause.py``)."""
    if answers > 0 and not 0 <= right <= answers:
        raise ValueError(f"{right} right of {answers} answers")
    if answers <= 0 or right == answers:
        return 1.0
    alpha = 1.0 - confidence
    counts = np.arange(right + 1)
    # log C(answers, i) for i = 0..right, built up term by term.
    log_ways = np.concatenate(
        [[0.0], np.cumsum(np.log(answers - counts[1:] + 1) - np.log(counts[1:]))]
    )
    low, high = right / answers, 1.0
    for _ in range(60):  # bisection on P(X <= right | p), which falls as p rises
        middle = (low + high) / 2
        terms = log_ways + counts * math.log(middle) + (answers - counts) * math.log1p(-middle)
        if np.exp(terms).sum() > alpha:
            low = middle
        else:
            high = middle
    return high


def precision_exact_lower_bound(right: int, answers: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided exact (Clopper-Pearson) lower bound (0 without answers)."""
    if answers <= 0:
        return 0.0
    return 1.0 - precision_exact_upper_bound(answers - right, answers, confidence)


def _wilson(right: int, answers: int, confidence: float, side: float) -> float:
    z = NormalDist().inv_cdf(confidence)
    share = right / answers
    centre = share + z * z / (2 * answers)
    spread = z * math.sqrt(share * (1 - share) / answers + z * z / (4 * answers * answers))
    return min(1.0, max(0.0, (centre + side * spread) / (1 + z * z / answers)))


@dataclass(frozen=True)
class VouchingThreshold:
    target: float
    threshold: float | None  # None: the evidence does not show the target at any probability
    answers: int  # evidence answers at or above the threshold
    right: int
    lower_bound: float  # of their precision
    coverage: float  # the evidence's share at or above the threshold
    evidence: int
    # When no threshold is shown: how many more answers like the evidence would show one at
    # today's precision of its surest answers (None: that precision is below the target).
    more_needed: int | None = None

    @property
    def precision(self) -> float | None:
        return self.right / self.answers if self.answers else None


def vouching_threshold(
    probabilities: Sequence[float],
    right: Sequence[bool],
    *,
    target: float,
    confidence: float = CONFIDENCE,
) -> VouchingThreshold:
    """The lowest probability whose answers at or above it, in the evidence, have a precision
    whose ``confidence`` lower bound is at least ``target``."""
    if not 0 < target < 1:
        raise ValueError(f"a target precision is between 0 and 1, got {target}")
    p = np.asarray(probabilities, dtype=np.float64)
    hits = np.asarray(right, dtype=bool)
    if p.shape != hits.shape:
        raise ValueError("one rightness per probability")
    order = np.argsort(-p, kind="stable")
    p, hits = p[order], hits[order]
    counts = np.arange(1, len(p) + 1)
    rights = np.cumsum(hits)
    # Only cuts between distinct probabilities: answers of the same probability go together.
    cuts = np.flatnonzero(np.append(p[1:] < p[:-1], True)) if len(p) else np.array([], int)
    passing = [k for k in cuts if precision_lower_bound(int(rights[k]), int(counts[k]),
                                                        confidence) >= target]  # fmt: skip
    if passing:
        k = passing[-1]
        return VouchingThreshold(
            target, float(p[k]), int(counts[k]), int(rights[k]),
            precision_lower_bound(int(rights[k]), int(counts[k]), confidence),
            float(counts[k] / len(p)), len(p),
        )  # fmt: skip
    return VouchingThreshold(
        target, None, 0, 0, 0.0, 0.0, len(p),
        more_needed=_more_needed(p, hits, target, confidence),
    )  # fmt: skip


def _more_needed(p: np.ndarray, hits: np.ndarray, target: float, confidence: float) -> int | None:
    """Answers like the evidence still needed for the answers it calls at least ``target``
    likely to show the target, at the precision they have today."""
    sure = p >= target
    if not sure.any():
        return None
    precision = float(hits[sure].mean())
    if precision <= target:
        return None
    share = float(sure.mean())

    def shown(n: int) -> bool:
        return precision_lower_bound(round(precision * n), n, confidence) >= target

    low, high = int(sure.sum()), 10**7  # the bound grows with the answers at one precision
    if not shown(high):
        return None
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if shown(middle) else (middle + 1, high)
    return max(1, math.ceil(low / share) - len(p))
