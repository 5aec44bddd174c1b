"""Celery tasks: take ids, call one service, safe to run twice.

A task is another interface to the services, like a view: it holds no logic of its own. Running
one twice is harmless: ``training_run_execute`` claims its run with a conditional update, and the
beat tasks only queue runs, of which a taxonomy has at most one active.

Time limits come from settings (``CELERY_TASK_SOFT_TIME_LIMIT`` / ``CELERY_TASK_TIME_LIMIT``) and
need the prefork pool. A soft limit raises ``SoftTimeLimitExceeded`` inside the run, which
``training_run_execute`` marks FAILED with that error; a hard limit (or any other death of the
worker) stops the heartbeat, and ``reindex_stale_taxonomies`` marks the run failed. Either way the
live model and index keep serving and the run can be retried from its checkpoints.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

import kombu.exceptions
import redis.exceptions
from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, OperationalError

import siamweb.task_names as task_names
from annotations.models import Taxonomy
from annotations.services.review.inputs import review_items_repredict
from annotations.services.review.queue_order import review_items_reorder
from models_app.bulk import jobs as bulk
from models_app.bulk import run as bulk_run
from models_app.models import RankerVersion, TrainingRun
from models_app.training import promotion, ranker_training, retraining
from models_app.training.run_execution import training_run_execute
from models_app.training.selectors.runs import training_run_get
from models_app.training.services.builds import model_version_compile
from models_app.training.services.indexes import taxonomy_needs_reindex
from models_app.training.services.runs import (
    first_training_request,
    training_run_request,
    training_runs_fail_stale,
    training_runs_resend_queued,
)

logger = logging.getLogger(__name__)

# Errors that say a connection dropped, not that the work is wrong: worth trying again shortly.
# Anything else (a bad config, a bug) would fail the same way again, so it is not retried.
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    OperationalError,
    InterfaceError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    kombu.exceptions.OperationalError,
)
MAX_RETRIES = 3
# A bulk job another delivery holds is asked for again this many times, a heartbeat apart.
BULK_BUSY_RETRIES = 30


def _retried_task(name: str, **options):
    """A task that does work, registered as ``name``: tried again after a transient error, at
    most ``MAX_RETRIES`` times, 5 seconds first and doubling each time (with jitter, so that
    tasks a dropped connection failed together do not come back together)."""
    return shared_task(
        name=name,
        autoretry_for=TRANSIENT_ERRORS,
        max_retries=MAX_RETRIES,
        retry_backoff=5,
        retry_jitter=True,
        **options,
    )


@contextmanager
def _failure_recorded(
    record_failure: Callable[..., None], *, handled: tuple[type[Exception], ...] = ()
) -> Iterator[None]:
    """Any error but a transient one (or one the task ``handled`` itself) is passed to
    ``record_failure`` as ``error`` before it propagates: it is not worth retrying by itself (a
    bug, a full disk), so the bulk job is marked FAILED with its chunks done kept, and a retry
    from the page or the API continues once the cause is fixed."""
    try:
        yield
    except TRANSIENT_ERRORS + handled:
        raise
    except Exception as exc:
        record_failure(error=f"{type(exc).__name__}: {exc}")
        raise


@_retried_task(task_names.EXECUTE_TRAINING_RUN, retry_backoff_max=300, bind=True)
def execute_training_run(self, run_id: int) -> str | None:
    """Carry out a queued run; the run's final status, or None when it was not queued any more
    (another delivery of the same message already took it)."""
    run = training_run_execute(run_id=run_id)
    if run is None:
        if not self.request.retries:
            return None
        # This try's predecessor ran the run and then met a transient error in what follows
        # it (a broker gone for a moment): what follows must not be dropped with it. Each
        # step below reads what the run did, and asks again for nothing already underway.
        run = training_run_get(run_id=run_id)
        if run is None or run.status in TrainingRun.ACTIVE_STATUSES:
            return None
    if promotion.run_moved_live_model(run):
        # A ranker reads its model's scores: the new live model gets its own, then the open
        # items are predicted again with both.
        fit_ranker.delay(run.taxonomy_id)
    # A new taxonomy went live with the pretrained tower as it comes: now train it.
    first_training_request(run=run)
    return run.status


@_retried_task(task_names.REPREDICT_PENDING_INPUTS)
def repredict_pending_inputs(taxonomy_id: int) -> int:
    """After another model went live: the open review items predicted again with it. Chained
    here rather than called by training, which knows nothing of the review queue."""
    return review_items_repredict(taxonomy=Taxonomy.objects.get(id=taxonomy_id))


@_retried_task(task_names.FIT_RANKER)
def fit_ranker(taxonomy_id: int, repredict: bool = True, claimed: bool = False) -> str | None:
    """Fit, gate and maybe make live a ranker on the taxonomy's verdicts; after a model went
    live (``repredict``), the open review items are predicted again with it. ``claimed``: beat
    queued it under the taxonomy's fit claim, released when it ends."""
    taxonomy = Taxonomy.objects.get(id=taxonomy_id)
    version = ranker_training.ranker_fit(taxonomy=taxonomy)
    if claimed:
        # Released once the fit ended, not when it raised: that claim holds the next fit back
        # until it goes stale (SIAMWEB_RANKER_FIT_STALE_SECONDS), where beat would otherwise
        # queue the same failing fit every few seconds.
        ranker_training.ranker_fit_release(taxonomy=taxonomy)
    if repredict:
        repredict_pending_inputs.delay(taxonomy_id)
    elif version is not None and version.status == RankerVersion.Status.LIVE:
        # What a verdict teaches most moved with what the ranker learnt.
        reorder_review_queue.delay(taxonomy_id)
    return version.status if version is not None else None


@_retried_task(task_names.REORDER_REVIEW_QUEUE)
def reorder_review_queue(taxonomy_id: int) -> int:
    """After a new ranker went live: the open review items ordered again by what a verdict on
    each is worth now (fast work: bounded by ``SIAMWEB_REORDER_MAX_ITEMS``)."""
    return review_items_reorder(taxonomy=Taxonomy.objects.get(id=taxonomy_id))


@shared_task(name=task_names.REFIT_DUE_RANKERS)
def refit_due_rankers() -> int:
    """Beat: fit the rankers of taxonomies with enough verdicts new to their live ranker, one
    fit a taxonomy at a time."""
    queued = 0
    for taxonomy in ranker_training.rankers_due():
        if ranker_training.ranker_fit_claim(taxonomy=taxonomy):
            fit_ranker.delay(taxonomy.id, repredict=False, claimed=True)
            queued += 1
    return queued


@_retried_task(task_names.FINISH_PROMOTION)
def finish_promotion(run_id: int) -> dict:
    """After an admin forced a candidate live: its flip report, then the new predictions (a
    retry after a failure does what is left: the report is written once)."""
    run = promotion.promotion_finish(run_id=run_id)
    ranker_training.ranker_fit(taxonomy=run.taxonomy)
    review_items_repredict(taxonomy=run.taxonomy)
    return run.flip_report.get("counts", {})


@shared_task(name=task_names.REINDEX_STALE_TAXONOMIES)
def reindex_stale_taxonomies() -> int:
    """Beat: free runs whose worker died, then reindex taxonomies with members not indexed."""
    freed = training_runs_fail_stale(
        silent_for_seconds=settings.SIAMWEB_RUN_HEARTBEAT_TIMEOUT_SECONDS
    )
    if freed:
        logger.warning("marked %d abandoned training run(s) failed", freed)
    resent = training_runs_resend_queued(older_than_seconds=settings.SIAMWEB_REINDEX_CHECK_SECONDS)
    if resent:
        logger.warning("sent %d queued training run(s) again", resent)
    reports = promotion.promotions_resend_pending(
        older_than_seconds=settings.SIAMWEB_RUN_HEARTBEAT_TIMEOUT_SECONDS
    )
    if reports:
        logger.warning("asked again for %d forced promotion report(s)", reports)
    requested = 0
    for taxonomy in Taxonomy.objects.filter(deployment__isnull=False):
        if taxonomy_needs_reindex(taxonomy):
            run = training_run_request(
                taxonomy=taxonomy,
                kind=TrainingRun.Kind.REINDEX,
                trigger=TrainingRun.Trigger.SCHEDULE,
            )
            requested += run is not None
    return requested


@shared_task(name=task_names.RETRAIN_DUE_TAXONOMIES)
def retrain_due_taxonomies() -> int:
    """Beat: start a fine-tune where enough new verdicts have arrived (or time has passed)."""
    started = retraining.retrain_due_taxonomies()
    for run in started:
        logger.info("started fine-tune run %d of %s (%s)", run.id, run.taxonomy.slug, run.trigger)
    return len(started)


@_retried_task(task_names.EXECUTE_BULK_JOB, bind=True)
def execute_bulk_job(self, job_id: int) -> str | None:
    """Start a bulk job: pin its version, split its file into chunks and queue a task for each
    (taken up again: queue what is left). Its status, or None when there was nothing to do. A
    job another worker holds (or held until it died a moment ago) is asked for again once its
    heartbeat would be stale: then this delivery takes it up."""
    try:
        with _failure_recorded(
            partial(bulk.bulk_job_fail_unexpected, job_id=job_id),
            handled=(bulk_run.JobBusy, SoftTimeLimitExceeded),
        ):
            job = bulk_run.bulk_job_start(job_id=job_id)
    except bulk_run.JobBusy:
        raise self.retry(
            countdown=bulk.stale_seconds() + 5, max_retries=BULK_BUSY_RETRIES
        ) from None
    except SoftTimeLimitExceeded:
        # A file too big to split in one task's time: queued again, the next delivery splits
        # on from the last chunk.
        bulk.bulk_job_requeue(job_id=job_id)
        return bulk.BulkJob.Status.QUEUED
    return job.status if job is not None else None


@_retried_task(task_names.EXECUTE_BULK_CHUNK, bind=True)
def execute_bulk_chunk(self, chunk_id: int) -> str | None:
    """Normalize one chunk of a bulk job, on whichever worker is free; the chunk's status, or
    None when it was not this delivery's to do. A worker that dies here costs this chunk
    only: beat queues it again once its heartbeat is stale."""
    with _failure_recorded(partial(bulk.bulk_chunk_fail_unexpected, chunk_id=chunk_id)):
        chunk = bulk_run.bulk_chunk_execute(
            chunk_id=chunk_id, worker=f"{self.request.hostname}:{os.getpid()}"
        )
    return chunk.status if chunk is not None else None


@_retried_task(task_names.FINISH_BULK_JOB)
def finish_bulk_job(job_id: int) -> str | None:
    """After a bulk job's last chunk: its chunks' results joined in input order into the
    result files; its final status, or None when it was not ready."""
    with _failure_recorded(partial(bulk.bulk_job_fail_unexpected, job_id=job_id)):
        job = bulk_run.bulk_job_finish(job_id=job_id)
    return job.status if job is not None else None


@shared_task(name=task_names.RESUME_STALE_BULK_JOBS)
def resume_stale_bulk_jobs() -> int:
    """Beat: queue again the bulk chunks and jobs whose worker died; each goes on from where it
    was."""
    resumed = bulk.bulk_jobs_resume_stale()
    if resumed:
        logger.warning("queued %d bulk chunk(s) or job(s) whose worker stopped again", resumed)
    return resumed


@shared_task(name=task_names.DELETE_EXPIRED_BULK_JOBS)
def delete_expired_bulk_jobs() -> int:
    """Beat: delete the bulk jobs that ended longer ago than they are kept, with their files."""
    deleted = bulk.bulk_jobs_delete_expired()
    if deleted:
        logger.info("deleted %d bulk job(s) past SIAMWEB_BULK_KEEP_DAYS", deleted)
    return deleted


@_retried_task(task_names.COMPILE_MODEL_VERSION)
def compile_model_version(model_version_id: int) -> bool:
    """A process found this version's compiled copy missing, stale or damaged and serves it
    with PyTorch meanwhile: compile it again (nothing when a current one is there by then)."""
    return model_version_compile(model_version_id=model_version_id)
