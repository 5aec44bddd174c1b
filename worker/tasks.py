"""Celery tasks: take ids, call one service, safe to run twice."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from annotations.models import Taxonomy
from models_app import retraining
from models_app.models import TrainingRun
from models_app.services import (
    taxonomy_needs_reindex,
    training_run_execute,
    training_run_request,
    training_runs_fail_stale,
    training_runs_resend_queued,
)

logger = logging.getLogger(__name__)


@shared_task(name="worker.tasks.execute_training_run")
def execute_training_run(run_id: int) -> None:
    training_run_execute(run_id=run_id)


@shared_task(name="worker.tasks.reindex_stale_taxonomies")
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


@shared_task(name="worker.tasks.retrain_due_taxonomies")
def retrain_due_taxonomies() -> int:
    """Beat: start a fine-tune where enough new verdicts have arrived (or time has passed)."""
    return len(retraining.retrain_due_taxonomies())
