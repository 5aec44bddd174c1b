"""What the taxonomy's verdicts said of each group when a ranker was fitted (``VerdictHistory``),
and the features a candidate reads of it: how often its group was chosen, how often it was the
wrong answer and how near the text is to the texts it was wrong for. A training example is
measured without its own verdict (``OwnVerdict``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain

import numpy as np


@dataclass
class VerdictHistory:
    """What the taxonomy's verdicts said of each group when a ranker was fitted: how many texts
    curators put in it, how many times it was the wrong answer, and the vectors of the texts it
    was wrong for (in the served embedding)."""

    confirmed: dict[int, int] = field(default_factory=dict)
    rejected: dict[int, int] = field(default_factory=dict)
    rejected_groups: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    rejected_vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    group_count: int = 1

    @property
    def total(self) -> int:
        return sum(self.confirmed.values())

    def by_group(self) -> tuple[np.ndarray, np.ndarray]:
        """The rejected rows in order of their group, and those groups: worked out once."""
        found = getattr(self, "_by_group", None)
        if found is None:
            order = np.argsort(self.rejected_groups, kind="stable")
            found = (order, self.rejected_groups[order])
            self._by_group = found
        return found

    def counts(self, group_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each group's confirmed and rejected counts (0 for a group without), for a batch's
        groups at once; the counts as sorted arrays are worked out once."""
        tables = getattr(self, "_count_tables", None)
        if tables is None:
            tables = tuple(_sorted_counts(counts) for counts in (self.confirmed, self.rejected))
            self._count_tables = tables
        found = []
        for keys, values in tables:
            at = np.minimum(np.searchsorted(keys, group_ids), len(keys) - 1)
            found.append(np.where(keys[at] == group_ids, values[at], 0).astype(np.float64))
        return found[0], found[1]


def _sorted_counts(counts: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """A dict of counts as its sorted keys and their values, never empty (a key no group id
    matches: ids are never negative)."""
    keys = np.fromiter(counts.keys(), np.int64, len(counts))
    values = np.fromiter(counts.values(), np.int64, len(counts))
    order = np.argsort(keys, kind="stable")
    return np.concatenate([[-1], keys[order]]), np.concatenate([[0], values[order]])


@dataclass(frozen=True)
class OwnVerdict:
    """The verdict a training example comes from, left out of the history it is measured
    against: its group's count, and its rows among the rejected texts."""

    group_id: int | None
    rejected_rows: tuple[int, ...] = ()


def history_columns(columns, pq, pg, width, vectors, history, own) -> None:
    """What verdicts said of each candidate's group, less each training example's own, into
    ``columns``: candidate ``i`` is text ``pq[i]`` (of ``vectors``) and group ``pg[i]``, a
    (text, group) pair's key ``text * width + group``."""
    size = len(pq)
    if history is None:
        for name in ("verdicts", "verdict_share", "rejections"):
            columns[name] = np.zeros(size)
        columns["rejected_near"] = np.full(size, -1.0)
        return
    count = len(vectors)
    confirmed, rejected = history.counts(pg)
    own = list(own) if own is not None else []
    own_group = np.full(count, -1, np.int64)
    own_rejected_text, own_rejected_row = np.zeros(0, np.int64), np.zeros(0, np.int64)
    if any(o is not None for o in own):
        own_group[:] = [o.group_id if o and o.group_id is not None else -1 for o in own]
        sizes = [len(o.rejected_rows) if o is not None else 0 for o in own]
        own_rejected_text = np.repeat(np.arange(count), sizes)
        own_rejected_row = np.fromiter(
            chain.from_iterable(o.rejected_rows for o in own if o is not None),
            np.int64, sum(sizes),
        )  # fmt: skip
    confirmed -= (own_group[pq] == pg) & (pg >= 0)
    totals = np.full(count, float(history.total)) - (own_group >= 0)
    near = np.full(size, -1.0)
    if len(history.rejected_groups) and history.rejected_vectors.shape[1] == vectors.shape[1]:
        cosine = vectors @ history.rejected_vectors.T  # (Q, R)
        if len(own_rejected_text):
            # A training example's own rejections count neither as rejections nor as near.
            own_keys = own_rejected_text * width + history.rejected_groups[own_rejected_row]
            rejected -= _counts_of(pq * width + pg, own_keys)
            cosine[own_rejected_text, own_rejected_row] = -1.0
        # Each rejected group's nearest text: its rows are one slice of the rows by group.
        order, sorted_groups = history.by_group()
        names, starts = np.unique(sorted_groups, return_index=True)
        nearest = np.maximum.reduceat(cosine[:, order], starts, axis=1)  # (Q, groups)
        at = np.minimum(np.searchsorted(names, pg), len(names) - 1)
        hit = names[at] == pg
        near[hit] = nearest[pq[hit], at[hit]]
    confirmed = np.maximum(confirmed, 0)
    columns["verdicts"] = np.log1p(confirmed)
    columns["verdict_share"] = np.log(
        (confirmed + 1) / (np.maximum(totals[pq], 0) + max(history.group_count, 1))
    )
    columns["rejections"] = np.log1p(np.maximum(rejected, 0))
    columns["rejected_near"] = near


def _counts_of(keys: np.ndarray, listed: np.ndarray) -> np.ndarray:
    """How many times each of ``keys`` is in ``listed``."""
    distinct, times = np.unique(listed, return_counts=True)
    at = np.minimum(np.searchsorted(distinct, keys), len(distinct) - 1)
    return np.where(distinct[at] == keys, times[at], 0)
