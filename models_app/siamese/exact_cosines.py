"""Cosines against an exact index's members that come out the same to the last bit whatever the
batch, the BLAS kernel or the CPU.

BLAS chooses its kernel by a product's shape and by the CPU (one query: matrix-vector; a batch:
matrix-matrix, blocked per CPU model), and float32 sums taken in another order round differently
in the last bit: a text could score differently alone than inside a batch, and near a tie get
another answer. So components are kept as whole multiples of 2^-24 (``on_grid``) and multiplied
in float64: a product is a whole multiple of 2^-48 that float64's 53 bits hold, and a partial sum
of unit vectors' products stays within 1 (Cauchy-Schwarz), so every sum is exact in any order,
kernel or thread split, then rounded once to float32.

float64 products cost twice float32's, so a query's near set is found by a float32 product first
(any kernel, any rounding) and only its candidates are scored exactly (``ExactCosines.near``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.mapped import mapped_arrays

_GRID = 2.0**24
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


def on_grid(vectors: np.ndarray) -> np.ndarray:
    """float64 copies of (unit) vectors, each component rounded to a multiple of 2^-24. The
    rounding moves a component by 3e-8 at most; a multiple of 2^-24 below 1 is also a float32."""
    return np.rint(np.asarray(vectors, dtype=np.float64) * _GRID) / _GRID


def cosines(queries: np.ndarray, members: np.ndarray) -> np.ndarray:
    """The exact ``queries @ members.T`` rounded to float32, (Q, N); ``members`` on the grid,
    the queries put on it here."""
    queries = on_grid(queries)
    if len(queries) == 1:
        return (members @ queries[0]).astype(np.float32)[None, :]
    return (queries @ members.T).astype(np.float32)


class ExactCosines:
    """The members' vectors of an exact index, on the grid: each distinct vector once (float64
    and float32, the same values), and which distinct vector each member has.

    O*NET lists many titles under several occupations, and a title's members share one vector:
    a fifth of its 53,767 members. Scoring each distinct vector once is the same answer for a
    fifth less of the product that dominates a batch.
    """

    def __init__(self, vectors: np.ndarray) -> None:
        grid = on_grid(vectors)  # (N, D)
        # Rows compared as raw bytes: a third of the time ``np.unique(axis=0)`` takes.
        as_bytes = np.ascontiguousarray(grid).view(
            np.dtype((np.void, grid.dtype.itemsize * grid.shape[1]))
        )
        _, first, vector_of = np.unique(as_bytes.ravel(), return_index=True, return_inverse=True)
        # The members of each distinct vector: ``members[starts[u]:starts[u + 1]]``.
        members = np.argsort(vector_of, kind="stable")
        distinct = grid[first]  # (U, D), U distinct vectors
        self._keep(
            grid=distinct,
            rough=distinct.astype(np.float32),  # (U, D), the same values
            vector_of=vector_of,
            members=members,
            starts=np.searchsorted(vector_of[members], np.arange(len(first) + 1)),
        )

    def _keep(self, *, grid, rough, vector_of, members, starts) -> None:
        self.grid, self.rough, self.vector_of = grid, rough, vector_of
        self._members, self._starts = members, starts
        # A float32 sum of D products of vectors of norm 1 is within D * 2^-24 of the exact
        # sum, whatever its order; a query's rough threshold and a member's rough cosine may each
        # be off by that much, and the slack covers both twice over.
        self.slack = 4 * (self.grid.shape[1] + 1) * 2.0**-24

    def arrays(self) -> dict[str, np.ndarray]:
        """Everything it holds, by name, as ``mapped`` stores it."""
        return {
            "grid": self.grid,
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
        if len(exact) != size or exact.grid.shape[1] != dim:
            raise ArtifactError(
                f"{folder} holds tables of {len(exact)} {exact.grid.shape[1]}-d vectors, its index "
                f"{size} of {dim}; delete {folder} to have them written again"
            )
        return exact

    def __len__(self) -> int:
        return len(self.vector_of)

    def all(self, queries: np.ndarray) -> np.ndarray:
        """Every member's exact cosine, (Q, N)."""
        return cosines(queries, self.grid)[:, self.vector_of]

    def near(
        self, queries: np.ndarray, reach: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Each query's members at or above its ``reach``-th best exact cosine (more than
        ``reach`` where members tie there), as (row by query, member position, cosine), (P,)
        each, sorted by row; and each query's threshold, (Q,). Needs ``reach <= len(self)``."""
        count = len(queries)
        grid_queries = on_grid(queries)
        rough = grid_queries.astype(np.float32) @ self.rough.T  # (Q, U)
        # At or below the reach-th best distinct vector's, so at or below the reach-th best
        # member's: every member a vector stands for scores as it does.
        estimate = kth_best_at_least(rough, min(reach, len(self.rough)))  # (Q,)
        # Every member the exact threshold keeps is among these, and at least ``reach`` are.
        rows, vectors = true_pairs(rough >= (estimate - self.slack)[:, None])
        exact = np.einsum("ij,ij->i", grid_queries[rows], self.grid[vectors]).astype(np.float32)
        rows, members, exact = self._per_member(rows, vectors, exact)
        starts = np.searchsorted(rows, np.arange(count + 1))
        order = np.lexsort((-exact, rows))
        threshold = exact[order[starts[:-1] + reach - 1]]  # (Q,)
        keep = exact >= threshold[rows]
        return rows[keep], members[keep], exact[keep], threshold

    def _per_member(self, rows, vectors, values):
        """(row, distinct vector, value) triples as (row, member position, value), one for each
        member with that vector; rows stay in order."""
        counts = self._starts[vectors + 1] - self._starts[vectors]
        firsts = np.repeat(self._starts[vectors], counts)
        # Each triple's k-th copy takes the k-th member of its vector.
        within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        return np.repeat(rows, counts), self._members[firsts + within], np.repeat(values, counts)
