""" "Fine-tune now" refuses when no verdict is new since the last fine-tune that finished,
whatever its outcome, and says which run that was; a new verdict lets it through."""

from __future__ import annotations

from django.utils import timezone

from models_app.models import TrainingRun
from models_app.training.promotion import live_version
from models_app.training.services.training_data import feedback_last_id
from tests.conftest import one_verdict


def finished_finetune(taxonomy, status: str) -> TrainingRun:
    """A fine-tune of the live version on every verdict so far, finished with ``status``."""
    return TrainingRun.objects.create(
        taxonomy=taxonomy,
        kind=TrainingRun.Kind.FINETUNE,
        status=status,
        parent_version=live_version(taxonomy),
        feedback_until=feedback_last_id(taxonomy),
        started_at=timezone.now(),
        finished_at=timezone.now(),
    )


def finetunes(taxonomy) -> list[int]:
    return list(
        TrainingRun.objects.filter(taxonomy=taxonomy, kind=TrainingRun.Kind.FINETUNE)
        .order_by("id")
        .values_list("id", flat=True)
    )


def test_after_a_rejected_fine_tune_nothing_new_is_refused_naming_that_run(
    client, admin_user, curator, tiny_taxonomy
):
    one_verdict(tiny_taxonomy, curator)  # new to the live version, and tried by the run below
    rejected = finished_finetune(tiny_taxonomy, TrainingRun.Status.REJECTED)
    client.force_login(admin_user)

    response = client.post("/models/jobs/finetune")

    assert response.status_code == 409
    page = response.content.decode()
    assert f"jobs: no verdict is new since fine-tune run #{rejected.id} learnt them" in page
    assert "(rejected by the gate, " in page
    assert finetunes(tiny_taxonomy) == [rejected.id]

    one_verdict(tiny_taxonomy, curator, text="Night Nurse", code="29-1141")
    response = client.post("/models/jobs/finetune")
    assert response.status_code == 302
    assert len(finetunes(tiny_taxonomy)) == 2


def test_a_failed_fine_tune_learnt_nothing_and_does_not_hold_fine_tune_now_back(
    client, admin_user, curator, tiny_taxonomy
):
    one_verdict(tiny_taxonomy, curator)
    failed = finished_finetune(tiny_taxonomy, TrainingRun.Status.FAILED)
    client.force_login(admin_user)
    response = client.post("/models/jobs/finetune")
    assert response.status_code == 302
    assert finetunes(tiny_taxonomy)[0] == failed.id and len(finetunes(tiny_taxonomy)) == 2
