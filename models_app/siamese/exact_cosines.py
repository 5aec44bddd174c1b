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


# The first pass of a few queries over many vectors: each query's nearest ``_FIRST_PASS_WIDTH``
# x reach distinct vectors by their cosines in the vectors' first ``_FIRST_PASS_DIMS`` principal
# directions, then those scored exactly. A single text's product over 43,891 distinct 384-d
# vectors (O*NET's student when it was 384-d) reads 67 MB, half its answer's time; the first
# pass reads a third of that. On 5,000 real titles against O*NET every near set of 100 and of 120
# was the exact product's (bench/approximate_search.py measures the served answers). Vectors of
# fewer than twice its dimensions (the shipped 128-d student) are searched exactly.
_FIRST_PASS_DIMS = 128
_FIRST_PASS_WIDTH = 24
# Where it pays: at most this many queries a product (a batch's matrix product is bound by
# arithmetic, not by reading the vectors, and gathering each query's candidates costs more than
# it saves), at least this many distinct vectors a candidate, and tables of at least this many
# vectors of at least twice the first pass's dimensions.
_FIRST_PASS_MAX_QUERIES = 8
_FIRST_PASS_MIN_SHARE = 8
_FIRST_PASS_MIN_VECTORS = 16_384
# Where it is safe: a table keeps its first pass only if, for this many of its own vectors taken
# as queries (seeded), the first pass holds every vector of their exact near sets of this reach.
# Vectors spread evenly over every direction (no few directions hold most of their energy) fail
# it, and every product over them stays exact.
_FIRST_PASS_CHECKS = 256
_FIRST_PASS_CHECK_REACH = 128


def principal_directions(vectors: np.ndarray, dims: int) -> np.ndarray:
    """(D, dims) float32: the ``dims`` directions of ``vectors`` (N, D) with the most energy
    (eigenvectors of their uncentred second moment: cosines are taken about the origin)."""
    moment = (vectors.T @ vectors).astype(np.float64)  # (D, D): no float64 copy of the table
    values, directions = np.linalg.eigh(moment)
    return np.ascontiguousarray(directions[:, np.argsort(-values)[:dims]], dtype=np.float32)


def first_pass_candidates(
    queries: np.ndarray, basis: np.ndarray, reduced: np.ndarray, width: int
) -> np.ndarray:
    """(Q, width) each query's ``width`` best distinct vectors by their cosines in the first
    pass's directions (``basis`` (D, d); ``reduced``: the vectors in them, (U, d)), unordered."""
    rough = cosines(queries @ basis, reduced)  # (Q, U)
    return np.argpartition(-rough, width, axis=1)[:, :width]


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
        rough = vectors[first]  # (U, D), U distinct vectors
        self._keep(
            rough=rough,
            vector_of=vector_of,
            members=members,
            starts=np.searchsorted(vector_of[members], np.arange(len(first) + 1)),
        )
        self._basis, self._reduced = self._first_pass(rough)

    def _first_pass(self, rough: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(basis (D, d), reduced (U, d)) of the first pass, or d = 0 where it does not pay or
        is not safe (see ``_FIRST_PASS_CHECKS``)."""
        count, dim = rough.shape
        none = np.zeros((dim, 0), np.float32), np.zeros((count, 0), np.float32)
        if count < _FIRST_PASS_MIN_VECTORS or dim < 2 * _FIRST_PASS_DIMS:
            return none
        basis = principal_directions(rough, _FIRST_PASS_DIMS)
        reduced = np.ascontiguousarray(rough @ basis)
        sample = np.random.default_rng(0).choice(count, _FIRST_PASS_CHECKS, replace=False)
        queries = rough[np.sort(sample)]
        reach, width = _FIRST_PASS_CHECK_REACH, _FIRST_PASS_WIDTH * _FIRST_PASS_CHECK_REACH
        # A few queries a product, so the check holds a few rows of scores at a time.
        for start in range(0, len(queries), _FIRST_PASS_MAX_QUERIES):
            chunk = queries[start : start + _FIRST_PASS_MAX_QUERIES]
            exact = cosines(chunk, rough)  # (S, U)
            near = exact >= kth_best_at_least(exact, reach)[:, None] - 1e-6
            chosen = np.zeros_like(near)
            np.put_along_axis(chosen, first_pass_candidates(chunk, basis, reduced, width), True,
                              axis=1)  # fmt: skip
            if np.any(near & ~chosen):
                return none
        return basis, reduced

    def _keep(
        self, *, rough, vector_of, members, starts, grid=None, basis=None, reduced=None
    ) -> None:
        # ``grid``: the float64 copies that tables written before float32 scoring still hold;
        # never read, so never paged in. Tables written before the first pass have no
        # ``basis``: every product is exact over all vectors.
        del grid
        self.rough, self.vector_of = rough, vector_of
        self._members, self._starts = members, starts
        self._basis, self._reduced = basis, reduced

    def arrays(self) -> dict[str, np.ndarray]:
        """Everything it holds, by name, as ``mapped`` stores it."""
        return {
            "rough": self.rough,
            "vector_of": self.vector_of,
            "members": self._members,
            "starts": self._starts,
            "basis": self._basis,
            "reduced": self._reduced,
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

    @property
    def has_first_pass(self) -> bool:
        """Whether a search of a few texts takes the first pass (see ``_FIRST_PASS_DIMS``)."""
        return self._basis is not None and self._basis.shape[1] > 0

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
        scores = self._scores_near(queries, reach)  # (Q, U)
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

    def _scores_near(self, queries: np.ndarray, reach: int) -> np.ndarray:
        """(Q, U) cosines, exact for every vector a near set of ``reach`` can hold. Few queries
        over many vectors: exact for each query's first-pass candidates, -inf elsewhere."""
        width = _FIRST_PASS_WIDTH * reach
        if (
            not self.has_first_pass
            or len(queries) > _FIRST_PASS_MAX_QUERIES
            or len(self.rough) < _FIRST_PASS_MIN_SHARE * width
        ):
            return cosines(queries, self.rough)
        queries = np.asarray(queries, dtype=np.float32)
        candidates = first_pass_candidates(queries, self._basis, self._reduced, width)
        scores = np.full((len(queries), len(self.rough)), -np.inf, dtype=np.float32)
        for row, (query, chosen) in enumerate(zip(queries, candidates, strict=True)):
            scores[row, chosen] = self.rough[chosen] @ query
        return scores

    def _per_member(self, rows, vectors, values):
        """(row, distinct vector, value) triples as (row, member position, value), one for each
        member with that vector; rows stay in order."""
        counts = self._starts[vectors + 1] - self._starts[vectors]
        firsts = np.repeat(self._starts[vectors], counts)
        # Each triple's k-th copy takes the k-th member of its vector.
        within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        return np.repeat(rows, counts), self._members[firsts + within], np.repeat(values, counts)
