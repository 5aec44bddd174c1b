"""Fine-tuning: from the parent, never ending worse; its result blended with a share of the
parent's (or the anchor's) weights; feedback mixed with replayed taxonomy pairs and augmented."""

from __future__ import annotations

import copy
import random

import numpy as np
import pytest

from models_app.siamese.configs import ConfigError
from models_app.siamese.sampling import BatchSampler, FeedbackExample, prepare_data
from models_app.siamese.train import blend_weights, train_encoder, validation_accuracy
from tests.engine_train.conftest import ENCODER, MEMBERS, config, weights


def test_fine_tuning_starts_from_the_parent_and_never_ends_worse():
    cfg = config(max_steps=20)
    data = prepare_data(MEMBERS, config=cfg)
    parent = train_encoder(data, ENCODER, cfg).encoder
    feedback = [FeedbackExample("java barista", 2, True, "barista")]
    tuned = train_encoder(prepare_data(MEMBERS, feedback, config=cfg), ENCODER, cfg, parent=parent)
    assert tuned.history[0]["step"] == 0  # the parent's own score is the bar to beat
    assert tuned.metrics["validation_accuracy"] >= tuned.history[0]["validation_accuracy"]
    assert tuned.encoder is not parent


def test_a_fine_tune_without_best_selection_keeps_its_last_weights_and_runs_to_the_end():
    cfg = config(max_steps=20)
    data = prepare_data(MEMBERS, config=cfg)
    parent = train_encoder(data, ENCODER, cfg).encoder
    feedback = [FeedbackExample("java barista", 2, True, "barista")]
    last = config(max_steps=40, eval_every=5, patience=1, replay_share=0.5, select_best=False)
    tuned = train_encoder(
        prepare_data(MEMBERS, feedback, config=last), ENCODER, last, parent=parent
    )
    # patience=1 would have stopped it at the first evaluation that did not beat the parent.
    assert (tuned.steps, tuned.stopped_because) == (40, "max_steps")
    before, after = parent.encode(["java barista"]), tuned.encoder.encode(["java barista"])
    assert not np.allclose(before, after)


def test_a_fine_tune_keeps_the_configured_share_of_its_parents_weights():
    cfg = config(max_steps=20)
    parent = train_encoder(prepare_data(MEMBERS, config=cfg), ENCODER, cfg).encoder
    feedback = [FeedbackExample("java barista", 2, True, "barista")]
    common = {"max_steps": 20, "select_best": False, "replay_share": 0.5, "validation_share": 0.25}
    plain_cfg = config(**common)
    blended_cfg = config(**common, keep_parent_share=0.25)
    data = prepare_data(MEMBERS, feedback, config=plain_cfg)
    assert data.validation
    before = weights(parent)
    plain = weights(train_encoder(data, ENCODER, plain_cfg, parent=parent).encoder)
    result = train_encoder(data, ENCODER, blended_cfg, parent=parent)
    blended = weights(result.encoder)
    assert not np.allclose(plain["dense.weight"], before["dense.weight"])  # it did learn
    for name, value in blended.items():
        np.testing.assert_allclose(value, 0.75 * plain[name] + 0.25 * before[name], atol=1e-6)
    for name, value in weights(parent).items():  # the parent (a served model) is untouched
        np.testing.assert_array_equal(value, before[name])
    # The accuracy it reports is the blended model's own.
    assert result.metrics["validation_accuracy"] == validation_accuracy(result.encoder, data)
    # The weights as trained stay at hand for a second phase to continue from: before the
    # blend, and before the rows of n-grams no member has are zeroed.
    trained = copy.deepcopy(result.trained_encoder)
    trained.after_training([text for _, text in data.train + data.validation])
    for name, value in weights(trained).items():
        np.testing.assert_allclose(value, plain[name], atol=1e-6)
    assert not np.array_equal(
        weights(result.trained_encoder)["bag.weight"], weights(trained)["bag.weight"]
    )


def test_without_a_blend_the_trained_weights_are_the_result():
    cfg = config(max_steps=5, eval_every=5)
    data = prepare_data(MEMBERS, config=cfg)
    built = train_encoder(data, ENCODER, cfg)
    assert built.trained_encoder is built.encoder
    unblended = config(max_steps=5, eval_every=5, select_best=False, keep_parent_share=0.0)
    tuned = train_encoder(data, ENCODER, unblended, parent=built.encoder)
    assert tuned.trained_encoder is tuned.encoder


def test_a_second_phase_blends_toward_the_anchor_not_the_model_it_started_from():
    cfg = config(max_steps=20)
    live = train_encoder(prepare_data(MEMBERS, config=cfg), ENCODER, cfg).encoder
    feedback = [FeedbackExample("java barista", 2, True, "barista")]
    phase = config(max_steps=10, select_best=False, replay_share=0.5)
    data = prepare_data(MEMBERS, feedback, config=phase)
    learnt = train_encoder(data, ENCODER, phase, parent=live).encoder
    assert not np.allclose(weights(learnt)["dense.weight"], weights(live)["dense.weight"])
    plain = weights(train_encoder(data, ENCODER, phase, parent=learnt).encoder)
    kept = config(max_steps=10, select_best=False, replay_share=0.5, keep_parent_share=0.5)
    caught_up = train_encoder(data, ENCODER, kept, parent=learnt, anchor=live).encoder
    for name, value in weights(caught_up).items():
        np.testing.assert_allclose(value, 0.5 * plain[name] + 0.5 * weights(live)[name], atol=1e-6)


def test_blending_refuses_what_cannot_be_blended():
    cfg = config(max_steps=5, eval_every=5)
    data = prepare_data(MEMBERS, config=cfg)
    model = train_encoder(data, ENCODER, cfg).encoder
    with pytest.raises(ConfigError, match="needs a parent"):
        train_encoder(data, ENCODER, cfg, anchor=model)
    narrower = train_encoder(data, {**ENCODER, "output_dim": 8}, cfg).encoder
    with pytest.raises(ConfigError, match="same architecture"):
        blend_weights(model, narrower, keep=0.5)


def test_fine_tuning_refuses_a_parent_of_another_config():
    cfg = config(max_steps=5, eval_every=5)
    data = prepare_data(MEMBERS, config=cfg)
    parent = train_encoder(data, ENCODER, cfg).encoder
    with pytest.raises(ConfigError, match="another encoder config"):
        train_encoder(data, {**ENCODER, "output_dim": 8}, cfg, parent=parent)


def test_fine_tuning_mixes_feedback_and_replayed_taxonomy_pairs_as_configured():
    feedback = [FeedbackExample("java barista", 2, True, "barista")]
    anchors = {}
    for replay in (0.0, 0.5):
        cfg = config(replay_share=replay, feedback_share=0.0, batch_size=200, typo_share=0.0)
        data = prepare_data(MEMBERS, feedback, config=cfg)
        sampler = BatchSampler(data, cfg, random.Random(0), fine_tuning=True)
        anchors[replay] = sampler.batch()["anchors"].count("java barista") / 200
    assert anchors[0.0] == 1.0  # feedback only
    assert 0.35 < anchors[0.5] < 0.65  # half feedback, half taxonomy pairs replayed


def test_feedback_anchors_are_augmented_as_often_as_configured():
    feedback = [FeedbackExample("java barista", 2, True, "barista")]
    anchors = {}
    for share in (0.0, 1.0):
        cfg = config(replay_share=0.0, batch_size=100, typo_share=1.0, feedback_augment_share=share)
        sampler = BatchSampler(
            prepare_data(MEMBERS, feedback, config=cfg), cfg, random.Random(0), fine_tuning=True
        )
        anchors[share] = sampler.batch()["anchors"]
    assert set(anchors[0.0]) == {"java barista"}
    # Every anchor got a typo; a few typos may land on the same character.
    assert sum(a != "java barista" for a in anchors[1.0]) >= 95
