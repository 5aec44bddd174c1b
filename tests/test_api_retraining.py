"""The API for retraining: admins fine-tune, roll back, force a rejected candidate live and retry
a failed run; curators read a run's progress and reports; the wrong state is a 409."""

from __future__ import annotations

import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.models import AuditEvent, Taxonomy
from models_app.models import Deployment, ModelVersion, TrainingRun
from models_app.training.run_execution import training_run_execute
from models_app.training.services.runs import training_run_request
from tests.conftest import TINY_MODEL, one_verdict
from tests.models_pages.conftest import FLIP_REPORT, GATE_REPORT, make_run

API = "/api/v1"


def client_for(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def live_version_id(taxonomy: Taxonomy) -> int:
    return Deployment.objects.get(taxonomy=taxonomy).index_build.model_version_id


def snapshot() -> tuple:
    return (
        sorted(TrainingRun.objects.values_list("id", "kind", "status", "gate_report")),
        sorted(Deployment.objects.values_list("taxonomy_id", "index_build_id")),
        AuditEvent.objects.count(),
    )


@pytest.fixture
def admin_client(admin_user) -> APIClient:
    return client_for(admin_user)


@pytest.fixture
def first_version(tiny_taxonomy) -> ModelVersion:
    return ModelVersion.objects.get(taxonomy=tiny_taxonomy, number=1)


@pytest.fixture
def older_version(first_version) -> ModelVersion:
    """jobs/v2 as a row, not live: something to roll back to (the run is only queued)."""
    return ModelVersion.objects.create(
        taxonomy=first_version.taxonomy,
        number=2,
        encoder_kind="char_ngram_tfidf",
        artifact_path="jobs/models/none",
        parent=first_version,
    )


@pytest.fixture
def rejected_finetune(first_version) -> TrainingRun:
    """A fine-tune the gate rejected, with a real candidate (jobs/v2) and its index."""
    build = training_run_request(
        taxonomy=first_version.taxonomy,
        kind=TrainingRun.Kind.BUILD,
        config=TINY_MODEL,
        activate=False,
        enqueue=False,
    )
    build = training_run_execute(run_id=build.id)
    assert build.status == TrainingRun.Status.SUCCEEDED, build.error
    return make_run(
        first_version.taxonomy,
        status=TrainingRun.Status.REJECTED,
        stage="done",
        progress=1.0,
        parent_version=first_version,
        model_version=build.model_version,
        index_build=build.index_build,
        feedback_until=0,
        gate_report=GATE_REPORT,
        finished_at=timezone.now(),
    )


@pytest.fixture
def failed_run(tiny_taxonomy) -> TrainingRun:
    return make_run(
        tiny_taxonomy,
        kind=TrainingRun.Kind.REINDEX,
        status=TrainingRun.Status.FAILED,
        stage="encode",
        error="MemoryError: the index did not fit",
        finished_at=timezone.now(),
    )


# --- fine-tune through training-runs ----------------------------------------------------------


def test_an_admin_queues_a_fine_tune_of_the_live_version(admin_client, curator, first_version):
    one_verdict(first_version.taxonomy, curator)
    response = admin_client.post(
        f"{API}/training-runs", {"taxonomy": "jobs", "kind": "finetune"}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert (body["kind"], body["status"], body["trigger"], body["requested_by"]) == (
        "finetune",
        "queued",
        "manual",
        "ada",
    )
    run = TrainingRun.objects.get(id=body["id"])
    assert (run.kind, run.status, run.parent_version) == ("finetune", "queued", first_version)


def test_a_fine_tune_while_a_run_is_active_is_a_409(admin_client, curator, tiny_taxonomy):
    one_verdict(tiny_taxonomy, curator)
    active = make_run(tiny_taxonomy, status=TrainingRun.Status.QUEUED)
    before = snapshot()
    response = admin_client.post(
        f"{API}/training-runs", {"taxonomy": "jobs", "kind": "finetune"}, format="json"
    )
    assert response.status_code == 409
    assert response.json() == {
        "taxonomy": [
            f"jobs already has an active run (#{active.id}, finetune, queued); "
            "wait for it to finish"
        ]
    }
    assert snapshot() == before


@pytest.mark.parametrize("kind", ["finetune", "reindex"])
def test_a_run_of_the_live_model_without_one_is_a_409_naming_the_taxonomy(admin_client, db, kind):
    Taxonomy.objects.create(slug="skills", name="Skills")
    response = admin_client.post(
        f"{API}/training-runs", {"taxonomy": "skills", "kind": kind}, format="json"
    )
    assert response.status_code == 409
    (message,) = response.json()["taxonomy"]
    assert message.startswith("taxonomy 'skills' has no live model yet")
    assert not TrainingRun.objects.exists()


def test_a_fine_tune_with_no_new_verdict_is_a_409_saying_so(admin_client, tiny_taxonomy):
    before = snapshot()
    response = admin_client.post(
        f"{API}/training-runs", {"taxonomy": "jobs", "kind": "finetune"}, format="json"
    )
    assert response.status_code == 409
    (message,) = response.json()["taxonomy"]
    assert message.startswith("jobs: no verdict is new since jobs/v1 was trained")
    assert snapshot() == before


def test_a_rollback_is_not_requested_through_training_runs(admin_client, first_version):
    response = admin_client.post(
        f"{API}/training-runs", {"taxonomy": "jobs", "kind": "rollback"}, format="json"
    )
    assert response.status_code == 400
    assert list(response.json()) == ["kind"]
    assert TrainingRun.objects.count() == 1  # the build that made jobs/v1


def test_a_curator_cannot_start_a_fine_tune(api_client, tiny_taxonomy):
    before = snapshot()
    response = api_client.post(
        f"{API}/training-runs", {"taxonomy": "jobs", "kind": "finetune"}, format="json"
    )
    assert response.status_code == 403
    assert snapshot() == before


# --- a run's detail -------------------------------------------------------------------------


def test_a_run_shows_its_progress_and_reports(api_client, rejected_finetune):
    TrainingRun.objects.filter(id=rejected_finetune.id).update(flip_report=FLIP_REPORT)
    response = api_client.get(f"{API}/training-runs/{rejected_finetune.id}")
    assert response.status_code == 200
    body = response.json()
    assert (body["kind"], body["status"], body["stage"], body["progress"]) == (
        "finetune",
        "rejected",
        "done",
        1.0,
    )
    assert body["eta_seconds"] is None
    assert body["parent_version"] == rejected_finetune.parent_version_id
    assert body["model_version"] == "jobs/v2"
    assert (body["feedback_until"], body["retry_of"]) == (0, None)
    assert body["gate_report"] == GATE_REPORT
    assert body["flip_report"] == FLIP_REPORT


def test_a_run_without_reports_shows_them_as_null(api_client, failed_run):
    body = api_client.get(f"{API}/training-runs/{failed_run.id}").json()
    assert (body["gate_report"], body["flip_report"], body["feedback_until"]) == (None, None, None)
    assert body["error"] == "MemoryError: the index did not fit"


# --- promote anyway -------------------------------------------------------------------------


def test_an_admin_promotes_a_rejected_candidate(admin_client, admin_user, rejected_finetune):
    candidate = rejected_finetune.model_version
    response = admin_client.post(f"{API}/training-runs/{rejected_finetune.id}/promote")
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["gate_report"]["forced_by"]) == ("promoted", "ada")
    assert live_version_id(rejected_finetune.taxonomy) == candidate.id
    rejected_finetune.refresh_from_db()
    assert rejected_finetune.status == TrainingRun.Status.PROMOTED
    assert AuditEvent.objects.filter(action="training_run.promote", actor=admin_user).count() == 1


def test_a_curator_cannot_promote(api_client, rejected_finetune):
    before = snapshot()
    response = api_client.post(f"{API}/training-runs/{rejected_finetune.id}/promote")
    assert (response.status_code, response.json()) == (403, {"detail": "admins only"})
    assert snapshot() == before


def test_promoting_a_run_the_gate_did_not_reject_is_a_409(admin_client, failed_run):
    before = snapshot()
    response = admin_client.post(f"{API}/training-runs/{failed_run.id}/promote")
    assert response.status_code == 409
    assert response.json() == {
        "training_run": [
            f"run {failed_run.id} is a reindex run that is failed; only a rejected fine-tune "
            "can be promoted"
        ]
    }
    assert snapshot() == before


def test_promoting_while_another_run_is_active_is_a_409_naming_that_run(
    admin_client, rejected_finetune
):
    # A fine-tune started from the live version would gate against, and go live over, a model
    # the admin had just swapped in; a reindex or rollback would end by undoing the promotion.
    active = make_run(rejected_finetune.taxonomy, status=TrainingRun.Status.RUNNING)
    before = snapshot()
    response = admin_client.post(f"{API}/training-runs/{rejected_finetune.id}/promote")
    assert response.status_code == 409
    assert response.json() == {
        "training_run": [
            f"jobs has run #{active.id} active (finetune, running): promote run "
            f"#{rejected_finetune.id} once it ends, since the run may compare its work with the "
            "live model or make its own live"
        ]
    }
    assert snapshot() == before
    rejected_finetune.refresh_from_db()
    assert rejected_finetune.status == TrainingRun.Status.REJECTED


# --- retry ----------------------------------------------------------------------------------


def test_an_admin_retries_a_failed_run(admin_client, failed_run):
    response = admin_client.post(f"{API}/training-runs/{failed_run.id}/retry")
    assert response.status_code == 202
    body = response.json()
    assert (body["kind"], body["status"], body["retry_of"], body["requested_by"]) == (
        "reindex",
        "queued",
        failed_run.id,
        "ada",
    )
    retry = TrainingRun.objects.get(id=body["id"])
    assert (retry.retry_of, retry.status) == (failed_run, "queued")


def test_retrying_a_run_that_did_not_fail_is_a_409(admin_client, rejected_finetune):
    before = snapshot()
    response = admin_client.post(f"{API}/training-runs/{rejected_finetune.id}/retry")
    assert response.status_code == 409
    assert response.json() == {
        "training_run": [
            f"run {rejected_finetune.id} is rejected; only a failed run can be retried"
        ]
    }
    assert snapshot() == before


def test_retrying_while_a_run_is_active_is_a_409(admin_client, failed_run):
    active = make_run(failed_run.taxonomy, status=TrainingRun.Status.RUNNING)
    before = snapshot()
    response = admin_client.post(f"{API}/training-runs/{failed_run.id}/retry")
    assert response.status_code == 409
    assert response.json() == {
        "taxonomy": [
            f"jobs already has an active run (#{active.id}, finetune, running); "
            "wait for it to finish"
        ]
    }
    assert snapshot() == before


def test_a_curator_cannot_retry(api_client, failed_run):
    before = snapshot()
    assert api_client.post(f"{API}/training-runs/{failed_run.id}/retry").status_code == 403
    assert snapshot() == before


# --- cancel ---------------------------------------------------------------------------------


def test_an_admin_cancels_a_queued_run_at_once_and_a_running_one_at_its_next_report(
    admin_client, tiny_taxonomy
):
    queued = make_run(tiny_taxonomy, kind=TrainingRun.Kind.REINDEX, status="queued")
    live = sorted(Deployment.objects.values_list("taxonomy_id", "index_build_id"))
    response = admin_client.post(f"{API}/training-runs/{queued.id}/cancel")
    assert response.status_code == 202
    body = response.json()
    assert (body["id"], body["status"], body["error"]) == (
        queued.id,
        "cancelled",
        "cancelled by an admin before it started",
    )
    running = make_run(tiny_taxonomy, kind=TrainingRun.Kind.REINDEX, status="running")
    response = admin_client.post(f"{API}/training-runs/{running.id}/cancel")
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "running" and body["cancel_requested_at"] is not None
    assert sorted(Deployment.objects.values_list("taxonomy_id", "index_build_id")) == live
    assert AuditEvent.objects.filter(action="training_run.cancel").count() == 2


def test_cancelling_a_run_that_has_ended_is_a_409_and_changes_nothing(admin_client, failed_run):
    before = snapshot()
    response = admin_client.post(f"{API}/training-runs/{failed_run.id}/cancel")
    assert response.status_code == 409
    assert response.json() == {
        "training_run": [
            f"run {failed_run.id} is failed: only a queued or running run can be cancelled"
        ]
    }
    assert snapshot() == before


def test_a_curator_cannot_cancel(api_client, tiny_taxonomy):
    run = make_run(tiny_taxonomy, kind=TrainingRun.Kind.REINDEX, status="queued")
    before = snapshot()
    assert api_client.post(f"{API}/training-runs/{run.id}/cancel").status_code == 403
    assert snapshot() == before


# --- rollback -------------------------------------------------------------------------------


def test_an_admin_rolls_back_to_an_earlier_version(admin_client, admin_user, older_version):
    response = admin_client.post(f"{API}/model-versions/{older_version.id}/rollback")
    assert response.status_code == 202
    body = response.json()
    assert (body["kind"], body["status"], body["model_version"], body["requested_by"]) == (
        "rollback",
        "queued",
        "jobs/v2",
        "ada",
    )
    run = TrainingRun.objects.get(id=body["id"])
    assert (run.kind, run.model_version) == ("rollback", older_version)
    event = AuditEvent.objects.get(action="model_version.rollback")
    assert (event.actor, event.object_id) == (admin_user, str(older_version.id))


def test_rolling_back_to_the_live_version_is_a_409(admin_client, first_version):
    before = snapshot()
    response = admin_client.post(f"{API}/model-versions/{first_version.id}/rollback")
    assert response.status_code == 409
    assert response.json() == {"model_version": ["jobs/v1 is already live"]}
    assert snapshot() == before


def test_a_rollback_takes_the_slot_of_a_reindex_still_queued(admin_client, older_version):
    waiting = make_run(older_version.taxonomy, kind=TrainingRun.Kind.REINDEX, status="queued")
    response = admin_client.post(f"{API}/model-versions/{older_version.id}/rollback")
    assert response.status_code == 202
    assert (response.json()["kind"], response.json()["status"]) == ("rollback", "queued")
    waiting.refresh_from_db()
    assert (waiting.status, waiting.error) == (
        "superseded",
        "superseded by a rollback, which indexes every member",
    )


def test_a_rollback_while_a_run_is_active_is_a_409(admin_client, older_version):
    active = make_run(older_version.taxonomy, status=TrainingRun.Status.EVALUATED)
    before = snapshot()
    response = admin_client.post(f"{API}/model-versions/{older_version.id}/rollback")
    assert response.status_code == 409
    assert response.json() == {
        "taxonomy": [
            f"jobs already has an active run (#{active.id}, finetune, evaluated); "
            "wait for it to finish"
        ]
    }
    assert snapshot() == before


def test_a_curator_cannot_roll_back(api_client, older_version):
    before = snapshot()
    response = api_client.post(f"{API}/model-versions/{older_version.id}/rollback")
    assert response.status_code == 403
    assert snapshot() == before


# --- unknown ids and anonymous callers ------------------------------------------------------


def test_unknown_runs_and_versions_are_404s(admin_client, tiny_taxonomy):
    for path, what in [
        ("/training-runs/999999/promote", "training run"),
        ("/training-runs/999999/retry", "training run"),
        ("/model-versions/999999/rollback", "model version"),
    ]:
        response = admin_client.post(API + path)
        assert (response.status_code, response.json()) == (404, {"detail": f"no {what} 999999"})


def test_the_retraining_endpoints_need_a_token_or_a_session(failed_run, older_version):
    for path in (
        f"/training-runs/{failed_run.id}/promote",
        f"/training-runs/{failed_run.id}/retry",
        f"/model-versions/{older_version.id}/rollback",
    ):
        assert APIClient().post(API + path).status_code == 401


def test_the_schema_offers_every_kind_but_rollback_for_a_new_run(api_client, db):
    schema = api_client.get(f"{API}/schema", HTTP_ACCEPT="application/json").json()
    kinds = schema["components"]["schemas"]["TrainingRunRequestKind"]["enum"]
    assert kinds == ["build", "reindex", "finetune"]
    detail = schema["components"]["schemas"]["TrainingRunDetailApiOutput"]["properties"]
    assert {"gate_report", "flip_report", "feedback_until", "retry_of", "stage"} <= set(detail)
