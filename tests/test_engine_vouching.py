"""The threshold above which answers are vouched for, from evidence with a lower bound."""

from __future__ import annotations

import numpy as np
import pytest

from models_app.siamese.vouching import (
    precision_exact_lower_bound,
    precision_exact_upper_bound,
    precision_lower_bound,
    vouching_threshold,
)


def test_the_lower_bound_is_below_the_precision_and_closes_in_with_more_answers():
    assert precision_lower_bound(0, 0) == 0.0
    few, many = precision_lower_bound(19, 20), precision_lower_bound(950, 1000)
    assert few < many < 0.95
    assert many == pytest.approx(0.9365, abs=0.001)  # Wilson, one-sided 95%
    assert precision_lower_bound(10, 10) < 1.0


@pytest.mark.parametrize(
    ("right", "answers", "upper"),
    # The beta distribution's 95% quantile at (right + 1, answers - right), as tabulated.
    [(0, 1, 0.95), (0, 2, 0.776393), (0, 5, 0.45072), (1, 10, 0.394163), (45, 50, 0.959763),
     (900, 1000, 0.915215), (9000, 10000, 0.904898)],
)  # fmt: skip
def test_the_exact_upper_bound_is_clopper_pearsons(right, answers, upper):
    assert precision_exact_upper_bound(right, answers) == pytest.approx(upper, abs=1e-6)
    # The lower bound mirrors it: the upper bound of the wrong answers' share, from 1.
    assert precision_exact_lower_bound(answers - right, answers) == pytest.approx(
        1 - upper, abs=1e-6
    )


def test_the_exact_bounds_of_no_answers_and_of_all_right():
    assert precision_exact_upper_bound(0, 0) == 1.0 and precision_exact_lower_bound(0, 0) == 0.0
    assert precision_exact_upper_bound(7, 7) == 1.0
    assert precision_exact_lower_bound(0, 7) == 0.0
    for right in (-1, 8):
        with pytest.raises(ValueError, match="right of 7 answers"):
            precision_exact_upper_bound(right, 7)


def test_the_threshold_is_the_lowest_probability_whose_answers_show_the_target():
    rng = np.random.default_rng(0)
    # 600 answers at 0.99 that are right 99% of the time, 400 at 0.6 that are right 60%.
    p = np.r_[np.full(600, 0.99), np.full(400, 0.6)]
    right = np.r_[rng.random(600) < 0.99, rng.random(400) < 0.6]
    found = vouching_threshold(p, right, target=0.95)
    assert found.threshold == 0.99
    assert found.answers == 600 and found.coverage == 0.6
    assert found.lower_bound >= 0.95 and found.precision >= found.lower_bound
    # A lower target takes in more answers only where the bound of all the answers taken (the
    # 0.6 ones pooled with the surer) allows it: about 83% right in all.
    assert vouching_threshold(p, right, target=0.85).threshold == 0.99
    assert vouching_threshold(p, right, target=0.75).threshold == 0.6


def test_too_little_evidence_shows_no_threshold_and_says_how_much_more():
    found = vouching_threshold([0.99] * 30, [True] * 29 + [False], target=0.95)
    assert found.threshold is None and found.coverage == 0.0
    # At 29 right of 30 (96.7%) the bound reaches 95% only with far more such answers.
    assert found.more_needed is not None and found.more_needed > 100
    enough = vouching_threshold(
        [0.99] * (30 + found.more_needed),
        [True] * 29 + [False] + [True] * found.more_needed,
        target=0.95,
    )
    assert enough.threshold == 0.99
    # Sure answers right less often than the target: more of them would never show it.
    assert (
        vouching_threshold([0.99] * 100, [True] * 90 + [False] * 10, target=0.95).more_needed
        is None
    )


@pytest.mark.parametrize("target", [0.0, 1.0, 1.5, -0.2])
def test_a_target_outside_zero_to_one_is_refused(target):
    with pytest.raises(ValueError, match="target precision"):
        vouching_threshold([0.9], [True], target=target)
