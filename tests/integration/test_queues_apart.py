"""Nothing a curator waits for queues behind training: with a fine-tune in progress on the
training worker, a bulk job is normalized and a ranker is fitted and made live by the workers
of the other queues, as `make run` and docs/deploying.md start them."""

from __future__ import annotations

import io

import pytest

from annotations.models import Group
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.bulk.jobs import bulk_job_create
from models_app.models import BulkJob, Deployment, RankerVersion, TrainingRun
from models_app.training.retraining import finetune_run_request
from siamweb.task_names import FAST_QUEUE, RANKER_QUEUE, TRAINING_QUEUE
from tests.integration.conftest import wait_for
from tests.test_match_probability import RIGHT, WRONG
from worker.tasks import refit_due_rankers

pytestmark = pytest.mark.integration


def judge(taxonomy, user) -> None:
    items = inputs_submit(taxonomy=taxonomy, texts=RIGHT + list(WRONG), source="api")
    for item in items:
        code = WRONG.get(item.input.text)
        if code is None or item.top_group.code == code:
            judgement_create(review_item=item, user=user, verdict="confirm")
        else:
            group = Group.objects.get(taxonomy=taxonomy, code=code)
            judgement_create(review_item=item, user=user, verdict="reassign", group=group)


def test_a_bulk_job_and_a_ranker_fit_finish_while_a_finetune_trains(
    start_worker, trainable_taxonomy, curator
):
    taxonomy = trainable_taxonomy
    trainer = start_worker(queues=[TRAINING_QUEUE])
    fast = start_worker(queues=[FAST_QUEUE])
    ranker_worker = start_worker(queues=[RANKER_QUEUE])
    judge(taxonomy, curator)

    # Far more steps than the rest of the test takes: it is still training at the end.
    run = finetune_run_request(
        taxonomy=taxonomy, trigger="manual", config={"training": {"max_steps": 10_000_000}}
    )

    def training():
        run.refresh_from_db()
        return run.status == TrainingRun.Status.RUNNING and run.stage == "train"

    wait_for(training, "the fine-tune to train", trainer.log)

    job = bulk_job_create(
        taxonomy=taxonomy,
        upload=io.BytesIO(b"Java Developer\nICU Nurse\nLatte Artist\n"),
        filename="titles.txt",
        user=curator,
    )
    assert refit_due_rankers() == 1  # what beat does every SIAMWEB_RANKER_CHECK_SECONDS
    assert refit_due_rankers() == 0  # one fit a taxonomy at a time: the first is queued

    def bulk_done():
        job.refresh_from_db()
        return job.status == BulkJob.Status.SUCCEEDED

    wait_for(bulk_done, "the bulk job to finish", fast.log)
    live = wait_for(
        lambda: Deployment.objects.get(taxonomy=taxonomy).ranker, "a ranker", ranker_worker.log
    )
    assert live.status == RankerVersion.Status.LIVE and live.verdicts == len(RIGHT) + len(WRONG)
    run.refresh_from_db()
    assert run.status == TrainingRun.Status.RUNNING, "the fine-tune ended before the check"
    # The fit released its claim: the next one can be queued once verdicts are new again.
    wait_for(
        lambda: Deployment.objects.get(taxonomy=taxonomy).ranker_fit_queued_at is None,
        "the fit's claim to be released",
        ranker_worker.log,
    )
