"""A fine-tune promoted by the gate or forced live by an admin, what follows a promotion, a
rollback, and a failed run retried."""

from __future__ import annotations

import json
from unittest import mock

import pytest
import redis
from celery import current_app

from annotations.models import AuditEvent, ReviewItem
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.models import TrainingRun
from models_app.serving.engines import live_engine
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.training import retraining
from models_app.training.promotion import (
    RunStateError,
    live_version,
    model_version_rollback,
    promotion_finish,
    promotions_resend_pending,
    training_run_promote,
)
from models_app.training.retraining import finetune_run_request, training_run_retry
from models_app.training.run_execution import training_run_execute
from models_app.training.selectors.versions import model_version_was_live
from models_app.training.services import runs
from models_app.training.services.indexes import deployment_activate
from models_app.training.services.runs import run_checkpoint_dir, training_run_request
from tests.conftest import TINY_MODEL
from tests.retraining.conftest import (
    CORRECTIONS,
    TRAINABLE,
    correct_everything,
    finetune,
    group,
    run_queued,
)
from worker import tasks


def test_a_finetune_learns_the_corrections_and_is_promoted(taxonomy, curator, settings):
    settings.SIAMWEB_GATE_ALPHA = 1e-9  # the tiny suite swings; this test is about verdicts
    correct_everything(taxonomy, curator)
    live_before = live_version(taxonomy)

    run = finetune(taxonomy, training={"max_steps": 200})

    assert run.status == "promoted", run.gate_report
    assert run.parent_version == live_before
    assert live_version(taxonomy) == run.model_version
    assert run.model_version.parent == live_before
    report = run.gate_report
    assert report["decision"] == "promote"
    assert report["verdicts"]["count"] == len(CORRECTIONS)
    assert report["verdicts"]["candidate"] > report["verdicts"]["live"]
    assert {row["suite"] for row in report["metrics"]} >= {"frozen"}
    assert run.feedback_until == run.model_version.feedback_until > 0
    training = run.model_version.config["training"]
    # Replay beside the verdicts, curator inputs augmented, the last weights kept, blended with
    # a quarter of the live version's.
    assert (training["replay_share"], training["feedback_augment_share"]) == (0.5, 1.0)
    assert training["keep_parent_share"] == 0.25
    assert training["feedback_margin"] == 0.05  # past the search's trigram window
    assert training["select_best"] is False
    assert run.flip_report["counts"]["fixed"] >= 1
    # Real traffic compared as users would see it: each model with a ranker beside it.
    assert report["answers_moved"]["answered"] == "served"
    stages = report["stage_seconds"]
    assert set(stages) == {"learn", "index", "gate", "flips"}
    assert all(seconds >= 0 for seconds in stages.values())
    assert live_engine(taxonomy).model_label == run.model_version.label
    # The run is over: its half-gigabyte checkpoint, kept only for a retry, is gone.
    assert not run_checkpoint_dir(run).exists()


def test_an_admin_forces_a_rejected_candidate_live(taxonomy, admin_user):
    run = finetune(taxonomy)
    assert run.status == "rejected"
    live_before = live_version(taxonomy)
    promoted = training_run_promote(run=run, actor=admin_user)
    assert promoted.status == "promoted"
    assert promoted.gate_report["forced_by"] == "ada"
    assert promoted.gate_report["replaced_version"] == live_before.id
    assert live_version(taxonomy) == run.model_version
    # The slow part waits for a worker; the promotion itself is done.
    assert promoted.flip_report["pending"] is True
    finished = promotion_finish(run_id=run.id)
    assert set(finished.flip_report["counts"]) == {
        "fixed",
        "broken",
        "changed",
        "confirmed_now_wrong",
    }
    assert finished.flip_report["compared"] == 0  # no input was ever submitted here
    assert promotion_finish(run_id=run.id).flip_report == finished.flip_report
    event = AuditEvent.objects.get(action="training_run.promote")
    assert (event.actor, event.after["live"]) == (admin_user, run.model_version_id)
    with pytest.raises(RunStateError, match="only a rejected fine-tune"):
        training_run_promote(run=promoted, actor=admin_user)


def test_a_finetune_does_not_go_live_over_a_version_switched_in_while_it_was_queued(
    taxonomy, curator, admin_user, settings
):
    # What a race between an admin's activation and a fine-tune's request leaves: the run's
    # parent is no longer live when it ends. Whatever its gate found, it must not undo the
    # switch, and its report says why.
    settings.SIAMWEB_GATE_ALPHA = 1e-9  # as above: the gate alone would promote
    correct_everything(taxonomy, curator)
    first = live_version(taxonomy)
    other = training_run_request(
        taxonomy=taxonomy, kind="build", config=TRAINABLE, activate=False, enqueue=False
    )
    other = training_run_execute(run_id=other.id)
    run = finetune_run_request(taxonomy=taxonomy, trigger="manual", enqueue=False)
    assert run.parent_version == first
    deployment_activate(index_build=other.index_build, actor=admin_user)  # the race

    run = training_run_execute(run_id=run.id)

    assert run.status == "rejected"
    assert live_version(taxonomy) == other.model_version
    assert run.gate_report["decision"] == "reject"
    assert (
        f"{other.model_version.label} went live during the run, which started from "
        f"{first.label}: fine-tune again to measure against it"
    ) in run.gate_report["reasons"]
    assert run.model_version.metrics["gate"]["decision"] == "reject"


def test_promotion_predicts_pending_inputs_again(taxonomy, curator, admin_user):
    (pending,) = inputs_submit(taxonomy=taxonomy, texts=["Espresso Maker"], source="api")
    old_prediction = pending.prediction_id
    run = finetune(taxonomy)
    training_run_promote(run=run, actor=admin_user)
    pending.refresh_from_db()
    assert pending.prediction_id == old_prediction  # the worker's part, not the request's
    tasks.finish_promotion.run(run.id)
    pending.refresh_from_db()
    assert pending.prediction_id != old_prediction
    assert pending.prediction.model_version == run.model_version
    assert pending.status == ReviewItem.Status.PENDING


def test_the_worker_predicts_pending_inputs_again_after_a_promoted_finetune(
    taxonomy, curator, settings, monkeypatch
):
    settings.SIAMWEB_GATE_ALPHA = 1e-9
    (pending,) = inputs_submit(taxonomy=taxonomy, texts=["Espresso Maker"], source="api")
    old_prediction = pending.prediction_id
    correct_everything(taxonomy, curator)
    run = finetune_run_request(
        taxonomy=taxonomy, trigger="manual", config={"training": {"max_steps": 200}}, enqueue=False
    )
    # The chained task runs in this process instead of going through a broker.
    monkeypatch.setitem(current_app.conf, "task_always_eager", True)

    assert tasks.execute_training_run.apply(args=[run.id]).result == "promoted"

    pending.refresh_from_db()
    assert pending.prediction_id != old_prediction
    assert pending.prediction.model_version == live_version(taxonomy)


def test_a_lost_forced_promotion_report_is_asked_for_again(taxonomy, admin_user, settings):
    run = finetune(taxonomy)
    assert run.status == "rejected"
    training_run_promote(run=run, actor=admin_user)
    assert promotions_resend_pending(older_than_seconds=3600) == 0  # just asked for
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete("training")

    assert promotions_resend_pending(older_than_seconds=0) == 1

    (message,) = broker.lrange("training", 0, -1)  # on the real broker, for a training worker
    headers = json.loads(message)["headers"]
    assert (headers["task"], headers["argsrepr"]) == (
        "worker.tasks.finish_promotion",
        f"[{run.id}]",
    )
    broker.delete("training")
    promotion_finish(run_id=run.id)
    assert promotions_resend_pending(older_than_seconds=0) == 0


def test_a_rollback_makes_an_earlier_version_live_with_a_fresh_index(taxonomy, admin_user):
    first = live_version(taxonomy)
    run = finetune(taxonomy)
    training_run_promote(run=run, actor=admin_user)
    assert live_version(taxonomy) != first

    run_queued()
    rollback = model_version_rollback(model_version=first, actor=admin_user)
    rollback = training_run_execute(run_id=rollback.id)

    assert rollback.status == "succeeded"
    assert live_version(taxonomy) == first
    assert rollback.index_build.model_version == first
    (result,) = rank_taxonomy_groups(taxonomy, ["icu nurse"], k=1)
    assert result.model_version == first.label
    assert AuditEvent.objects.filter(action="model_version.rollback").count() == 1
    # The switch itself is in the trail, by whoever asked, from the version it replaced.
    switch = AuditEvent.objects.filter(action="deployment.activate").latest("id")
    assert (switch.actor, switch.before["model_version"], switch.after["model_version"]) == (
        admin_user,
        run.model_version_id,
        first.id,
    )
    with pytest.raises(RunStateError, match="already live"):
        model_version_rollback(model_version=first, actor=admin_user)


def test_a_failed_run_is_retried_as_a_new_run(taxonomy, admin_user):
    run = finetune(taxonomy, training={"max_steps": "many"})
    assert run.status == "failed"
    assert "max_steps must be an integer" in run.error
    retry = training_run_retry(run=run, actor=admin_user)
    assert (retry.kind, retry.status, retry.retry_of, retry.config) == (
        "finetune",
        "queued",
        run,
        run.config,
    )
    with pytest.raises(RunStateError, match="only a failed run"):
        training_run_retry(run=retry, actor=admin_user)
    # Once its retry has ended, the first attempt is not retried a second time beside it.
    TrainingRun.objects.filter(id=retry.id).update(status=TrainingRun.Status.SUCCEEDED)
    with pytest.raises(RunStateError, match=f"was retried already, as run #{retry.id}"):
        training_run_retry(run=run, actor=admin_user)


def test_a_retried_finetune_trains_on_what_the_failed_attempt_did(
    taxonomy, curator, admin_user, settings, monkeypatch
):
    settings.SIAMWEB_GATE_ALPHA = 1e-9
    correct_everything(taxonomy, curator)
    real_index = retraining.index_build_create
    calls = []

    def index_once_broken(**kwargs):  # the worker "dies" after training, before the index
        calls.append(1)
        if len(calls) == 1:
            raise OSError("disk full")
        return real_index(**kwargs)

    monkeypatch.setattr(retraining, "index_build_create", index_once_broken)
    failed = finetune(taxonomy, training={"max_steps": 40, "eval_every": 20})
    assert (failed.status, failed.error) == ("failed", "OSError: disk full")
    assert (run_checkpoint_dir(failed) / "learn").exists()  # kept for the retry
    # A verdict arrives before the retry: it adds a curator member, so the data differ.
    (late,) = inputs_submit(taxonomy=taxonomy, texts=["Barista Trainee"], source="api")
    judgement_create(review_item=late, user=curator, verdict="reassign", group=group("35-3023"))
    run_queued()

    retry = training_run_retry(run=failed, actor=admin_user)
    run_queued()
    retry.refresh_from_db()

    assert retry.status == "promoted", retry.error
    assert retry.feedback_until == failed.feedback_until  # the late verdict waits for the next
    # Its data differ (the late curator member), so the old checkpoint was set aside.
    assert retry.model_version.metrics["resumed_from_step"] == 0
    assert not run_checkpoint_dir(failed).exists()  # done with: removed


def test_a_build_that_failed_after_storing_its_version_is_never_offered_to_roll_back_to(
    tiny_taxonomy, admin_user, monkeypatch
):
    live = live_version(tiny_taxonomy)
    monkeypatch.setattr(
        runs, "model_version_evaluate", mock.Mock(side_effect=RuntimeError("evaluation broke"))
    )
    run = training_run_request(taxonomy=tiny_taxonomy, kind="build", config=TINY_MODEL,
                               enqueue=False)  # fmt: skip
    done = training_run_execute(run_id=run.id)
    assert (done.status, done.error) == ("failed", "RuntimeError: evaluation broke")
    stored = done.model_version
    assert stored is not None and stored != live  # stored, indexed, never served
    assert not model_version_was_live(stored)
    with pytest.raises(RunStateError, match="was never live"):
        model_version_rollback(model_version=stored, actor=admin_user)
    assert live_version(tiny_taxonomy) == live


def test_a_version_that_served_under_a_failed_run_can_be_rolled_back_to(
    tiny_taxonomy, admin_user, monkeypatch
):
    """A first start makes an interrupted build's version live, and a run given up on can
    finish after its last report: the version served, whatever its run's status says."""
    monkeypatch.setattr(
        runs, "model_version_evaluate", mock.Mock(side_effect=RuntimeError("evaluation broke"))
    )
    run = training_run_request(taxonomy=tiny_taxonomy, kind="build", config=TINY_MODEL,
                               enqueue=False)  # fmt: skip
    stored = training_run_execute(run_id=run.id).model_version
    assert not model_version_was_live(stored)
    deployment_activate(index_build=stored.index_builds.get())  # as the first start does
    build_again = training_run_request(taxonomy=tiny_taxonomy, kind="build", config=TINY_MODEL,
                                       enqueue=False)  # fmt: skip
    monkeypatch.undo()
    assert training_run_execute(run_id=build_again.id).status == "succeeded"
    assert live_version(tiny_taxonomy) != stored
    assert model_version_was_live(stored)
    assert model_version_rollback(model_version=stored, actor=admin_user) is not None
