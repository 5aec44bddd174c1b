"""Calibrated match probabilities: fitted on known outcomes, of the answers given p about p are
right; the fit refuses what it cannot learn from."""

from __future__ import annotations

import numpy as np
import pytest

from models_app.siamese.calibration import (
    Calibrator,
    expected_calibration_error,
    reliability,
)
from models_app.siamese.encoders import ConfigError


def synthetic(n: int, seed: int):
    """Answers whose chance of being right truly is sigmoid(12 * score + 20 * margin - 9)."""
    rng = np.random.default_rng(seed)
    scores, margins = rng.uniform(0.3, 1.0, n), rng.uniform(0.0, 0.2, n)
    truth = 1 / (1 + np.exp(-(12 * scores + 20 * margins - 9)))
    return scores, margins, rng.random(n) < truth, truth


def test_a_fitted_calibrator_recovers_the_true_probabilities():
    scores, margins, correct, _ = synthetic(20_000, seed=0)
    calibrator = Calibrator.fit(scores, margins, correct)
    assert calibrator.score_weight == pytest.approx(12, rel=0.15)
    assert calibrator.margin_weight == pytest.approx(20, rel=0.2)
    # On fresh answers: calibrated, where the raw score is not.
    scores, margins, correct, truth = synthetic(20_000, seed=1)
    calibrated = calibrator.probabilities(scores, margins)
    assert np.abs(calibrated - truth).mean() < 0.03
    assert expected_calibration_error(calibrated, correct) < 0.02
    assert expected_calibration_error(scores, correct) > 0.1
    assert calibrator.probability(0.9, 0.1) == pytest.approx(
        calibrator.probabilities([0.9], [0.1])[0]
    )


def test_reliability_bins_count_every_answer_once():
    p = [0.05, 0.15, 0.15, 0.95, 1.0]
    rows = reliability(p, [False, True, False, True, True], bins=10)
    assert [row["count"] for row in rows] == [1, 2, 2]  # 1.0 falls in the last bin
    assert rows[1]["right"] == 0.5 and rows[-1]["high"] == 1.0


def test_a_calibrator_round_trips_through_json_and_refuses_a_broken_one():
    calibrator = Calibrator(3.0, 5.0, -2.0, fitted_on=40)
    assert Calibrator.from_dict(calibrator.as_dict()) == calibrator
    with pytest.raises(ConfigError, match="unusable"):
        Calibrator.from_dict({"score_weight": "x"})


@pytest.mark.parametrize(
    "correct, message",
    [([True] * 20, "right and wrong"), ([True, False] * 3, "at least 10")],
)
def test_fitting_needs_both_outcomes_and_enough_answers(correct, message):
    n = len(correct)
    with pytest.raises(ConfigError, match=message):
        Calibrator.fit([0.5] * n, [0.1] * n, correct)
