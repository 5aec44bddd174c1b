"""The API for model versions and training runs: curators read, admins make live and start."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.models import AuditEvent, Taxonomy
from models_app.models import Deployment, ModelVersion, TrainingRun
from models_app.training.run_execution import training_run_execute
from models_app.training.services.runs import training_run_request
from tests.conftest import TINY_MODEL
from tests.models_pages.conftest import make_run

API = "/api/v1"


def client_for(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def admin_client(admin_user) -> APIClient:
    return client_for(admin_user)


@pytest.fixture
def second_version(tiny_taxonomy) -> ModelVersion:
    """jobs/v2, trained and indexed but not live."""
    run = training_run_request(
        taxonomy=tiny_taxonomy,
        kind=TrainingRun.Kind.BUILD,
        config=TINY_MODEL,
        activate=False,
        enqueue=False,
    )
    run = training_run_execute(run_id=run.id)
    assert run.status == TrainingRun.Status.SUCCEEDED, run.error
    return run.model_version


def live_version(taxonomy) -> int:
    return Deployment.objects.get(taxonomy=taxonomy).index_build.model_version_id


# --- model versions -------------------------------------------------------------------------


def test_model_versions_are_listed_newest_first_with_the_live_one_marked(
    api_client, second_version
):
    response = api_client.get(f"{API}/model-versions")
    assert response.status_code == 200
    body = response.json()
    assert (body["count"], body["next"], body["previous"]) == (2, None, None)
    assert [(v["label"], v["is_live"]) for v in body["results"]] == [
        ("jobs/v2", False),
        ("jobs/v1", True),
    ]
    v2 = body["results"][0]
    assert (v2["number"], v2["encoder_kind"], v2["taxonomy"]) == (2, "char_ngram_tfidf", "jobs")
    assert "suite" in v2["metrics"]
    assert v2["created_at"]


def test_model_versions_filter_by_taxonomy(api_client, tiny_taxonomy):
    Taxonomy.objects.create(slug="skills", name="Skills")
    assert api_client.get(f"{API}/model-versions", {"taxonomy": "skills"}).json()["count"] == 0
    response = api_client.get(f"{API}/model-versions", {"taxonomy": "nope"})
    assert response.status_code == 400
    assert list(response.json()) == ["taxonomy"]


def test_a_model_version_is_shown_by_id(api_client, tiny_taxonomy):
    version = ModelVersion.objects.get(taxonomy=tiny_taxonomy, number=1)
    response = api_client.get(f"{API}/model-versions/{version.id}")
    assert response.status_code == 200
    body = response.json()
    assert (body["label"], body["is_live"]) == ("jobs/v1", True)
    assert body["config"]["encoder"]["kind"] == "char_ngram_tfidf"
    missing = api_client.get(f"{API}/model-versions/999999")
    assert (missing.status_code, missing.json()) == (404, {"detail": "no model version 999999"})


def test_an_admin_makes_a_version_live(admin_client, second_version):
    response = admin_client.post(f"{API}/model-versions/{second_version.id}/activate")
    assert response.status_code == 200
    body = response.json()
    assert (body["label"], body["is_live"]) == ("jobs/v2", True)
    deployment = Deployment.objects.get(taxonomy=second_version.taxonomy)
    assert deployment.index_build.model_version_id == second_version.id
    assert deployment.index_build_id == body["index_build"]
    normalized = admin_client.post(
        f"{API}/taxonomies/jobs/normalize", {"texts": ["icu nurse"]}, format="json"
    )
    assert normalized.json()["results"][0]["model_version"] == "jobs/v2"
    event = AuditEvent.objects.get(action="deployment.activate")
    assert event.actor.username == "ada"
    assert event.after["model_version"] == second_version.id
    assert event.before["model_version"] != second_version.id


def test_a_curator_cannot_make_a_version_live(api_client, second_version):
    before = live_version(second_version.taxonomy)
    response = api_client.post(f"{API}/model-versions/{second_version.id}/activate")
    assert response.status_code == 403
    assert response.json() == {"detail": "admins only"}
    assert live_version(second_version.taxonomy) == before != second_version.id


def test_a_version_without_an_index_build_cannot_go_live(admin_client, tiny_taxonomy):
    before = live_version(tiny_taxonomy)
    bare = ModelVersion.objects.create(
        taxonomy=tiny_taxonomy, number=9, encoder_kind="char_ngram_tfidf", artifact_path="x"
    )
    response = admin_client.post(f"{API}/model-versions/{bare.id}/activate")
    assert response.status_code == 409
    assert response.json() == {
        "model_version": ["jobs/v9 has no index build; build one before making it live"]
    }
    assert live_version(tiny_taxonomy) == before


def test_a_version_cannot_go_live_while_a_run_is_active(admin_client, second_version):
    # The run may compare its work with the live model or make its own live: a fine-tune would
    # gate its candidate against a pair it did not start from and could go live over the admin's.
    active = make_run(second_version.taxonomy, status=TrainingRun.Status.QUEUED)
    before = live_version(second_version.taxonomy)
    response = admin_client.post(f"{API}/model-versions/{second_version.id}/activate")
    assert response.status_code == 409
    assert response.json() == {
        "model_version": [
            f"jobs has run #{active.id} active (finetune, queued): make jobs/v2 live once it "
            "ends, since the run may compare its work with the live model or make its own live"
        ]
    }
    assert live_version(second_version.taxonomy) == before != second_version.id
    assert not AuditEvent.objects.filter(action="deployment.activate").exists()


def test_a_reindex_still_queued_gives_its_slot_up_to_an_activation(admin_client, second_version):
    taxonomy = second_version.taxonomy
    waiting = make_run(taxonomy, kind=TrainingRun.Kind.REINDEX, status=TrainingRun.Status.QUEUED)
    response = admin_client.post(f"{API}/model-versions/{second_version.id}/activate")
    assert response.status_code == 200
    assert live_version(taxonomy) == second_version.id
    waiting.refresh_from_db()
    assert waiting.status == "superseded"
    assert waiting.error == (
        "superseded: an admin's change of the live model (make jobs/v2 live) went first"
    )
    # The task its request queued finds nothing to do.
    assert training_run_execute(run_id=waiting.id) is None
    assert live_version(taxonomy) == second_version.id


def test_a_reindex_a_worker_has_claimed_holds_an_activation_up(admin_client, second_version):
    running = make_run(
        second_version.taxonomy, kind=TrainingRun.Kind.REINDEX, status=TrainingRun.Status.RUNNING
    )
    before = live_version(second_version.taxonomy)
    response = admin_client.post(f"{API}/model-versions/{second_version.id}/activate")
    assert response.status_code == 409
    assert f"has run #{running.id} active (reindex, running)" in response.json()["model_version"][0]
    assert live_version(second_version.taxonomy) == before
    running.refresh_from_db()
    assert running.status == "running"


def test_activating_the_version_already_live_changes_and_records_nothing(
    admin_client, tiny_taxonomy
):
    deployment = Deployment.objects.get(taxonomy=tiny_taxonomy)
    live = deployment.index_build.model_version
    make_run(tiny_taxonomy, status=TrainingRun.Status.RUNNING)  # nothing to wait for: no change
    response = admin_client.post(f"{API}/model-versions/{live.id}/activate")
    assert response.status_code == 200
    body = response.json()
    assert (body["label"], body["is_live"], body["index_build"]) == (
        "jobs/v1",
        True,
        deployment.index_build_id,
    )
    assert Deployment.objects.get(taxonomy=tiny_taxonomy).updated_at == deployment.updated_at
    assert not AuditEvent.objects.filter(action="deployment.activate").exists()


def test_activating_an_unknown_version_is_a_404(admin_client, tiny_taxonomy):
    assert admin_client.post(f"{API}/model-versions/999999/activate").status_code == 404


# --- training runs --------------------------------------------------------------------------


def test_training_runs_are_listed_newest_first(api_client, second_version):
    response = api_client.get(f"{API}/training-runs")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 2
    newest = body["results"][0]
    assert (newest["kind"], newest["status"], newest["model_version"]) == (
        "build",
        "succeeded",
        "jobs/v2",
    )
    assert newest["activate"] is False
    succeeded = api_client.get(f"{API}/training-runs", {"status": "succeeded", "taxonomy": "jobs"})
    assert succeeded.json()["count"] == 2
    bad = api_client.get(f"{API}/training-runs", {"status": "sleeping"})
    assert (bad.status_code, list(bad.json())) == (400, ["status"])


def test_an_admin_starts_a_reindex(admin_client, tiny_taxonomy):
    response = admin_client.post(
        f"{API}/training-runs", {"taxonomy": "jobs", "kind": "reindex"}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert (body["kind"], body["status"], body["trigger"], body["requested_by"]) == (
        "reindex",
        "queued",
        "manual",
        "ada",
    )
    run = TrainingRun.objects.get(id=body["id"])
    assert (run.status, run.requested_by.username) == ("queued", "ada")
    shown = admin_client.get(f"{API}/training-runs/{run.id}")
    assert (shown.status_code, shown.json()["id"]) == (200, run.id)


def test_a_second_run_while_one_is_active_is_a_409(admin_client, tiny_taxonomy):
    body = {"taxonomy": "jobs", "kind": "build"}
    first = admin_client.post(f"{API}/training-runs", body, format="json")
    assert first.status_code == 201
    response = admin_client.post(f"{API}/training-runs", body, format="json")
    assert response.status_code == 409
    assert response.json() == {
        "taxonomy": [
            f"jobs already has an active run (#{first.json()['id']}, build, queued); "
            "wait for it to finish"
        ]
    }
    assert TrainingRun.objects.filter(status="queued").count() == 1


def test_a_curator_cannot_start_a_run(api_client, tiny_taxonomy):
    before = TrainingRun.objects.count()
    response = api_client.post(
        f"{API}/training-runs", {"taxonomy": "jobs", "kind": "reindex"}, format="json"
    )
    assert response.status_code == 403
    assert TrainingRun.objects.count() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "reindex"}, "taxonomy"),
        ({"taxonomy": "nope", "kind": "reindex"}, "taxonomy"),
        ({"taxonomy": "jobs"}, "kind"),
        ({"taxonomy": "jobs", "kind": "retrain"}, "kind"),
        ({"taxonomy": ["jobs"], "kind": "build"}, "taxonomy"),
    ],
)
def test_a_bad_run_request_is_a_400_naming_the_field(admin_client, tiny_taxonomy, body, field):
    before = TrainingRun.objects.count()
    response = admin_client.post(f"{API}/training-runs", body, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert TrainingRun.objects.count() == before


def test_an_unknown_run_is_a_404(api_client, tiny_taxonomy):
    response = api_client.get(f"{API}/training-runs/999999")
    assert (response.status_code, response.json()) == (404, {"detail": "no training run 999999"})


def test_model_endpoints_need_a_signed_in_curator(tiny_taxonomy, user_model):
    for path in ("/model-versions", "/training-runs"):
        assert APIClient().get(API + path).status_code == 401
    stranger = client_for(user_model.objects.create_user(username="sam", password="x-pass-123"))
    assert stranger.get(f"{API}/model-versions").status_code == 403
    assert stranger.get(f"{API}/training-runs").status_code == 403


def test_a_rejected_candidate_cannot_be_made_live_by_activation_only_by_its_promotion(
    admin_client, tiny_taxonomy, second_version
):
    """Its promotion lists the flips and marks the run promoted; an activation would skip both
    and leave it 'rejected' while it serves."""
    rejected = make_run(
        tiny_taxonomy, status=TrainingRun.Status.REJECTED, model_version=second_version,
        index_build=second_version.index_builds.get(),
        parent_version=ModelVersion.objects.get(taxonomy=tiny_taxonomy, number=1),
    )  # fmt: skip
    before = live_version(tiny_taxonomy)
    response = admin_client.post(f"{API}/model-versions/{second_version.id}/activate")
    assert response.status_code == 409
    assert "jobs/v2 was never live" in response.json()["model_version"][0]
    assert live_version(tiny_taxonomy) == before
    rejected.refresh_from_db()
    assert rejected.status == "rejected"
    assert not AuditEvent.objects.filter(action="deployment.activate").exists()
