"""An admin's actions on the Models pages: fine-tune now, roll back, retry a failed run, promote a
rejected candidate anyway; each refused with a 409 naming the reason when it cannot be done."""

from __future__ import annotations

from annotations.models import AuditEvent, Taxonomy
from models_app.models import TrainingRun
from models_app.training.promotion import promotion_finish
from tests.conftest import one_verdict
from tests.models_pages.conftest import live_version_id, make_run, snapshot

# --- fine-tune now ----------------------------------------------------------------------------


def test_an_admin_queues_a_fine_tune_of_the_live_version(
    client, admin_user, curator, first_version
):
    one_verdict(first_version.taxonomy, curator)
    client.force_login(admin_user)
    response = client.post("/models/jobs/finetune")
    run = TrainingRun.objects.get(kind=TrainingRun.Kind.FINETUNE)
    assert response.status_code == 302
    assert response["Location"] == f"/models/runs/{run.id}/"
    assert (run.status, run.trigger, run.requested_by, run.parent_version) == (
        "queued",
        "manual",
        admin_user,
        first_version,
    )
    page = client.get(response["Location"]).content.decode()
    assert f"Fine-tune of jobs queued as run #{run.id}." in page


def test_fine_tune_now_while_a_run_is_active_is_a_409_with_the_reason(
    client, admin_user, curator, tiny_taxonomy
):
    one_verdict(tiny_taxonomy, curator)
    active = make_run(
        tiny_taxonomy, kind=TrainingRun.Kind.REINDEX, status=TrainingRun.Status.RUNNING
    )
    client.force_login(admin_user)
    before = snapshot()
    response = client.post("/models/jobs/finetune")
    assert response.status_code == 409
    assert (
        f"jobs already has an active run (#{active.id}, reindex, running); wait for it to finish"
        in response.content.decode()
    )
    assert snapshot() == before


def test_fine_tune_now_without_a_live_model_is_a_409_with_the_reason(client, admin_user, db):
    Taxonomy.objects.create(slug="skills", name="Skills")
    client.force_login(admin_user)
    response = client.post("/models/skills/finetune")
    assert response.status_code == 409
    assert "taxonomy &#x27;skills&#x27; has no live model yet" in response.content.decode()
    assert not TrainingRun.objects.exists()


def test_fine_tune_now_with_no_new_verdict_is_refused_before_any_training(
    client, admin_user, tiny_taxonomy
):
    client.force_login(admin_user)
    before = snapshot()
    response = client.post("/models/jobs/finetune")
    assert response.status_code == 409
    assert (
        "jobs: no verdict is new since jobs/v1 was trained, so a fine-tune would have nothing "
        "to learn" in response.content.decode()
    )
    assert snapshot() == before
    assert not TrainingRun.objects.filter(kind=TrainingRun.Kind.FINETUNE).exists()


# --- rollback ---------------------------------------------------------------------------------


def test_a_rollback_asks_to_confirm_first(client, admin_user, older_version):
    client.force_login(admin_user)
    before = snapshot()
    response = client.get(f"/models/versions/{older_version.id}/rollback")
    assert response.status_code == 200
    page = response.content.decode()
    assert "Roll jobs back to jobs/v2?" in page
    assert "in place of jobs/v1" in page
    assert f'action="/models/versions/{older_version.id}/rollback"' in page
    assert snapshot() == before


def test_the_rollback_page_of_the_live_version_offers_nothing_to_confirm(
    client, admin_user, first_version
):
    # Reached from a stale page: it read "make jobs/v1 live in place of jobs/v1".
    client.force_login(admin_user)
    response = client.get(f"/models/versions/{first_version.id}/rollback")
    assert response.status_code == 200
    page = response.content.decode()
    assert "jobs/v1 is the live version of jobs: there is nothing to roll back to." in page
    assert 'data-testid="confirm"' not in page and "in place of" not in page


def test_an_admin_rolls_back_to_an_earlier_version(client, admin_user, older_version):
    client.force_login(admin_user)
    response = client.post(f"/models/versions/{older_version.id}/rollback")
    run = TrainingRun.objects.get(kind=TrainingRun.Kind.ROLLBACK)
    assert response.status_code == 302
    assert response["Location"] == f"/models/runs/{run.id}/"
    assert (run.status, run.model_version, run.requested_by) == (
        "queued",
        older_version,
        admin_user,
    )
    event = AuditEvent.objects.get(action="model_version.rollback")
    assert (event.actor, event.object_id) == (admin_user, str(older_version.id))
    page = client.get(response["Location"]).content.decode()
    assert "Rolls back to" in page and "jobs/v2" in page


def test_rolling_back_to_the_live_version_is_a_409_with_the_reason(
    client, admin_user, first_version
):
    client.force_login(admin_user)
    before = snapshot()
    response = client.post(f"/models/versions/{first_version.id}/rollback")
    assert response.status_code == 409
    assert "jobs/v1 is already live" in response.content.decode()
    assert snapshot() == before


def test_a_rollback_while_a_run_is_active_is_a_409(client, admin_user, older_version):
    make_run(older_version.taxonomy)
    client.force_login(admin_user)
    before = snapshot()
    response = client.post(f"/models/versions/{older_version.id}/rollback")
    assert response.status_code == 409
    assert "jobs already has an active run" in response.content.decode()
    assert snapshot() == before


# --- retry ------------------------------------------------------------------------------------


def test_an_admin_retries_a_failed_run(client, admin_user, failed_run):
    client.force_login(admin_user)
    response = client.post(f"/models/runs/{failed_run.id}/retry")
    retry = TrainingRun.objects.get(retry_of=failed_run)
    assert response.status_code == 302
    assert response["Location"] == f"/models/runs/{retry.id}/"
    assert (retry.kind, retry.status, retry.requested_by) == ("reindex", "queued", admin_user)
    page = client.get(response["Location"]).content.decode()
    assert f"Run #{failed_run.id} queued again as run #{retry.id}." in page
    assert f'href="/models/runs/{failed_run.id}/">run #{failed_run.id}</a>' in page


def test_retrying_a_run_that_did_not_fail_is_a_409_with_the_reason(
    client, admin_user, tiny_taxonomy
):
    done = TrainingRun.objects.get(taxonomy=tiny_taxonomy)  # the build that made jobs/v1
    client.force_login(admin_user)
    before = snapshot()
    response = client.post(f"/models/runs/{done.id}/retry")
    assert response.status_code == 409
    assert f"run {done.id} is succeeded; only a failed run can be retried" in (
        response.content.decode()
    )
    assert snapshot() == before


def test_retrying_while_another_run_is_active_is_a_409(client, admin_user, failed_run):
    make_run(failed_run.taxonomy, status=TrainingRun.Status.QUEUED)
    client.force_login(admin_user)
    before = snapshot()
    response = client.post(f"/models/runs/{failed_run.id}/retry")
    assert response.status_code == 409
    assert "jobs already has an active run" in response.content.decode()
    assert snapshot() == before


# --- promote anyway ---------------------------------------------------------------------------


def test_an_admin_is_offered_promote_anyway_on_a_rejected_fine_tune_only(
    client, admin_user, rejected_finetune, failed_run
):
    client.force_login(admin_user)
    page = client.get(f"/models/runs/{rejected_finetune.id}/").content.decode()
    assert f'href="/models/runs/{rejected_finetune.id}/promote" data-testid="promote"' in page
    confirm = client.get(f"/models/runs/{rejected_finetune.id}/promote")
    assert confirm.status_code == 200
    assert "Promote jobs/v2 although the gate rejected it?" in confirm.content.decode()
    assert "Promote anyway" not in client.get(f"/models/runs/{failed_run.id}/").content.decode()


def test_an_admin_promotes_a_rejected_candidate_anyway(client, admin_user, rejected_finetune):
    client.force_login(admin_user)
    candidate = rejected_finetune.model_version
    response = client.post(f"/models/runs/{rejected_finetune.id}/promote")
    assert response.status_code == 302
    assert response["Location"] == f"/models/runs/{rejected_finetune.id}/"
    rejected_finetune.refresh_from_db()
    assert rejected_finetune.status == TrainingRun.Status.PROMOTED
    assert rejected_finetune.gate_report["forced_by"] == "ada"
    assert live_version_id(rejected_finetune.taxonomy) == candidate.id
    assert AuditEvent.objects.filter(action="training_run.promote", actor=admin_user).count() == 1
    page = client.get(response["Location"]).content.decode()
    assert "jobs/v2 is live: promoted over the gate&#x27;s rejection." in page
    assert 'data-testid="forced-by">promoted anyway by ada<' in page
    # The flip report is a worker's job; the page says so until it is there.
    assert 'data-testid="flip-pending"' in page
    promotion_finish(run_id=rejected_finetune.id)
    page = client.get(response["Location"]).content.decode()
    assert 'data-testid="flip-pending"' not in page
    assert 'data-testid="flip-counts">0 inputs compared' in page


def test_promoting_a_run_the_gate_did_not_reject_is_a_409_with_the_reason(
    client, admin_user, tiny_taxonomy
):
    done = TrainingRun.objects.get(taxonomy=tiny_taxonomy)
    client.force_login(admin_user)
    before = snapshot()
    response = client.post(f"/models/runs/{done.id}/promote")
    assert response.status_code == 409
    assert f"run {done.id} is a build run that is succeeded; only a rejected fine-tune" in (
        response.content.decode()
    )
    assert snapshot() == before


# --- cancel -----------------------------------------------------------------------------------


def test_an_admin_cancels_an_active_run_from_its_page(client, admin_user, tiny_taxonomy):
    run = make_run(tiny_taxonomy, kind=TrainingRun.Kind.REINDEX)
    client.force_login(admin_user)
    page = client.get(f"/models/runs/{run.id}/").content.decode()
    assert 'data-testid="cancel">Cancel run</button>' in page
    response = client.post(f"/models/runs/{run.id}/cancel")
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert f"Run #{run.id} stops at its next progress report" in page
    assert 'data-testid="run-cancelling">Cancelling: it stops at its next progress report' in page
    # Asked already: no second button.
    assert 'data-testid="cancel"' not in page
    run.refresh_from_db()
    assert (run.status, run.cancel_requested_at is not None) == ("running", True)


def test_cancelling_a_run_that_has_ended_is_a_409_with_the_reason(client, admin_user, failed_run):
    client.force_login(admin_user)
    before = snapshot()
    page = client.get(f"/models/runs/{failed_run.id}/").content.decode()
    assert 'data-testid="cancel"' not in page
    response = client.post(f"/models/runs/{failed_run.id}/cancel")
    assert response.status_code == 409
    assert "only a queued or running run can be cancelled" in response.content.decode()
    assert snapshot() == before
