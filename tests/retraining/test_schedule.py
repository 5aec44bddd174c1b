"""When a fine-tune starts: beat's trigger on enough new verdicts, and the one slot a taxonomy's
runs share with a waiting reindex."""

from __future__ import annotations

from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.models import ModelVersion, TrainingRun
from models_app.training.retraining import finetune_run_request, retrain_due_taxonomies
from models_app.training.run_execution import training_run_execute
from models_app.training.services.runs import training_run_request
from tests.retraining.conftest import CORRECTIONS, correct_everything, finetune, group, run_queued


def test_beat_starts_a_finetune_once_enough_verdicts_arrived(taxonomy, curator, settings):
    settings.SIAMWEB_RETRAIN_MIN_VERDICTS = len(CORRECTIONS)
    assert retrain_due_taxonomies() == []
    correct_everything(taxonomy, curator)
    run_queued()
    (run,) = retrain_due_taxonomies()
    assert (run.kind, run.trigger, run.status) == ("finetune", "verdicts", "queued")
    # One run at a time: asking again while it is queued starts nothing.
    assert retrain_due_taxonomies() == []


def test_beat_does_not_retrain_on_verdicts_a_rejected_run_already_used(taxonomy, curator, settings):
    settings.SIAMWEB_RETRAIN_MIN_VERDICTS = 1
    settings.SIAMWEB_GATE_ALPHA = 0.49
    correct_everything(taxonomy, curator)
    run = finetune(taxonomy, training={"max_steps": 1})
    assert run.status in ("promoted", "rejected")
    run_queued()
    # Promoted or not, the run used these verdicts: nothing new to retrain on.
    assert retrain_due_taxonomies() == []


def test_verdicts_after_a_run_started_wait_for_the_next(taxonomy, curator, settings):
    settings.SIAMWEB_GATE_ALPHA = 1e-9
    correct_everything(taxonomy, curator)
    run = finetune(taxonomy, training={"max_steps": 200})
    (late,) = inputs_submit(taxonomy=taxonomy, texts=["Barista Trainee"], source="api")
    judgement_create(review_item=late, user=curator, verdict="confirm", group=group("35-3023"))
    from models_app.training.retraining import new_verdict_count

    assert new_verdict_count(taxonomy, after=run.feedback_until) == 1
    assert ModelVersion.objects.get(id=run.model_version_id).feedback_until == run.feedback_until
    # A run that stops at its own ``until`` counts only what it trains on: a retry of this run
    # would be budgeted for the four corrections, not for the late verdict too.
    parent = run.model_version.parent
    assert new_verdict_count(taxonomy, after=parent.feedback_until) == len(CORRECTIONS) + 1
    assert new_verdict_count(
        taxonomy, after=parent.feedback_until, until=run.feedback_until
    ) == len(CORRECTIONS)


def reindex_waiting(taxonomy) -> None:
    """A reindex in the queue, as the scheduled check leaves one for the verdicts' members."""
    training_run_request(taxonomy=taxonomy, kind="reindex", trigger="schedule", enqueue=False)


def test_a_finetune_takes_the_slot_of_a_reindex_still_in_the_queue(taxonomy, curator):
    correct_everything(taxonomy, curator)
    reindex_waiting(taxonomy)
    (waiting,) = TrainingRun.objects.filter(taxonomy=taxonomy, status="queued")
    assert waiting.kind == "reindex"

    run = finetune_run_request(taxonomy=taxonomy, trigger="manual", enqueue=False)

    assert (run.kind, run.status) == ("finetune", "queued")
    waiting.refresh_from_db()
    assert waiting.status == "superseded"
    assert f"fine-tune run {run.id}" in waiting.error
    # A worker that picks the superseded message up later leaves it alone.
    assert training_run_execute(run_id=waiting.id) is None
    waiting.refresh_from_db()
    assert waiting.status == "superseded"


def test_a_running_run_keeps_its_slot_and_a_waiting_reindex_its_place(taxonomy, curator):
    correct_everything(taxonomy, curator)
    reindex_waiting(taxonomy)
    (waiting,) = TrainingRun.objects.filter(taxonomy=taxonomy, status="queued")
    TrainingRun.objects.filter(id=waiting.id).update(status="running")

    assert finetune_run_request(taxonomy=taxonomy, trigger="manual", enqueue=False) is None
    waiting.refresh_from_db()
    assert (waiting.status, waiting.error) == ("running", "")
