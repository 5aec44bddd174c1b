"""Curator feedback in a batch: the feedback margin on the rows of curator inputs, and a false
match learnt as a negative of its text."""

from __future__ import annotations

import random

import numpy as np
import pytest

from models_app.siamese.configs import ConfigError
from models_app.siamese.encoders import encoder_class, parse_config
from models_app.siamese.losses import SDMLLoss
from models_app.siamese.sampling import BatchSampler, FeedbackExample, prepare_data
from models_app.siamese.train import loss_step, train_encoder
from tests.engine_train.conftest import ENCODER, GROUPS, MEMBERS, config

JAVA_BARISTA = [
    FeedbackExample("java barista", 2, True, "barista"),
    FeedbackExample("java barista", 0, False, "java developer"),  # the curator's false match
]


def test_a_feedback_margin_marks_the_rows_of_curator_inputs_and_no_other():
    cfg = config(replay_share=0.5, batch_size=200, typo_share=0.0, feedback_margin=0.05)
    data = prepare_data(MEMBERS, JAVA_BARISTA, config=cfg)
    batch = BatchSampler(data, cfg, random.Random(0), fine_tuning=True).batch()
    marked = [m > 0 for m in batch["margins"]]
    curator_rows = [anchor == "java barista" for anchor in batch["anchors"]]
    assert marked == curator_rows
    assert set(batch["margins"]) == {0.0, 0.05}
    # The false match's rows (its rejected member as the positive) are not the curator's.
    assert "java developer" in batch["positives"]
    plain = config(replay_share=0.5, batch_size=200, typo_share=0.0)
    assert (
        "margins"
        not in BatchSampler(
            prepare_data(MEMBERS, JAVA_BARISTA, config=plain),
            plain,
            random.Random(0),
            fine_tuning=True,
        ).batch()
    )


def test_a_text_curators_only_rejected_carries_the_margin_too():
    rejected_only = [FeedbackExample("java barista", 0, False, "java developer")]
    cfg = config(replay_share=0.5, batch_size=200, typo_share=0.0, feedback_margin=0.05)
    data = prepare_data(MEMBERS, rejected_only, config=cfg)
    batch = BatchSampler(data, cfg, random.Random(0), fine_tuning=True).batch()
    own_rows = [i for i, group in enumerate(batch["groups"]) if group < 0]  # its own group
    assert own_rows
    assert all(batch["margins"][i] == 0.05 for i in own_rows)
    assert all(m == 0.0 for i, m in enumerate(batch["margins"]) if i not in own_rows)


def test_a_curator_row_replaced_by_a_related_groups_pair_loses_its_margin():
    feedback = [FeedbackExample("java barista", 2, True, "barista")]  # no false match
    cfg = config(
        replay_share=0.0, batch_size=200, typo_share=0.0, feedback_margin=0.05,
        hard_negative_share=1.0,
    )  # fmt: skip
    data = prepare_data(MEMBERS, feedback, config=cfg)
    sampler = BatchSampler(data, cfg, random.Random(0), fine_tuning=True)
    sampler.confusable = {2: [0]}  # every odd row becomes a pair of group 0
    batch = sampler.batch()
    assert batch["anchors"][0::2] == ["java barista"] * 100
    assert batch["margins"][0::2] == [0.05] * 100
    assert set(batch["groups"][1::2]) == {0} and batch["margins"][1::2] == [0.0] * 100


def test_the_loss_step_turns_a_cosine_margin_into_twice_that_in_squared_distance():
    encoder = encoder_class("ngram_bag").create([t for _, t in MEMBERS], parse_config(ENCODER))
    encoder.eval()  # no dropout: the same embeddings for both calls
    seen = {}

    class Recording(SDMLLoss):
        def forward(self, a, b, group_ids=None, positive_margin=None):
            seen["margin"] = positive_margin
            return super().forward(a, b, group_ids, positive_margin)

    batch = {
        "groups": [0, 1],
        "anchors": ["java dev", "nurse"],
        "positives": ["java developer", "staff nurse"],
    }
    loss_step(encoder, Recording(), "sdml", {**batch, "margins": [0.05, 0.0]}, random.Random(0))
    assert seen["margin"].tolist() == pytest.approx([0.1, 0.0])
    loss_step(encoder, Recording(), "sdml", batch, random.Random(0))
    assert seen["margin"] is None


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"feedback_margin": -0.1}, "feedback_margin must be in"),
        ({"feedback_margin": 1.5}, "feedback_margin must be in"),
        (
            {"feedback_margin": 0.05, "loss": "contrastive"},
            "feedback_margin needs a loss that takes one",
        ),
    ],
)
def test_impossible_feedback_margins_are_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        config(**overrides)


def test_a_fine_tune_with_a_feedback_margin_trains_end_to_end():
    cfg = config(max_steps=20, replay_share=0.5, feedback_margin=0.05, select_best=False)
    parent = train_encoder(prepare_data(MEMBERS, config=config()), ENCODER, config()).encoder
    result = train_encoder(
        prepare_data(MEMBERS, JAVA_BARISTA, config=cfg), ENCODER, cfg, parent=parent
    )
    assert result.steps == 20
    assert np.isfinite(result.metrics["validation_accuracy"])


@pytest.mark.parametrize("loss", ["sdml", "triplet"])
def test_in_batch_losses_see_a_false_match_as_a_negative_column_of_its_text(loss):
    cfg = config(
        loss=loss,
        replay_share=0.0,
        batch_size=64,
        typo_share=0.0,
        extra_words_share=0.0,
        synonym_share=0.0,
    )
    data = prepare_data(MEMBERS, JAVA_BARISTA, config=cfg)
    batch = BatchSampler(data, cfg, random.Random(0), fine_tuning=True).batch()
    rows = list(zip(batch["groups"], batch["anchors"], batch["positives"], strict=True))
    # Every even row is the judged text (replay 0); the row after it holds the rejected member
    # as its positive, which in-batch losses use as a negative for every other row's anchor.
    for i in range(0, 64, 2):
        assert rows[i] == (2, "java barista", "barista")
        group, anchor, positive = rows[i + 1]
        assert (group, positive) == (0, "java developer")
        assert anchor in GROUPS[0] and anchor != "java developer"


def test_a_text_curators_only_rejected_gets_rows_of_its_own_beside_the_member():
    cfg = config(loss="sdml", replay_share=0.0, batch_size=400, typo_share=0.0)
    data = prepare_data(MEMBERS, JAVA_BARISTA[1:], config=cfg)
    batch = BatchSampler(data, cfg, random.Random(0), fine_tuning=True).batch()
    own = [i for i, text in enumerate(batch["positives"]) if text == "java barista"]
    # No group is known for it, so each of its rows has a group id no other row has.
    assert len(own) == 200 and all(batch["groups"][i] < 0 for i in own)
    assert len({batch["groups"][i] for i in own}) == len(own)
    # Drawn on an even row, the row after it holds the member it was rejected for.
    assert all(batch["positives"][i + 1] == "java developer" for i in own if i % 2 == 0)
    assert all(batch["groups"][i + 1] == 0 for i in own if i % 2 == 0)


def test_a_false_match_on_a_member_the_training_data_lacks_is_not_learnt():
    # A held-out curator member is left out of the training data; its verdicts must not
    # bring it back as a positive.
    held_out = FeedbackExample("java barista", 0, False, "java coffee developer")
    cfg = config(loss="sdml", replay_share=0.0, batch_size=64)
    data = prepare_data(MEMBERS, [JAVA_BARISTA[0], held_out], config=cfg)
    batch = BatchSampler(data, cfg, random.Random(0), fine_tuning=True).batch()
    assert "java coffee developer" not in batch["positives"] + batch["anchors"]


def test_a_false_match_pushes_its_text_away_from_the_rejected_member_under_an_in_batch_loss():
    # The triplet loss mines its negatives in the batch, as SDML does; on a four-group toy
    # SDML pulls every string together, so the effect is checked where it is visible.
    # bench/finetune_drift.py measures it under SDML on O*NET.
    cfg = config(loss="triplet", max_steps=60, learning_rate=0.01)
    parent = train_encoder(prepare_data(MEMBERS, config=cfg), ENCODER, cfg).encoder
    # As a fine-tune runs: half feedback, and the last weights (the best by validation may be
    # the parent's own).
    cfg = config(
        loss="triplet", max_steps=30, learning_rate=0.01, replay_share=0.5, select_best=False
    )

    def cosine_to_rejected(feedback) -> float:
        data = prepare_data(MEMBERS, feedback, config=cfg)
        encoder = train_encoder(data, ENCODER, cfg, parent=parent).encoder
        text, member = encoder.encode(["java barista", "java developer"])
        return float(text @ member)

    assert cosine_to_rejected(JAVA_BARISTA) < cosine_to_rejected(JAVA_BARISTA[:1]) - 0.2
