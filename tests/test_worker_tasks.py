"""The Celery tasks, called in-process: safe to run twice, retry only what is transient, give up
after a cap, and a run stopped by its soft time limit ends FAILED while the live model serves."""

from __future__ import annotations

import kombu.exceptions
import pytest
import redis.exceptions
from celery.exceptions import SoftTimeLimitExceeded
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from annotations.models import Group
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.models import Deployment, IndexBuild, TrainingRun
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.training.run_execution import training_run_execute
from models_app.training.services import runs
from models_app.training.services.runs import training_run_request
from worker import tasks


def queued_reindex(taxonomy) -> TrainingRun:
    run = training_run_request(taxonomy=taxonomy, kind="reindex", enqueue=False)
    assert run is not None
    return run


def failing_first(times: int, error: Exception, calls: list[int]):
    """training_run_execute that raises ``error`` on its first ``times`` calls."""

    def execute(*, run_id: int):
        calls.append(run_id)
        if len(calls) <= times:
            raise error
        return training_run_execute(run_id=run_id)

    return execute


def test_a_run_executed_twice_does_the_work_once(tiny_taxonomy):
    run = queued_reindex(tiny_taxonomy)
    assert tasks.execute_training_run.run(run.id) == "succeeded"
    assert tasks.execute_training_run.run(run.id) is None
    assert IndexBuild.objects.count() == 2  # the fixture's build and this run's, no third
    run.refresh_from_db()
    assert run.status == "succeeded"


def test_the_training_task_retries_only_connection_errors_with_a_cap_and_backoff():
    task = tasks.execute_training_run
    assert set(task.autoretry_for) == {
        OperationalError,
        InterfaceError,
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
        kombu.exceptions.OperationalError,
    }
    assert not any(issubclass(Exception, error) for error in task.autoretry_for)
    assert task.max_retries == 3
    assert task.retry_backoff and task.retry_backoff_max == 300 and task.retry_jitter


def test_the_tasks_time_limits_come_from_settings(settings):
    task = tasks.execute_training_run
    assert task.soft_time_limit == settings.CELERY_TASK_SOFT_TIME_LIMIT
    assert task.time_limit == settings.CELERY_TASK_TIME_LIMIT
    # The soft limit comes first, so the run can be marked failed before the hard kill.
    assert task.soft_time_limit < task.time_limit


def test_a_transient_database_error_is_retried_and_the_run_then_completes(
    tiny_taxonomy, monkeypatch
):
    run = queued_reindex(tiny_taxonomy)
    calls: list[int] = []
    error = OperationalError("server closed the connection unexpectedly")
    monkeypatch.setattr(tasks, "training_run_execute", failing_first(2, error, calls))

    result = tasks.execute_training_run.apply(args=[run.id])

    assert result.successful(), result.traceback
    assert result.result == "succeeded"
    assert calls == [run.id] * 3
    run.refresh_from_db()
    assert run.status == "succeeded"


def test_a_transient_error_that_persists_gives_up_after_three_retries(tiny_taxonomy, monkeypatch):
    run = queued_reindex(tiny_taxonomy)
    calls: list[int] = []
    error = redis.exceptions.ConnectionError("Connection refused")
    monkeypatch.setattr(tasks, "training_run_execute", failing_first(99, error, calls))

    result = tasks.execute_training_run.apply(args=[run.id])

    assert result.failed()
    assert isinstance(result.result, redis.exceptions.ConnectionError)
    assert len(calls) == 1 + 3
    # Never claimed: still queued, so the scheduled check sends it again later.
    run.refresh_from_db()
    assert run.status == "queued"


def test_an_error_that_is_not_transient_is_not_retried(tiny_taxonomy, monkeypatch):
    run = queued_reindex(tiny_taxonomy)
    calls: list[int] = []
    monkeypatch.setattr(
        tasks, "training_run_execute", failing_first(99, ValueError("a bug"), calls)
    )

    result = tasks.execute_training_run.apply(args=[run.id])

    assert result.failed()
    assert isinstance(result.result, ValueError)
    assert calls == [run.id]


def test_a_run_stopped_by_its_soft_time_limit_fails_and_the_live_model_keeps_serving(
    tiny_taxonomy, monkeypatch
):
    live_build = Deployment.objects.get().index_build
    run = queued_reindex(tiny_taxonomy)

    def index_build_create(*, model_version, progress):
        progress("encode", 0.3, None)
        # What the worker's pool raises in the task when CELERY_TASK_SOFT_TIME_LIMIT passes.
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(runs, "index_build_create", index_build_create)

    result = tasks.execute_training_run.apply(args=[run.id])

    assert result.successful() and result.result == "failed"  # failed once, not retried
    run.refresh_from_db()
    assert (run.status, run.stage) == ("failed", "encode")
    assert run.error.startswith("SoftTimeLimitExceeded")
    assert run.finished_at is not None
    assert Deployment.objects.get().index_build == live_build
    (result,) = rank_taxonomy_groups(tiny_taxonomy, ["icu nurse"], k=1)
    assert result.groups[0].code == "29-1141"


def test_the_scheduled_check_fails_a_run_whose_heartbeat_stopped(tiny_taxonomy, settings):
    settings.SIAMWEB_RUN_HEARTBEAT_TIMEOUT_SECONDS = 600
    silent_since = timezone.now() - timezone.timedelta(seconds=601)
    run = TrainingRun.objects.create(
        taxonomy=tiny_taxonomy,
        kind="finetune",
        status="running",
        stage="train",
        started_at=silent_since,
        heartbeat_at=silent_since,
    )

    tasks.reindex_stale_taxonomies.run()

    run.refresh_from_db()
    assert run.status == "failed"
    assert "the worker stopped before the run finished" in run.error


def test_the_scheduled_check_leaves_a_run_with_a_recent_heartbeat_alone(tiny_taxonomy, settings):
    settings.SIAMWEB_RUN_HEARTBEAT_TIMEOUT_SECONDS = 600
    now = timezone.now()
    run = TrainingRun.objects.create(
        taxonomy=tiny_taxonomy,
        kind="finetune",
        status="running",
        stage="train",
        started_at=now - timezone.timedelta(hours=1),
        heartbeat_at=now - timezone.timedelta(seconds=5),
    )

    tasks.reindex_stale_taxonomies.run()

    run.refresh_from_db()
    assert run.status == "running"


def test_the_beat_task_starts_a_finetune_once_enough_verdicts_arrived(
    tiny_taxonomy, curator, settings
):
    settings.SIAMWEB_RETRAIN_MIN_VERDICTS = 2
    baristas = Group.objects.get(taxonomy=tiny_taxonomy, code="35-3023")
    items = inputs_submit(taxonomy=tiny_taxonomy, texts=["Latte Artist"], source="api")
    judgement_create(review_item=items[0], user=curator, verdict="reassign", group=baristas)
    assert tasks.retrain_due_taxonomies.run() == 0  # one verdict is not enough

    items = inputs_submit(taxonomy=tiny_taxonomy, texts=["Barista Trainee"], source="api")
    judgement_create(review_item=items[0], user=curator, verdict="reassign", group=baristas)

    assert tasks.retrain_due_taxonomies.run() == 1
    run = TrainingRun.objects.get(kind="finetune")
    assert (run.status, run.trigger) == ("queued", "verdicts")
    assert run.parent_version == Deployment.objects.get().index_build.model_version
    # Running the beat again while that run waits starts nothing more.
    assert tasks.retrain_due_taxonomies.run() == 0
    assert TrainingRun.objects.filter(kind="finetune").count() == 1


@pytest.mark.parametrize("task", ["reindex_stale_taxonomies", "retrain_due_taxonomies"])
def test_a_beat_task_with_nothing_to_do_does_nothing(tiny_taxonomy, task):
    assert getattr(tasks, task).run() == 0
    assert TrainingRun.objects.exclude(kind="build").count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_soft_time_limit_landing_mid_query_still_marks_the_run_failed(tiny_taxonomy, monkeypatch):
    # The signal can arrive while psycopg waits for a reply: the connection is left with a
    # command in flight and refuses the next one until it is replaced.
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.fail("this test needs PostgreSQL: set DATABASE_URL (make services)")
    run = queued_reindex(tiny_taxonomy)

    def index_build_create(*, model_version, progress):
        progress("encode", 0.3, None)
        connection.ensure_connection()
        connection.connection.pgconn.send_query(b"select pg_sleep(0.2)")
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(runs, "index_build_create", index_build_create)

    result = tasks.execute_training_run.apply(args=[run.id])

    assert result.successful() and result.result == "failed"
    run.refresh_from_db()
    assert (run.status, run.stage) == ("failed", "encode")
    assert run.error.startswith("SoftTimeLimitExceeded")
