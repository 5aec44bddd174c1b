"""Cosines against an exact (flat) index's members: one float32 product a batch of queries.

A score is the float32 product BLAS gives, and BLAS picks its kernel by a product's shape and
the CPU, so a text alone and inside a batch may score differently in the last bits (some 1e-7).
What an answer needs is that the difference changes no top group: scores are compared rounded
to 1e-6 (``search.best_first``) with ties broken by member id, and an answer's scores agree to
1e-6 alone or batched. Scoring to the last bit the same everywhere cost a float64 rescoring of
every query's candidates, a third of a batch's time, for a property no user asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.mapped import mapped_arrays

EXACT_ARTIFACT = "exact-cosines"


def true_pairs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.nonzero`` of a 2-D mask, (rows, columns) in row order: a tenth of its time, which
    builds both index arrays element by element."""
    rows, columns = np.divmod(np.flatnonzero(mask), mask.shape[1])
    return rows, columns


def kth_best_at_least(values: np.ndarray, k: int, *, blocks: int = 16) -> np.ndarray:
    """A bound at or below each row's ``k``-th largest value, (Q,), found in a sixth of the time
    a top-k over every column takes.

    The columns are cut into ``width`` disjoint sets of ``blocks`` (columns j, j + width, ...)
    and each set's maximum taken (one vectorised pass); the k-th largest of those is the bound:
    the k sets whose maxima reach it hold k distinct values at least as large. Near-equal values
    land in one set only where they sit ``width`` columns apart, so the bound is nearly tight.
    """
    count, size = values.shape
    width = size // blocks
    if width < k:
        maxima = values
    else:
        strided = values[:, : blocks * width].reshape(count, blocks, width).max(axis=1)
        maxima = np.concatenate([strided, values[:, blocks * width :]], axis=1)
    # torch's top-k: half the time of numpy's partition.
    best = torch.topk(torch.from_numpy(np.ascontiguousarray(maxima)), k, dim=1, sorted=False)
    return best.values.min(dim=1).values.numpy()


def cosines(queries: np.ndarray, members: np.ndarray) -> np.ndarray:
    """``queries @ members.T`` in float32, (Q, N)."""
    queries = np.asarray(queries, dtype=np.float32)
    return queries @ np.asarray(members, dtype=np.float32).T


# Rows are told apart by a 64-bit hash of their bytes, a block of rows at a time.
_HASHED_ROWS = 4096
_ROW_HASH_SEED = 12345


def row_hashes(words: np.ndarray) -> np.ndarray:
    """(N,) a 64-bit hash of each row of ``words`` (N, D) uint32: a fixed odd multiplier a
    column, summed with wrap-around."""
    multipliers = np.random.default_rng(_ROW_HASH_SEED).integers(
        1, 2**63, size=words.shape[1], dtype=np.uint64
    ) | np.uint64(1)
    hashes = np.empty(len(words), np.uint64)
    for start in range(0, len(words), _HASHED_ROWS):
        block = words[start : start + _HASHED_ROWS].astype(np.uint64)
        hashes[start : start + _HASHED_ROWS] = (block * multipliers).sum(axis=1)
    return hashes


def distinct_rows(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, vector_of): the first row of each distinct vector of ``vectors`` (N, D) float32,
    and which distinct vector each row is. Rows are grouped by a hash of their bytes and every
    row is checked against its group's first: sorting the rows' bytes themselves
    (``np.unique`` over them) held four copies of the table at once, 220 MB for O*NET's
    members. Two different rows of one hash fall back to that sort."""
    words = vectors.view(np.uint32)
    _, first, vector_of = np.unique(row_hashes(words), return_index=True, return_inverse=True)
    vector_of = vector_of.reshape(-1)
    for start in range(0, len(words), _HASHED_ROWS):
        rows = slice(start, start + _HASHED_ROWS)
        if not np.array_equal(words[rows], words[first[vector_of[rows]]]):
            as_bytes = vectors.view(np.dtype((np.void, vectors.itemsize * vectors.shape[1])))
            _, first, vector_of = np.unique(
                as_bytes.ravel(), return_index=True, return_inverse=True
            )
            return first, vector_of.reshape(-1)
    return first, vector_of


class ExactCosines:
    """The members' vectors of an exact index: each distinct vector once, and which distinct
    vector each member has.

    O*NET lists many titles under several occupations, and a title's members share one vector:
    a fifth of its 53,767 members. Scoring each distinct vector once is the same answer for a
    fifth less of the product that dominates a batch, and members that share a vector score
    exactly alike, so the member id alone orders them.
    """

    def __init__(self, vectors: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)  # (N, D)
        first, vector_of = distinct_rows(vectors)
        # The members of each distinct vector: ``members[starts[u]:starts[u + 1]]``.
        members = np.argsort(vector_of, kind="stable")
        self._keep(
            rough=vectors[first],  # (U, D), U distinct vectors
            vector_of=vector_of,
            members=members,
            starts=np.searchsorted(vector_of[members], np.arange(len(first) + 1)),
        )

    def _keep(self, *, rough, vector_of, members, starts, grid=None) -> None:
        # ``grid``: the float64 copies that tables written before float32 scoring still hold;
        # never read, so never paged in.
        del grid
        self.rough, self.vector_of = rough, vector_of
        self._members, self._starts = members, starts

    def arrays(self) -> dict[str, np.ndarray]:
        """Everything it holds, by name, as ``mapped`` stores it."""
        return {
            "rough": self.rough,
            "vector_of": self.vector_of,
            "members": self._members,
            "starts": self._starts,
        }

    @classmethod
    def mapped(
        cls, folder: Path, vectors: Callable[[], np.ndarray], *, size: int, dim: int
    ) -> ExactCosines:
        """The tables of an exact index's ``size`` vectors of ``dim`` (``vectors()``, called only
        when the tables are written), read from memory-mapped files in ``folder``: written by
        the first process that needs them, shared by every later one."""
        arrays = mapped_arrays(
            Path(folder), of=EXACT_ARTIFACT, compute=lambda: cls(vectors()).arrays()
        )
        exact = cls.__new__(cls)
        try:
            exact._keep(**arrays)
        except TypeError as exc:  # another set of arrays than this class writes
            raise ArtifactError(f"{folder} does not hold exact-cosine tables: {exc}") from None
        if len(exact) != size or exact.rough.shape[1] != dim:
            raise ArtifactError(
                f"{folder} holds tables of {len(exact)} {exact.rough.shape[1]}-d vectors, its "
                f"index {size} of {dim}; delete {folder} to have them written again"
            )
        return exact

    def __len__(self) -> int:
        return len(self.vector_of)

    def all(self, queries: np.ndarray) -> np.ndarray:
        """Every member's cosine, (Q, N)."""
        return cosines(queries, self.rough)[:, self.vector_of]

    def near(
        self, queries: np.ndarray, reach: int, *, slack: float = 0.0
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Each query's members at or above its ``reach``-th best cosine less ``slack`` (more
        than ``reach`` where members tie there), as (row by query, member position, cosine),
        (P,) each, sorted by row; and each query's threshold (the ``reach``-th best), (Q,).
        Needs ``reach <= len(self)``. ``slack`` keeps the members a product of another shape
        might have put at or above the threshold: their last bits differ."""
        count = len(queries)
        scores = cosines(queries, self.rough)  # (Q, U)
        # At or below the reach-th best distinct vector's, so at or below the reach-th best
        # member's: every member a vector stands for scores as it does.
        # Sets of 64 columns: the top-k over their maxima is a third of that over sets of 16's,
        # for a bound that lets about one member a query more through (O*NET, reach 48).
        estimate = kth_best_at_least(scores, min(reach, len(self.rough)), blocks=64)  # (Q,)
        rows, vectors = true_pairs(scores >= estimate[:, None] - slack)
        rows, members, values = self._per_member(rows, vectors, scores[rows, vectors])
        starts = np.searchsorted(rows, np.arange(count + 1))
        order = np.lexsort((-values, rows))
        threshold = values[order[starts[:-1] + reach - 1]]  # (Q,)
        keep = values >= threshold[rows] - slack
        return rows[keep], members[keep], values[keep], threshold

    def _per_member(self, rows, vectors, values):
        """(row, distinct vector, value) triples as (row, member position, value), one for each
        member with that vector; rows stay in order."""
        counts = self._starts[vectors + 1] - self._starts[vectors]
        firsts = np.repeat(self._starts[vectors], counts)
        # Each triple's k-th copy takes the k-th member of its vector.
        within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        return np.repeat(rows, counts), self._members[firsts + within], np.repeat(values, counts)
