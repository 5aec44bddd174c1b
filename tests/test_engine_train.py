from __future__ import annotations

import copy
import json
import random

import numpy as np
import pytest
import torch

from models_app.siamese.encoders import ConfigError, encoder_class, parse_config
from models_app.siamese.losses import SDMLLoss
from models_app.siamese.optim import Optimizer, RowSparseAdam
from models_app.siamese.sampling import BatchSampler, FeedbackExample, prepare_data
from models_app.siamese.specs import TrainConfig, parse_model_spec
from models_app.siamese.train import (
    CHECKPOINT,
    blend_weights,
    loss_step,
    train_encoder,
    validation_accuracy,
)

GROUPS = {
    0: ["java developer", "software engineer", "python developer", "backend developer"],
    1: ["registered nurse", "icu nurse", "staff nurse", "charge nurse"],
    2: ["barista", "coffee maker", "espresso bar attendant", "coffee shop server"],
    3: ["truck driver", "long haul trucker", "cdl truck driver", "tractor trailer driver"],
}
MEMBERS = [(group, text) for group, texts in GROUPS.items() for text in texts]
ENCODER = {"kind": "ngram_bag", "buckets": 4096, "embedding_dim": 16, "output_dim": 16}


def config(**overrides) -> TrainConfig:
    base = {
        "batch_size": 8, "max_steps": 30, "eval_every": 10, "patience": 10,
        "validation_share": 0.0, "learning_rate": 0.05, "threads": 1,
    }  # fmt: skip
    return TrainConfig(**{**base, **overrides})


def test_training_improves_the_nearest_neighbour_accuracy():
    data = prepare_data(MEMBERS, config=config())
    result = train_encoder(data, ENCODER, config())
    first, best = result.history[0]["validation_accuracy"], result.metrics["validation_accuracy"]
    assert best >= first
    assert best >= 0.75
    assert result.steps == 30
    assert (result.device, result.stopped_because) == ("cpu", "max_steps")


@pytest.mark.parametrize("loss", ["contrastive", "hybrid", "s2net", "triplet", "sdml"])
def test_every_loss_trains_end_to_end(loss):
    cfg = config(loss=loss, max_steps=4, eval_every=4)
    result = train_encoder(prepare_data(MEMBERS, config=cfg), ENCODER, cfg)
    assert result.steps == 4
    assert 0.0 <= result.metrics["validation_accuracy"] <= 1.0


def test_progress_reports_stages_fractions_and_time_left():
    seen = []
    cfg = config(max_steps=40)
    train_encoder(
        prepare_data(MEMBERS, config=cfg), ENCODER, cfg, progress=lambda *a: seen.append(a)
    )
    stages = {stage for stage, _, _ in seen}
    assert {"train", "evaluate"} <= stages
    fractions = [fraction for stage, fraction, _ in seen if stage == "train"]
    assert fractions == sorted(fractions) and 0 < fractions[-1] <= 1
    assert all(eta is None or eta >= 0 for _, _, eta in seen)


def test_the_same_seed_gives_the_same_model():
    cfg = config(max_steps=10)
    data = prepare_data(MEMBERS, config=cfg)
    first = train_encoder(data, ENCODER, cfg).encoder.encode(["nurse", "barista"])
    second = train_encoder(data, ENCODER, cfg).encoder.encode(["nurse", "barista"])
    assert (first == second).all()


def test_an_interrupted_run_resumes_from_its_checkpoint(tmp_path):
    short, full = config(max_steps=20), config(max_steps=40)
    data = prepare_data(MEMBERS, config=short)
    first = train_encoder(data, ENCODER, short, checkpoint_dir=tmp_path)
    assert (tmp_path / CHECKPOINT).exists()
    with pytest.raises(ConfigError, match="written for other data or configs"):
        train_encoder(data, ENCODER, full, checkpoint_dir=tmp_path)
    resumed = train_encoder(data, ENCODER, short, checkpoint_dir=tmp_path)
    assert first.steps == 20
    assert resumed.steps == 20  # nothing left to do: it picked up at step 20, not at 0
    assert (first.metrics["resumed_from_step"], resumed.metrics["resumed_from_step"]) == (0, 20)
    assert [h["step"] for h in resumed.history] == [10, 20]


def test_a_checkpoint_from_before_the_feedback_margin_existed_still_resumes(tmp_path):
    cfg = config(max_steps=20)
    data = prepare_data(MEMBERS, config=cfg)
    train_encoder(data, ENCODER, cfg, checkpoint_dir=tmp_path)
    # Rewrite the fingerprint as code from before the option wrote it: no such field at all.
    saved = torch.load(tmp_path / CHECKPOINT, weights_only=False)
    saved["fingerprint"]["train_config"].pop("feedback_margin", None)
    torch.save(saved, tmp_path / CHECKPOINT)
    resumed = train_encoder(data, ENCODER, cfg, checkpoint_dir=tmp_path)
    assert resumed.metrics["resumed_from_step"] == 20
    # A run that does use a margin is another config: the old checkpoint does not fit it.
    with pytest.raises(ConfigError, match="written for other data or configs"):
        train_encoder(
            data, ENCODER, config(max_steps=20, feedback_margin=0.05), checkpoint_dir=tmp_path
        )


def test_a_checkpoint_for_other_data_can_be_discarded_instead_of_refused(tmp_path):
    cfg = config(max_steps=20)
    train_encoder(prepare_data(MEMBERS, config=cfg), ENCODER, cfg, checkpoint_dir=tmp_path)
    more = prepare_data([*MEMBERS, (0, "golang developer")], config=cfg)  # other data now
    fresh = train_encoder(
        more, ENCODER, cfg, checkpoint_dir=tmp_path, discard_stale_checkpoint=True
    )
    # It started at step 0 on the new data, and its own checkpoint replaced the stale one.
    assert [h["step"] for h in fresh.history] == [10, 20]
    again = train_encoder(more, ENCODER, cfg, checkpoint_dir=tmp_path)
    assert [h["step"] for h in again.history] == [10, 20]  # resumed: nothing left to do


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


def weights(encoder) -> dict[str, np.ndarray]:
    return {name: value.numpy().copy() for name, value in encoder.state_dict().items()}


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


def test_cuda_is_refused_clearly_where_there_is_none(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    cfg = config(device="cuda")
    with pytest.raises(ConfigError, match="CUDA is not available"):
        train_encoder(prepare_data(MEMBERS, config=cfg), ENCODER, cfg)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"training": {"loss": "magic"}}, "unknown loss 'magic'"),
        ({"training": {"batch_size": 1}}, "batch_size must be between"),
        ({"training": {"typo_share": 2}}, "typo_share must be in"),
        ({"training": {"epochs": 3}}, "unknown training option"),
        ({"training": {"max_steps": "many"}}, "max_steps must be an integer"),
        ({"encoder": {"kind": "gpt"}}, "unknown encoder kind 'gpt'"),
        ({"model": {}}, "unknown key"),
        ({"training": {"feedback_augment_share": 2}}, "feedback_augment_share must be in"),
        ({"training": {"keep_parent_share": 1}}, r"keep_parent_share must be in \[0, 1\)"),
        ([], "must be a JSON object"),
    ],
)
def test_impossible_specs_are_refused_before_any_work(raw, message):
    with pytest.raises(ConfigError, match=message):
        parse_model_spec(raw)


def test_training_needs_two_groups():
    with pytest.raises(ConfigError, match="at least two groups"):
        prepare_data([(0, "a"), (0, "b")], config=config())


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


def test_related_groups_are_hard_negatives_from_the_first_step():
    cfg = config(loss="contrastive", hard_negative_share=1.0, typo_share=0.0)
    data = prepare_data(MEMBERS, config=cfg, related=[(0, 3)])
    assert data.related == {0: [3], 3: [0]}
    sampler = BatchSampler(data, cfg, random.Random(0))
    batch = sampler.batch()
    checked = 0
    for group, (_anchor, negative) in zip(
        [g for g in batch["groups"] for _ in range(cfg.negatives_per_positive)],
        batch["negatives"],
        strict=True,
    ):
        if group == 0:
            assert negative in GROUPS[3]
            checked += 1
    assert checked > 0


def test_a_run_stopped_before_its_first_evaluation_still_reports_a_real_accuracy():
    # A time budget can end a build before step eval_every; its metric must be a number that
    # JSON (and PostgreSQL's jsonb) accepts, not -Infinity.
    cfg = config(max_steps=30, eval_every=10, max_minutes=1e-9)
    result = train_encoder(prepare_data(MEMBERS, config=cfg), ENCODER, cfg)
    assert (result.stopped_because, result.history) == ("time budget", [])
    accuracy = result.metrics["validation_accuracy"]
    assert 0.0 <= accuracy <= 1.0
    json.dumps(result.metrics, allow_nan=False)


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


# --- the sparse optimizer ------------------------------------------------------------------------


def _sparse_steps(optimizer_class, table, batches, *, state=None, **options):
    """Runs ``optimizer_class`` over ``batches`` of bag ids on a copy of ``table``; returns the
    table and the optimizer's state dict."""
    bag = torch.nn.EmbeddingBag(*table.shape, mode="mean", sparse=True)
    with torch.no_grad():
        bag.weight.copy_(table)
    optimizer = optimizer_class(bag.parameters(), lr=0.01, **options)
    if state is not None:
        optimizer.load_state_dict(copy.deepcopy(state))  # loading shares the tensors it is given
    for ids, offsets in batches:
        optimizer.zero_grad(set_to_none=True)
        bag(ids, offsets).sin().sum().backward()
        optimizer.step()
    return bag.weight.detach().clone(), optimizer.state_dict()


def _bags(seed, steps, *, rows=2000, bag_size=6, bags=40):
    generator = torch.Generator().manual_seed(seed)
    offsets = torch.arange(0, bags * bag_size, bag_size)
    return [
        (torch.randint(0, rows, (bags * bag_size,), generator=generator), offsets)
        for _ in range(steps)
    ]


def test_row_sparse_adam_takes_sparse_adams_steps():
    table = torch.randn(2000, 8, generator=torch.Generator().manual_seed(0))
    batches = _bags(1, 40)  # 240 ids of 2,000 rows a step: a dozen rows drawn twice a batch
    ours, our_state = _sparse_steps(RowSparseAdam, table, batches)
    theirs, their_state = _sparse_steps(torch.optim.SparseAdam, table, batches)
    assert not torch.equal(ours, table)
    # Only the summing order of a row's duplicate gradients may differ.
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    for ours_state, theirs_state in zip(
        our_state["state"].values(), their_state["state"].values(), strict=True
    ):
        assert type(ours_state["step"]) is int
        assert ours_state["step"] == theirs_state["step"] == 40
        torch.testing.assert_close(ours_state["exp_avg"], theirs_state["exp_avg"])
        torch.testing.assert_close(ours_state["exp_avg_sq"], theirs_state["exp_avg_sq"])
    untouched = torch.ones(2000, dtype=torch.bool)
    untouched[torch.cat([ids for ids, _ in batches])] = False
    assert untouched.any()
    assert torch.equal(ours[untouched], table[untouched])  # rows no step touched stay as they were


def test_row_sparse_adam_is_bit_for_bit_sparse_adam_when_no_row_repeats_in_a_batch():
    table = torch.randn(500, 8, generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(2)
    batches = [
        (torch.randperm(500, generator=generator)[:60], torch.arange(0, 60, 3)) for _ in range(25)
    ]
    ours, _ = _sparse_steps(RowSparseAdam, table, batches)
    theirs, _ = _sparse_steps(torch.optim.SparseAdam, table, batches)
    assert torch.equal(ours, theirs)


def test_row_sparse_adam_resumes_from_a_sparse_adam_checkpoint():
    table = torch.randn(2000, 8, generator=torch.Generator().manual_seed(0))
    first, later = _bags(3, 10), _bags(4, 10)
    middle, their_state = _sparse_steps(torch.optim.SparseAdam, table, first)
    resumed, _ = _sparse_steps(RowSparseAdam, middle, later, state=their_state)
    straight, _ = _sparse_steps(torch.optim.SparseAdam, middle, later, state=their_state)
    torch.testing.assert_close(resumed, straight, rtol=1e-5, atol=1e-6)


def test_row_sparse_adam_maximizes_as_sparse_adam_does():
    table = torch.randn(2000, 8, generator=torch.Generator().manual_seed(0))
    batches = _bags(5, 10)
    ours, _ = _sparse_steps(RowSparseAdam, table, batches, maximize=True)
    theirs, _ = _sparse_steps(torch.optim.SparseAdam, table, batches, maximize=True)
    minimized, _ = _sparse_steps(RowSparseAdam, table, batches)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(ours, minimized)


def test_row_sparse_adam_updates_a_plain_embeddings_rows_as_sparse_adam_does():
    results = []
    for optimizer_class in (RowSparseAdam, torch.optim.SparseAdam):
        torch.manual_seed(0)
        embedding = torch.nn.Embedding(50, 4, sparse=True)
        optimizer = optimizer_class(embedding.parameters(), lr=0.05)
        for step in range(5):
            optimizer.zero_grad(set_to_none=True)
            embedding(torch.tensor([[1, 7, 7], [step, 30, 1]])).square().sum().backward()
            optimizer.step()
        results.append(embedding.weight.detach())
    torch.testing.assert_close(*results)


def test_a_step_without_rows_counts_but_changes_nothing():
    bag = torch.nn.EmbeddingBag(10, 4, mode="sum", sparse=True)
    before = bag.weight.detach().clone()
    optimizer = RowSparseAdam(bag.parameters(), lr=0.1)
    bag(torch.zeros(0, dtype=torch.long), torch.zeros(1, dtype=torch.long)).sum().backward()
    assert bag.weight.grad._nnz() == 0
    optimizer.step()
    assert torch.equal(bag.weight, before)
    assert optimizer.state[bag.weight]["step"] == 1  # as SparseAdam counts it


def test_row_sparse_adam_refuses_a_dense_gradient_before_changing_anything():
    bag = torch.nn.EmbeddingBag(10, 2, sparse=True)
    dense = torch.nn.Parameter(torch.zeros(3, 2))
    before = bag.weight.detach().clone()
    optimizer = RowSparseAdam([bag.weight, dense], lr=0.01)
    (bag(torch.tensor([1, 2]), torch.tensor([0])).sum() + dense.sum()).backward()
    with pytest.raises(RuntimeError, match="sparse gradients of whole rows"):
        optimizer.step()
    assert torch.equal(bag.weight, before)


def test_row_sparse_adam_refuses_a_gradient_sparse_in_every_dimension():
    weight = torch.nn.Parameter(torch.zeros(3, 2))
    optimizer = RowSparseAdam([weight], lr=0.01)
    weight.grad = torch.ones(3, 2).to_sparse()  # scalar values, two sparse dimensions
    with pytest.raises(RuntimeError, match="sparse gradients of whole rows"):
        optimizer.step()


def test_the_training_optimizer_uses_row_sparse_adam_for_the_bucket_table():
    encoder = encoder_class("ngram_bag").create([t for _, t in MEMBERS], parse_config(ENCODER))
    optimizer = Optimizer(encoder, torch.nn.Identity(), 0.01)
    sparse_optimizers = [o for o in optimizer.optimizers if isinstance(o, RowSparseAdam)]
    assert [p for o in sparse_optimizers for g in o.param_groups for p in g["params"]] == [
        encoder.bag.weight
    ]
    assert all(p is not encoder.bag.weight for p in optimizer.dense)
