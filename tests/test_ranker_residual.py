"""The starter's residual network: what it learns that linear weights cannot, how a taxonomy's
fit keeps it, and how a stored one is read back or refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.ranker.candidates import Candidates
from models_app.siamese.ranker.features import FEATURES
from models_app.siamese.ranker.files import cold_start_ranker, load_ranker, save_ranker
from models_app.siamese.ranker.model import (
    RankingExample,
    fit_ranker,
    hand_prior,
    recalibrated,
    with_residual,
)
from models_app.siamese.ranker.residual import ResidualConfig
from models_app.siamese.ranker.verdict_history import VerdictHistory

COLUMN = {name: i for i, name in enumerate(FEATURES)}
SMALL = ResidualConfig(hidden=8, networks=2, epochs=60, batch=16)


def either_word_examples(count: int, seed: int) -> list[RankingExample]:
    """Two candidates a text: the right one has exactly one of two signals, the wrong one both
    or neither. Any linear weights rank half of them right (each sign of each weight wins two
    of the four kinds and loses the other two)."""
    rng = np.random.default_rng(seed)
    examples = []
    for _ in range(count):
        features = rng.normal(0, 0.01, size=(2, len(FEATURES))).astype(np.float32)
        right = int(rng.integers(2))
        one = int(rng.integers(2))
        both = bool(rng.integers(2))
        features[right, COLUMN["member_exact"]] = float(one == 0)
        features[right, COLUMN["name_words"]] = float(one == 1)
        features[1 - right, COLUMN["member_exact"]] = float(both)
        features[1 - right, COLUMN["name_words"]] = float(both)
        features[:, COLUMN["best"]] = 0.8
        candidates = Candidates(np.array([1, 2]), features, features[:, 0], np.array([-1, -1]))
        examples.append(RankingExample(candidates, [1, 2][right]))
    return examples


def accuracy(ranker, examples) -> float:
    tops = [
        e.candidates.groups[int(np.argmax(ranker.scores(e.candidates.features)))] for e in examples
    ]
    return float(np.mean([top == e.group_id for e, top in zip(examples, tops, strict=True)]))


@pytest.fixture(scope="module")
def starter_like():
    """A calibrated ranker with a residual, fitted as the starter is."""
    train = either_word_examples(300, seed=0)
    linear = fit_ranker(train, prior=hand_prior())
    return linear, recalibrated(with_residual(linear, train, SMALL), train)


def test_a_residual_learns_what_linear_weights_cannot(starter_like):
    linear, starter = starter_like
    held = either_word_examples(300, seed=1)

    assert accuracy(linear, held) < 0.65
    assert accuracy(starter, held) > 0.95
    assert starter.residual.hidden_weights.shape == (16, len(FEATURES))
    # Calibrated again over the scores with the residual, it is sure of what it gets right.
    right = held[0].candidates
    scores = starter.scores(right.features)
    assert starter.probabilities(scores, 0.8).max() > 0.8


def test_verdicts_move_the_linear_weights_and_keep_the_starters_residual(starter_like):
    _, starter = starter_like
    # Verdicts whose right group also has the curators' vote: the linear weights learn it.
    verdicts = either_word_examples(120, seed=2)
    for example in verdicts:
        example.candidates.features[:, COLUMN["judged_vote"]] = 0.0
        example.candidates.features[
            int(np.flatnonzero(example.candidates.groups == example.group_id)[0]),
            COLUMN["judged_vote"],
        ] = 1.0
    fitted = fit_ranker(verdicts, prior=starter)

    assert fitted.residual is starter.residual
    assert fitted.fitted_on == 120 and fitted.calibrated
    assert not np.allclose(fitted.weights, starter.weights)
    x = fitted._standardize(verdicts[0].candidates.features)
    expected = x @ fitted.weights + starter.residual.scores(x)
    assert np.allclose(fitted.scores(verdicts[0].candidates.features), expected)
    # A ranker without a residual fits as it always did: none is made up.
    assert fit_ranker(verdicts, prior=hand_prior()).residual is None


def test_a_ranker_with_its_residual_survives_a_save_and_load(tmp_path, starter_like):
    _, starter = starter_like
    save_ranker(tmp_path, starter, VerdictHistory())
    loaded, _ = load_ranker(tmp_path)

    held = either_word_examples(20, seed=3)
    for example in held:
        features = example.candidates.features
        assert np.allclose(loaded.scores(features), starter.scores(features), atol=1e-5)
    assert loaded.residual.hidden_weights.shape == starter.residual.hidden_weights.shape


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda r: r.update(hidden_weights=[[0.0] * 3] * len(r["hidden_bias"])), "residual"),
        (lambda r: r.update(output_weights=r["output_weights"][:-1]), "residual"),
        (lambda r: r["hidden_bias"].__setitem__(0, float("nan")), "finite"),
        (lambda r: r.pop("output_weights"), "output_weights"),
        (lambda r: r.update(hidden_bias=[]), "residual"),
    ],
)
def test_a_damaged_residual_is_refused_by_name(tmp_path, starter_like, damage, message):
    _, starter = starter_like
    save_ranker(tmp_path, starter, VerdictHistory())
    raw = json.loads((tmp_path / "ranker.json").read_text())
    damage(raw["residual"])
    (tmp_path / "ranker.json").write_text(json.dumps(raw))
    with pytest.raises(ArtifactError, match=message):
        load_ranker(tmp_path)


def test_a_residual_that_is_not_an_object_is_refused(tmp_path):
    save_ranker(tmp_path, hand_prior(), VerdictHistory())
    raw = json.loads((tmp_path / "ranker.json").read_text())
    raw["residual"] = [1, 2, 3]
    (tmp_path / "ranker.json").write_text(json.dumps(raw))
    with pytest.raises(ArtifactError, match="residual must be an object"):
        load_ranker(tmp_path)


def test_the_shipped_starter_carries_its_residual():
    starter = cold_start_ranker()

    assert starter.calibrated
    assert starter.residual is not None
    units = len(starter.residual.hidden_bias)
    assert starter.residual.hidden_weights.shape == (units, len(FEATURES)) and units >= 64
    assert np.abs(starter.residual.output_weights).max() > 0
