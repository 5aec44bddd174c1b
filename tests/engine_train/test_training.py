"""Training an encoder: it learns, every loss trains, progress is reported, a seed repeats a run,
a run resumes from its checkpoint, impossible specs are refused before any work."""

from __future__ import annotations

import json
import random

import pytest
import torch

from models_app.siamese.configs import ConfigError
from models_app.siamese.sampling import BatchSampler, prepare_data
from models_app.siamese.specs import parse_model_spec
from models_app.siamese.train import CHECKPOINT, train_encoder
from tests.engine_train.conftest import ENCODER, GROUPS, MEMBERS, config


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


def test_a_run_stopped_by_its_time_budget_validates_where_it_stopped(monkeypatch):
    """A CPU run that hits its minutes between two validations ends its curve where its
    training ended, not at the last validation before it (the run page drew one dot)."""
    from models_app.siamese import train as train_module

    ticks = iter(range(10**6))
    # A clock that moves a second a call: the one-minute budget ends after about 60 calls.
    monkeypatch.setattr(train_module.time, "monotonic", lambda: float(next(ticks)))
    cfg = config(max_steps=10_000, eval_every=1_000, max_minutes=1.0)
    result = train_encoder(prepare_data(MEMBERS, config=cfg), ENCODER, cfg)
    assert result.stopped_because == "time budget"
    assert 0 < result.steps < 1_000
    # The one validation, where it stopped.
    assert [point["step"] for point in result.history] == [result.steps]
