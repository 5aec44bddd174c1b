"""A single text's cosines over a large table: a first pass in the vectors' principal
directions, then exact cosines for its candidates; kept only where a check on the table's own
vectors shows it misses nothing, and only for a few queries at a time."""

from __future__ import annotations

import numpy as np
import pytest

from models_app.siamese import mapped
from models_app.siamese.exact_cosines import EXACT_ARTIFACT, ExactCosines

COUNT, DIM = 20_000, 384


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def clustered(count: int, seed: int) -> np.ndarray:
    """Vectors as an encoder gives them: most of their energy in a few dozen directions."""
    rng = np.random.default_rng(seed)
    mixing = rng.normal(size=(48, DIM))
    return unit(rng.normal(size=(count, 48)) @ mixing + 0.15 * rng.normal(size=(count, DIM)))


def exact_only(table: ExactCosines) -> ExactCosines:
    """The same table as one written before the first pass existed: every product exact."""
    arrays = {k: v for k, v in table.arrays().items() if k not in ("basis", "reduced")}
    plain = ExactCosines.__new__(ExactCosines)
    plain._keep(**arrays)
    return plain


@pytest.fixture(scope="module")
def table() -> ExactCosines:
    return ExactCosines(clustered(COUNT, seed=1))


def test_a_table_of_encoder_like_vectors_keeps_a_first_pass(table):
    assert table.has_first_pass and table.arrays()["basis"].shape == (DIM, 128)
    assert table.arrays()["reduced"].shape == (COUNT, 128)


@pytest.mark.parametrize("reach", [10, 100])
def test_a_few_queries_get_the_near_sets_of_the_exact_product(table, reach):
    plain = exact_only(table)
    queries = clustered(40, seed=2)
    for start in range(0, 40, 4):  # four queries at a time: the first pass serves them
        chunk = queries[start : start + 4]
        rows, members, values, threshold = table.near(chunk, reach, slack=1e-6)
        rows_e, members_e, values_e, threshold_e = plain.near(chunk, reach, slack=1e-6)
        assert np.array_equal(rows, rows_e) and np.array_equal(members, members_e)
        np.testing.assert_allclose(values, values_e, atol=1e-6)
        np.testing.assert_allclose(threshold, threshold_e, atol=1e-6)
    # And the first pass did serve them: only its candidates were scored.
    scored = np.isfinite(table._scores_near(queries[:4], reach))
    assert (scored.sum(axis=1) == 24 * reach).all()


def test_vectors_spread_over_every_direction_keep_every_product_exact():
    spread = unit(np.random.default_rng(3).normal(size=(COUNT, DIM)))
    assert not ExactCosines(spread).has_first_pass


def test_small_tables_have_no_first_pass():
    assert not ExactCosines(clustered(2_000, seed=4)).has_first_pass


def test_tables_written_before_the_first_pass_answer_exactly(table, tmp_path):
    arrays = {k: v for k, v in table.arrays().items() if k not in ("basis", "reduced")}
    mapped.write_mapped(tmp_path / EXACT_ARTIFACT, arrays, of=EXACT_ARTIFACT)
    old = ExactCosines.mapped(tmp_path / EXACT_ARTIFACT, lambda: None, size=COUNT, dim=DIM)
    assert not old.has_first_pass
    query = clustered(1, seed=5)
    assert np.array_equal(old.near(query, 20)[1], table.near(query, 20)[1])
