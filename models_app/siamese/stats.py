"""Paired comparison of two models answering the same cases, for decisions noise cannot flip.

Two models scored on the same cases differ only where their answers differ (the discordant
cases), so the test is McNemar's: under "the candidate is no worse", a discordant case is as
likely lost as gained, and the chance of losing at least as many as were lost is a binomial
tail. Exact, so it holds for a held-out set of one verdict as for a suite of a thousand cases.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def binomial_tail(successes: int, trials: int) -> float:
    """P(X >= successes) for X ~ Binomial(trials, 1/2)."""
    if successes <= 0:
        return 1.0
    return sum(math.comb(trials, i) for i in range(successes, trials + 1)) / 2**trials


def paired_comparison(
    live: Sequence[bool], candidate: Sequence[bool], *, alpha: float
) -> dict[str, Any]:
    """Hit rates of both, their difference with a 95% interval, and whether the candidate is
    significantly worse: McNemar's exact one-sided p (losses against gains) below ``alpha``.

    The interval is the normal one for a paired difference of proportions (its variance from
    the discordant cases alone); it is reported for reading, the decision rests on the exact p.
    """
    if len(live) != len(candidate):
        raise ValueError(f"{len(live)} live answers but {len(candidate)} candidate answers")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    n = len(live)
    if n == 0:
        raise ValueError("no cases to compare")
    lost = sum(before and not after for before, after in zip(live, candidate, strict=True))
    gained = sum(after and not before for before, after in zip(live, candidate, strict=True))
    delta = (gained - lost) / n
    error = math.sqrt(max(lost + gained - (gained - lost) ** 2 / n, 0.0)) / n
    p_worse = binomial_tail(lost, lost + gained)
    return {
        "n": n,
        "live": round(sum(live) / n, 4),
        "candidate": round(sum(candidate) / n, 4),
        "delta": round(delta, 4),
        "ci95": [round(delta - 1.96 * error, 4), round(delta + 1.96 * error, 4)],
        "lost": lost,
        "gained": gained,
        "p_worse": round(p_worse, 6),
        "alpha": alpha,
        "significantly_worse": lost > gained and p_worse < alpha,
    }
