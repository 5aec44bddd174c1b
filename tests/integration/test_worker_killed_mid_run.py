"""A worker that stops in the middle of a fine-tune: killed, the live model and index keep
serving, the scheduled check marks the run failed, and its retry resumes from the first attempt's
checkpoint on a fresh worker; past its soft time limit, the run fails and the worker lives on."""

from __future__ import annotations

import pytest
import torch

from models_app.models import Deployment, ModelVersion, TrainingRun
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.siamese.train import CHECKPOINT
from models_app.training.retraining import finetune_run_request, live_version, training_run_retry
from models_app.training.services.runs import run_checkpoint_dir, training_run_request
from tests.integration.conftest import wait_for, wait_until_finished
from worker.tasks import execute_training_run, reindex_stale_taxonomies

pytestmark = pytest.mark.integration

MAX_STEPS = 3000  # some 15 seconds of training on one core: long enough to be caught mid-way
EVAL_EVERY = 100  # a checkpoint every 100 steps


def test_a_killed_run_leaves_the_model_serving_and_its_retry_resumes_on_a_fresh_worker(
    start_worker, trainable_taxonomy, admin_user, settings
):
    taxonomy = trainable_taxonomy
    worker = start_worker()
    live = live_version(taxonomy)
    live_build = Deployment.objects.get(taxonomy=taxonomy).index_build
    run = finetune_run_request(
        taxonomy=taxonomy,
        trigger="manual",
        requested_by=admin_user,
        config={"training": {"max_steps": MAX_STEPS, "eval_every": EVAL_EVERY}},
    )
    checkpoint = run_checkpoint_dir(run) / "learn" / CHECKPOINT  # the first phase's

    def training_with_a_checkpoint():
        run.refresh_from_db()
        return run.status == "running" and run.stage == "train" and checkpoint.exists()

    wait_for(training_with_a_checkpoint, "the run to train and write a checkpoint", worker.log)
    worker.kill()  # SIGKILL: no cleanup, no goodbye
    worker.wait()

    # Nothing moved: the old model and index answer, and no half-made version appeared.
    run.refresh_from_db()
    assert run.status == "running" and run.stage in ("train", "evaluate")
    assert Deployment.objects.get(taxonomy=taxonomy).index_build == live_build
    assert list(ModelVersion.objects.filter(taxonomy=taxonomy)) == [live]
    (result,) = rank_taxonomy_groups(taxonomy, ["icu nurse"], k=1)
    assert (result.model_version, result.groups[0].code) == (live.label, "29-1141")

    # Beat's check: a run whose heartbeat went silent lost its worker.
    settings.SIAMWEB_RUN_HEARTBEAT_TIMEOUT_SECONDS = 1

    def marked_failed():
        reindex_stale_taxonomies.run()
        run.refresh_from_db()
        return run.status == "failed"

    wait_for(marked_failed, "the scheduled check to mark the run failed")
    assert "the worker stopped before the run finished" in run.error
    assert run.finished_at is not None

    killed_at = torch.load(checkpoint, weights_only=False)["step"]
    assert 0 < killed_at < MAX_STEPS

    fresh = start_worker()
    retry = training_run_retry(run=run, actor=admin_user)
    assert (retry.status, retry.retry_of, retry.config) == ("queued", run, run.config)
    retry = wait_until_finished(retry, fresh.log)

    # It finished: the gate decided (nothing to learn from here, so the live model stays).
    assert retry.status == "rejected", (retry.error, retry.gate_report)
    assert retry.gate_report["reasons"] == ["there are no verdicts to learn from"]
    assert retry.model_version.metrics["steps"] == MAX_STEPS
    assert live_version(taxonomy) == live
    # It went on from the first attempt's checkpoint rather than starting over ...
    assert retry.model_version.metrics["resumed_from_step"] == killed_at
    # ... and, finished, left no checkpoint behind.
    assert not run_checkpoint_dir(run).exists()
    assert TrainingRun.objects.get(id=run.id).status == "failed"


def test_a_run_past_its_soft_time_limit_is_stopped_and_fails_while_the_model_serves(
    start_worker, trainable_taxonomy
):
    taxonomy = trainable_taxonomy
    # Time limits are enforced by the prefork pool (the solo pool ignores them), as in production.
    worker = start_worker(pool="prefork")
    live = live_version(taxonomy)
    run = finetune_run_request(
        taxonomy=taxonomy,
        trigger="manual",
        config={"training": {"max_steps": MAX_STEPS}},
        enqueue=False,
    )
    # The limits travel in the message (by default CELERY_TASK_SOFT_TIME_LIMIT of the sender).
    execute_training_run.apply_async(args=[run.id], soft_time_limit=3, time_limit=120)

    run = wait_until_finished(run, worker.log)

    assert run.status == "failed"
    assert run.error.startswith("SoftTimeLimitExceeded"), run.error
    assert run.stage != "done"
    assert live_version(taxonomy) == live
    (result,) = rank_taxonomy_groups(taxonomy, ["icu nurse"], k=1)
    assert (result.model_version, result.groups[0].code) == (live.label, "29-1141")
    # The worker lives on and takes the next run.
    reindex = training_run_request(taxonomy=taxonomy, kind="reindex")
    assert wait_until_finished(reindex, worker.log).status == "succeeded"
