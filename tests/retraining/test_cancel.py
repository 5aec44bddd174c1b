"""An admin cancels a training run: a queued one stops at once, a running one at its next
progress report, before anything goes live; the schedule does not start it again by itself."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotations.models import AuditEvent
from models_app.models import Deployment, IndexBuild, ModelVersion, TrainingRun
from models_app.serving.engines import artifact_path
from models_app.training import run_execution
from models_app.training.promotion import RunStateError
from models_app.training.retraining import (
    finetune_run_request,
    retrain_due_taxonomies,
    training_run_cancel,
)
from models_app.training.run_execution import training_run_execute
from models_app.training.services.runs import (
    RunCancelled,
    run_checkpoint_dir,
    training_run_progress_writer,
    training_run_request,
    training_runs_fail_stale,
)
from models_app.training.services.training_data import feedback_last_id
from tests.retraining.conftest import CORRECTIONS, TRAINABLE, correct_everything


def live_pointer(taxonomy) -> tuple:
    return tuple(Deployment.objects.filter(taxonomy=taxonomy).values_list("index_build_id"))


def test_a_queued_run_is_cancelled_at_once_and_its_worker_then_does_nothing(taxonomy, admin_user):
    run = training_run_request(taxonomy=taxonomy, kind="reindex", enqueue=False)
    builds, live = IndexBuild.objects.count(), live_pointer(taxonomy)
    cancelled = training_run_cancel(run=run, actor=admin_user)
    assert (cancelled.status, cancelled.error) == (
        "cancelled",
        "cancelled by an admin before it started",
    )
    assert cancelled.finished_at is not None
    event = AuditEvent.objects.get(action="training_run.cancel")
    assert (event.actor, event.object_id) == (admin_user, str(run.id))
    assert event.after == {"status": "cancelled"}
    # The task its request queued finds nothing to do.
    assert training_run_execute(run_id=run.id) is None
    assert (IndexBuild.objects.count(), live_pointer(taxonomy)) == (builds, live)
    # Its slot is free: the next run may start.
    assert training_run_request(taxonomy=taxonomy, kind="reindex", enqueue=False) is not None


def test_a_running_run_is_asked_to_stop_and_its_next_progress_report_stops_it(taxonomy, admin_user):
    run = TrainingRun.objects.create(taxonomy=taxonomy, kind="finetune", status="running")
    asked = training_run_cancel(run=run, actor=admin_user)
    assert asked.status == "running" and asked.cancel_requested_at is not None
    report = training_run_progress_writer(run_id=run.id)
    with pytest.raises(RunCancelled, match="cancelled by an admin during 'train'"):
        report("train", 0.4, 30.0)
    # Asked again, nothing more happens, and it is audited once.
    again = training_run_cancel(run=run, actor=admin_user)
    assert again.cancel_requested_at == asked.cancel_requested_at
    assert AuditEvent.objects.filter(action="training_run.cancel").count() == 1


def test_a_run_stopped_by_its_report_is_cancelled_and_nothing_went_live(taxonomy, curator):
    correct_everything(taxonomy, curator)
    run = finetune_run_request(taxonomy=taxonomy, trigger="manual", enqueue=False)
    # The cancel lands as the worker claims the run: its first report stops it.
    TrainingRun.objects.filter(id=run.id).update(cancel_requested_at=run.created_at)
    versions, builds, live = (
        taxonomy.model_versions.count(),
        IndexBuild.objects.count(),
        live_pointer(taxonomy),
    )
    done = training_run_execute(run_id=run.id)
    assert done.status == "cancelled"
    assert done.error.startswith("cancelled by an admin during ")
    assert done.error.endswith("; the live model kept serving")
    assert (taxonomy.model_versions.count(), IndexBuild.objects.count()) == (versions, builds)
    assert live_pointer(taxonomy) == live
    assert not run_checkpoint_dir(done).exists()


@pytest.mark.parametrize("status", ["succeeded", "failed", "rejected", "promoted", "cancelled"])
def test_a_run_that_has_ended_cannot_be_cancelled(taxonomy, admin_user, status):
    run = TrainingRun.objects.create(taxonomy=taxonomy, kind="finetune", status=status)
    with pytest.raises(RunStateError, match=f"run {run.id} is .*: only a queued or running run"):
        training_run_cancel(run=run, actor=admin_user)
    run.refresh_from_db()
    assert (run.status, run.cancel_requested_at) == (status, None)
    assert not AuditEvent.objects.filter(action="training_run.cancel").exists()


def test_a_run_asked_to_stop_whose_worker_died_is_cancelled_not_failed(taxonomy, admin_user):
    an_hour_ago = timezone.now() - timedelta(hours=1)
    run = TrainingRun.objects.create(
        taxonomy=taxonomy, kind="finetune", status="running", heartbeat_at=an_hour_ago
    )
    made = ModelVersion.objects.create(
        taxonomy=taxonomy, number=99, encoder_kind="ngram_bag", artifact_path="jobs/made-99"
    )
    artifact_path(made.artifact_path).mkdir(parents=True)
    (artifact_path(made.artifact_path) / "weights.pt").write_bytes(b"weights")
    TrainingRun.objects.filter(id=run.id).update(model_version=made)
    training_run_cancel(run=run, actor=admin_user)
    assert training_runs_fail_stale(silent_for_seconds=600) == 1
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert run.error.startswith("cancelled by an admin; its worker stopped")
    # What it had made goes with it.
    assert not ModelVersion.objects.filter(id=made.id).exists()
    assert not artifact_path(made.artifact_path).exists()

    # A rollback names the version it restores, an older one: it stays.
    older = ModelVersion.objects.create(
        taxonomy=taxonomy, number=98, encoder_kind="ngram_bag", artifact_path="jobs/older-98"
    )
    cancelled_while_silent(taxonomy, admin_user, kind="rollback", model_version=older)
    assert ModelVersion.objects.filter(id=older.id).exists()


def cancelled_while_silent(taxonomy, admin_user, **fields) -> TrainingRun:
    """A run asked to stop whose worker had died, as the check for silent runs ends it."""
    an_hour_ago = timezone.now() - timedelta(hours=1)
    run = TrainingRun.objects.create(
        taxonomy=taxonomy, status="running", heartbeat_at=an_hour_ago, **fields
    )
    training_run_cancel(run=run, actor=admin_user)
    assert training_runs_fail_stale(silent_for_seconds=600) == 1
    run.refresh_from_db()
    return run


def test_the_schedule_does_not_start_a_cancelled_fine_tune_again_on_the_same_verdicts(
    taxonomy, curator, admin_user, settings
):
    settings.SIAMWEB_RETRAIN_MIN_VERDICTS = len(CORRECTIONS)
    correct_everything(taxonomy, curator)
    (run,) = retrain_due_taxonomies()
    training_run_cancel(run=run, actor=admin_user)
    assert retrain_due_taxonomies() == []
    # An admin may still ask for one: the verdicts were never learnt.
    from models_app.training.retraining import finetune_now_request

    assert finetune_now_request(taxonomy=taxonomy, requested_by=admin_user) is not None


def test_the_schedule_does_not_start_a_failed_fine_tune_again_on_the_same_verdicts(
    taxonomy, curator, admin_user, settings
):
    """A fine-tune that fails every time (out of memory, past its time limit) would otherwise
    be started again at every check, holding the training worker for nothing."""
    settings.SIAMWEB_RETRAIN_MIN_VERDICTS = len(CORRECTIONS)
    correct_everything(taxonomy, curator)
    (run,) = retrain_due_taxonomies()
    TrainingRun.objects.filter(id=run.id).update(
        status="failed", error="MemoryError", feedback_until=feedback_last_id(taxonomy)
    )
    assert retrain_due_taxonomies() == []
    # The admin's Retry resumes it; new verdicts enough start one by themselves.
    from models_app.training.retraining import training_run_retry

    run.refresh_from_db()
    assert training_run_retry(run=run, actor=admin_user) is not None


def test_a_cancelled_retry_keeps_the_checkpoints_its_failed_first_attempt_resumes_from(
    taxonomy, admin_user
):
    failed = TrainingRun.objects.create(taxonomy=taxonomy, kind="finetune", status="failed")
    shared = run_checkpoint_dir(failed)
    shared.mkdir(parents=True)
    (shared / "last.pt").write_bytes(b"state")
    cancelled_while_silent(taxonomy, admin_user, kind="finetune", retry_of=failed)
    assert (shared / "last.pt").read_bytes() == b"state"
    # A first attempt cancelled takes its own with it: nothing can resume from them.
    an_hour_ago = timezone.now() - timedelta(hours=1)
    alone = TrainingRun.objects.create(
        taxonomy=taxonomy, kind="finetune", status="running", heartbeat_at=an_hour_ago
    )
    own = run_checkpoint_dir(alone)
    own.mkdir(parents=True)
    (own / "last.pt").write_bytes(b"state")
    training_run_cancel(run=alone, actor=admin_user)
    assert training_runs_fail_stale(silent_for_seconds=600) == 1
    assert not own.exists() and shared.exists()


def test_a_fine_tune_cancelled_before_it_fixed_its_verdicts_keeps_those_there_were(
    taxonomy, curator, admin_user, settings
):
    settings.SIAMWEB_RETRAIN_MIN_VERDICTS = len(CORRECTIONS)
    correct_everything(taxonomy, curator)
    running = TrainingRun.objects.create(taxonomy=taxonomy, kind="finetune", status="running")
    assert running.feedback_until is None
    training_run_cancel(run=running, actor=admin_user)
    running.refresh_from_db()
    assert running.feedback_until == feedback_last_id(taxonomy) > 0
    TrainingRun.objects.filter(id=running.id).update(status="cancelled")
    assert retrain_due_taxonomies() == []


def test_a_fine_tune_asked_to_stop_while_its_flips_are_listed_does_not_go_live(
    taxonomy, curator, admin_user, settings
):
    from models_app.training.retraining import finetune_execute

    settings.SIAMWEB_GATE_ALPHA = 1e-9  # a gate that promotes: the switch would come next
    correct_everything(taxonomy, curator)
    run = finetune_run_request(taxonomy=taxonomy, trigger="manual", enqueue=False)
    TrainingRun.objects.filter(id=run.id).update(status="running")
    live = live_pointer(taxonomy)
    report = training_run_progress_writer(run_id=run.id)

    def admin_asks_once_the_flips_start(stage, fraction, eta=None):
        report(stage, fraction, eta)
        if (stage, fraction) == ("promote", 0.0):
            training_run_cancel(run=run, actor=admin_user)

    with pytest.raises(RunCancelled, match="during 'promote'"):
        finetune_execute(run=run, progress=admin_asks_once_the_flips_start)
    assert live_pointer(taxonomy) == live


def every_file(taxonomy) -> set:
    return {path for path in artifact_path(taxonomy.slug).rglob("*") if path.is_file()}


def cancelled_at(monkeypatch, stage: str, admin_user) -> list:
    """The admin asks the executed run to stop when its progress first reaches ``stage``; the
    list returned gets the version the run had made by then."""
    writer = run_execution.training_run_progress_writer
    made = []

    def asking_at_stage(*, run_id):
        report = writer(run_id=run_id)

        def progress(reached, fraction, eta=None):
            report(reached, fraction, eta)
            if reached == stage and not made:
                run = TrainingRun.objects.get(id=run_id)
                made.append(run.model_version_id)
                training_run_cancel(run=run, actor=admin_user)

        return progress

    monkeypatch.setattr(run_execution, "training_run_progress_writer", asking_at_stage)
    return made


def test_a_build_cancelled_while_it_indexes_leaves_no_version_index_or_file(
    taxonomy, admin_user, monkeypatch
):
    before = (taxonomy.model_versions.count(), IndexBuild.objects.count(), every_file(taxonomy))
    live = live_pointer(taxonomy)
    run = training_run_request(taxonomy=taxonomy, kind="build", config=TRAINABLE, enqueue=False)
    made = cancelled_at(monkeypatch, "index", admin_user)
    done = training_run_execute(run_id=run.id)
    assert made[0] is not None  # the version was stored when the cancel came
    assert (done.status, done.error) == (
        "cancelled",
        "cancelled by an admin during 'index'; the live model kept serving",
    )
    assert done.model_version is None
    after = (taxonomy.model_versions.count(), IndexBuild.objects.count(), every_file(taxonomy))
    assert after == before
    assert live_pointer(taxonomy) == live


def test_a_fine_tune_cancelled_before_its_switch_deletes_its_candidate(
    taxonomy, curator, admin_user, monkeypatch, settings
):
    settings.SIAMWEB_GATE_ALPHA = 1e-9  # a gate that promotes: the switch would come next
    correct_everything(taxonomy, curator)
    before = (taxonomy.model_versions.count(), IndexBuild.objects.count(), every_file(taxonomy))
    live = live_pointer(taxonomy)
    run = finetune_run_request(taxonomy=taxonomy, trigger="manual", enqueue=False)
    made = cancelled_at(monkeypatch, "promote", admin_user)
    done = training_run_execute(run_id=run.id)
    assert made[0] is not None
    assert (done.status, done.error) == (
        "cancelled",
        "cancelled by an admin during 'promote'; the live model kept serving",
    )
    assert (done.model_version, done.index_build) == (None, None)
    after = (taxonomy.model_versions.count(), IndexBuild.objects.count(), every_file(taxonomy))
    assert after == before
    assert live_pointer(taxonomy) == live


def test_a_fine_tune_cancelled_while_it_indexes_its_candidate_deletes_it(
    taxonomy, curator, admin_user, monkeypatch
):
    correct_everything(taxonomy, curator)
    before = (taxonomy.model_versions.count(), IndexBuild.objects.count(), every_file(taxonomy))
    live = live_pointer(taxonomy)
    run = finetune_run_request(taxonomy=taxonomy, trigger="manual", enqueue=False)
    made = cancelled_at(monkeypatch, "encode", admin_user)  # the candidate's index's first report
    done = training_run_execute(run_id=run.id)
    assert made[0] is not None  # the run named its stored candidate when the cancel came
    assert done.status == "cancelled"
    assert (done.model_version, done.index_build) == (None, None)
    after = (taxonomy.model_versions.count(), IndexBuild.objects.count(), every_file(taxonomy))
    assert after == before
    assert live_pointer(taxonomy) == live
