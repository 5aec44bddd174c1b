"""The calibration error: how far probabilities are from the share of answers right."""

from __future__ import annotations

import numpy as np

from models_app.siamese.calibration import expected_calibration_error, reliability


def test_reliability_bins_count_every_answer_once():
    p = [0.05, 0.15, 0.15, 0.95, 1.0]
    rows = reliability(p, [False, True, False, True, True], bins=10)
    assert [row["count"] for row in rows] == [1, 2, 2]  # 1.0 falls in the last bin
    assert rows[1]["right"] == 0.5 and rows[-1]["high"] == 1.0


def test_true_probabilities_have_a_small_error_and_overconfident_ones_a_large_one():
    rng = np.random.default_rng(0)
    truth = rng.uniform(0, 1, 20_000)
    right = rng.random(20_000) < truth
    assert expected_calibration_error(truth, right) < 0.02
    assert expected_calibration_error(np.minimum(truth + 0.3, 1.0), right) > 0.2
