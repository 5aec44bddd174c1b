"""Which verdict teaches most: the order the review queue offers open texts in.

A verdict is worth most where the live ranker is least sure of its answer and the text comes
often (a wrong answer served many times over), and less for the tenth near-copy of a title
whose first copy is waiting too. ``verdict_worth`` is the first two, ``spread_near_copies`` the
third: each text's worth falls by ``SPREAD`` for every more worthy open text predicted into the
same group, so the queue interleaves groups instead of offering twenty copies in a row.
"""

from __future__ import annotations

import numpy as np

# How much a text's worth keeps for each more worthy open text in its predicted group.
SPREAD = 0.7


def verdict_worth(top_probability: np.ndarray, occurrences: np.ndarray) -> np.ndarray:
    """(N,) the chance the answer is wrong, times a weight that grows with the text's traffic
    (one for a text seen once, about four for one seen 20 times)."""
    wrong = 1.0 - np.clip(np.asarray(top_probability, dtype=np.float64), 0.0, 1.0)
    seen = np.maximum(np.asarray(occurrences, dtype=np.float64), 1.0)
    return wrong * (1.0 + np.log(seen))


def spread_near_copies(worth: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """(N,) ``worth`` times ``SPREAD`` to the power of the text's place among the open texts
    predicted into the same group (``groups``), most worthy first (ties: the earlier text)."""
    worth = np.asarray(worth, dtype=np.float64)
    groups = np.asarray(groups, dtype=np.int64)
    order = np.lexsort((np.arange(len(worth)), -worth, groups))  # by group, most worthy first
    sorted_groups = groups[order]
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
    place = np.arange(len(worth)) - np.repeat(starts, np.diff(np.r_[starts, len(worth)]))
    spread = np.empty(len(worth))
    spread[order] = worth[order] * SPREAD ** place.astype(np.float64)
    return spread
