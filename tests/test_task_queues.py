"""Which queue each piece of work goes to, and the one-fit-a-taxonomy claim that keeps beat's
frequent check from piling fits up: nothing a curator waits for sits behind training."""

from __future__ import annotations

from pathlib import Path

import pytest
from celery import current_app
from django.utils import timezone

from models_app.models import Deployment, RankerVersion
from models_app.siamese.specs import PRETRAINED_SPEC, STUDENT_SPEC, TOWER_SPEC
from models_app.training import ranker_training
from models_app.training.ranker_training import (
    ranker_fit_claim,
    ranker_fit_release,
    rankers_due,
)
from models_app.training.services.runs import training_run_queue
from siamweb import task_names
from tests.test_match_probability import judge_all
from worker import tasks


def queue_of(task_name: str) -> str:
    return current_app.amqp.router.route({}, task_name)["queue"].name


@pytest.mark.parametrize(
    ("kind", "config", "queue"),
    [
        ("reindex", None, "fast"),
        ("rollback", None, "fast"),
        ("build", PRETRAINED_SPEC, "fast"),  # encodes the members, trains nothing
        ("build", TOWER_SPEC, "training"),
        ("build", STUDENT_SPEC, "training"),
        ("finetune", None, "training"),
    ],
)
def test_a_run_goes_to_the_queue_of_what_it_does(kind, config, queue):
    assert training_run_queue(kind=kind, config=config) == queue


def test_ranker_fits_have_a_queue_of_their_own_and_everything_else_is_fast_work():
    assert queue_of(task_names.FIT_RANKER) == task_names.RANKER_QUEUE
    assert queue_of(task_names.REFIT_DUE_RANKERS) == task_names.RANKER_QUEUE
    assert queue_of(task_names.EXECUTE_TRAINING_RUN) == task_names.TRAINING_QUEUE
    fast = (
        task_names.EXECUTE_BULK_JOB,
        task_names.EXECUTE_BULK_CHUNK,
        task_names.REPREDICT_PENDING_INPUTS,
        task_names.REINDEX_STALE_TAXONOMIES,
    )
    assert {queue_of(name) for name in fast} == {task_names.FAST_QUEUE}


def test_every_queue_has_a_worker_in_the_procfile():
    procfile = (Path(__file__).resolve().parents[1] / "Procfile").read_text()
    served = {
        queue
        for line in procfile.splitlines()
        if "--queues=" in line
        for queue in line.split("--queues=")[1].split()[0].split(",")
    }
    assert served == set(task_names.QUEUES)


def test_one_fit_a_taxonomy_is_queued_until_it_ends(tiny_taxonomy, settings):
    assert ranker_fit_claim(taxonomy=tiny_taxonomy)
    assert not ranker_fit_claim(taxonomy=tiny_taxonomy)
    ranker_fit_release(taxonomy=tiny_taxonomy)
    assert ranker_fit_claim(taxonomy=tiny_taxonomy)
    # A claim whose worker died stops holding the next fit back.
    old = timezone.now() - timezone.timedelta(seconds=settings.SIAMWEB_RANKER_FIT_STALE_SECONDS + 1)
    Deployment.objects.filter(taxonomy=tiny_taxonomy).update(ranker_fit_queued_at=old)
    assert ranker_fit_claim(taxonomy=tiny_taxonomy)


def test_a_ranker_of_another_feature_set_is_due_for_a_refit_at_once(tiny_taxonomy, curator):
    judge_all(tiny_taxonomy, curator)
    assert rankers_due() == []  # the live ranker has every verdict
    RankerVersion.objects.filter(taxonomy=tiny_taxonomy).update(feature_set="r0-retired")
    assert rankers_due() == [tiny_taxonomy]


def test_a_fit_that_raises_holds_the_next_one_back_until_its_claim_goes_stale(
    tiny_taxonomy, monkeypatch, settings
):
    """Else beat, every SIAMWEB_RANKER_CHECK_SECONDS, would queue the same failing fit again."""

    def broken(*, taxonomy):
        raise RuntimeError("the fit broke")

    monkeypatch.setattr(ranker_training, "ranker_fit", broken)
    assert ranker_fit_claim(taxonomy=tiny_taxonomy)
    with pytest.raises(RuntimeError, match="the fit broke"):
        tasks.fit_ranker.run(tiny_taxonomy.id, repredict=False, claimed=True)
    assert not ranker_fit_claim(taxonomy=tiny_taxonomy)
    old = timezone.now() - timezone.timedelta(seconds=settings.SIAMWEB_RANKER_FIT_STALE_SECONDS + 1)
    Deployment.objects.filter(taxonomy=tiny_taxonomy).update(ranker_fit_queued_at=old)
    assert ranker_fit_claim(taxonomy=tiny_taxonomy)


def test_a_beat_check_not_started_within_its_interval_expires(settings):
    """Queued while their worker was down or busy, checks would otherwise run back to back."""
    schedule = settings.CELERY_BEAT_SCHEDULE
    assert len(schedule) == 5
    for entry in schedule.values():
        assert entry["options"]["expires"] == entry["schedule"] > 0
