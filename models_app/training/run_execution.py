"""Carrying out a queued training run: one table from a run's kind to the capability that does
the work (build and reindex, fine-tune, rollback), which none of them imports back; and a
taxonomy given a live model in-process (``make run``'s setup, the benchmarks)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.utils import timezone

from annotations.models import Taxonomy
from models_app.models import ModelVersion, TrainingRun
from models_app.training.promotion import rollback_execute
from models_app.training.retraining import finetune_execute
from models_app.training.services.builds import model_version_import
from models_app.training.services.indexes import (
    deployment_activate,
    index_build_create,
    taxonomy_needs_reindex,
)
from models_app.training.services.runs import (
    RUN_IN_PROGRESS,
    RunAbandoned,
    RunCancelled,
    build_or_reindex,
    run_checkpoint_dir,
    run_checkpoints_drop,
    run_mark_failed,
    run_version_discard,
    training_run_progress_writer,
    training_run_request,
)

logger = logging.getLogger(__name__)

EXECUTE_BY_KIND = {
    TrainingRun.Kind.BUILD: build_or_reindex,
    TrainingRun.Kind.REINDEX: build_or_reindex,
    TrainingRun.Kind.FINETUNE: finetune_execute,
    TrainingRun.Kind.ROLLBACK: rollback_execute,
}


def training_run_execute(*, run_id: int) -> TrainingRun | None:
    """Claim a queued run and carry it out; a second call for the same run does nothing.

    Whatever goes wrong, the live model and index keep serving: a deployment only moves at the
    very end of a successful run, and a failed run is marked FAILED with its error.
    """
    now = timezone.now()
    claimed = TrainingRun.objects.filter(id=run_id, status=TrainingRun.Status.QUEUED).update(
        status=TrainingRun.Status.RUNNING, started_at=now, heartbeat_at=now, stage="start"
    )
    if claimed != 1:
        logger.info("training run %s is not queued any more; nothing to do", run_id)
        return None
    run = TrainingRun.objects.select_related("taxonomy", "parent_version", "model_version").get(
        id=run_id
    )

    progress = training_run_progress_writer(run_id=run_id)

    try:
        outcome = EXECUTE_BY_KIND[run.kind](run=run, progress=progress)
    except RunAbandoned as exc:
        # Marked failed already, and its retry may be running: the version it made (never
        # live) goes; the checkpoints stay, for that retry to resume from.
        logger.warning("training run %s stopped: %s", run_id, exc)
        run_version_discard(TrainingRun.objects.select_related("model_version").get(id=run_id))
        run.refresh_from_db()
        return run
    except RunCancelled as exc:
        logger.info("training run %s %s", run_id, exc)
        TrainingRun.objects.filter(id=run_id).update(
            status=TrainingRun.Status.CANCELLED,
            error=f"{exc}; the live model kept serving",
            finished_at=timezone.now(),
        )
        run_checkpoints_drop(run)
        run_version_discard(TrainingRun.objects.select_related("model_version").get(id=run_id))
        run.refresh_from_db()
        return run
    except Exception as exc:
        logger.exception("training run %s failed", run_id)
        if isinstance(exc, SoftTimeLimitExceeded):
            error = (
                "SoftTimeLimitExceeded: stopped by CELERY_TASK_SOFT_TIME_LIMIT "
                f"({settings.CELERY_TASK_SOFT_TIME_LIMIT} s); the live model kept serving"
            )
        else:
            error = f"{type(exc).__name__}: {exc}"
        run_mark_failed(run_id=run_id, error=error, stopped=isinstance(exc, SoftTimeLimitExceeded))
        run.refresh_from_db()
        return run
    finished = TrainingRun.objects.filter(id=run_id, status__in=RUN_IN_PROGRESS).update(
        stage="done", progress=1.0, eta_seconds=0.0, finished_at=timezone.now(), **outcome
    )
    if not finished:
        # Given up on as silent after its last report: what it did stands, its status (and its
        # retry's checkpoints) too.
        logger.warning("training run %s finished after it was marked failed", run_id)
        run.refresh_from_db()
        return run
    # A checkpoint (optimizer state included, about half a gigabyte) only serves a retry of a
    # failed run; a finished one needs it no more.
    shutil.rmtree(run_checkpoint_dir(run), ignore_errors=True)
    run.refresh_from_db()
    return run


def run_now(*, taxonomy: Taxonomy, kind: str, spec: dict[str, Any] | None) -> TrainingRun | None:
    run = training_run_request(taxonomy=taxonomy, kind=kind, config=spec or {}, enqueue=False)
    if run is None:
        return None
    executed = training_run_execute(run_id=run.id)
    if executed is None:  # a fine-tune took its slot before it started (superseded)
        return None
    run = executed
    if run.status != TrainingRun.Status.SUCCEEDED:
        raise RuntimeError(f"{kind} of {taxonomy.slug} failed: {run.error}")
    return run


def taxonomy_ensure_live(
    *, taxonomy: Taxonomy, shipped: Path | None = None, spec: dict[str, Any] | None = None
) -> str:
    """Give the taxonomy a live model and a current index, doing no more work than needed.

    In order: nothing when both are current; a reindex when members changed or a version exists
    without a deployment; the shipped model when one is given (and no spec asks otherwise);
    else a training run. Returns what it did, for the caller to report.
    """
    if hasattr(taxonomy, "deployment"):
        if not taxonomy_needs_reindex(taxonomy):
            return "live model and index are up to date"
        run = run_now(taxonomy=taxonomy, kind=TrainingRun.Kind.REINDEX, spec=None)
        return f"reindexed: {run.index_build.size} members" if run else "a run is already active"
    if ModelVersion.objects.filter(taxonomy=taxonomy).exists():
        # A version that was never deployed (say an interrupted first start): index the newest.
        version = ModelVersion.objects.filter(taxonomy=taxonomy).order_by("-number").first()
        deployment_activate(index_build=index_build_create(model_version=version))
        return f"{version.label} indexed and live"
    if shipped is not None and shipped.exists() and not spec:
        version = model_version_import(taxonomy=taxonomy, folder=shipped)
        deployment_activate(index_build=index_build_create(model_version=version))
        return f"shipped model {version.label} is live"
    run = run_now(taxonomy=taxonomy, kind=TrainingRun.Kind.BUILD, spec=spec)
    return f"trained {run.model_version.label}" if run else "a run is already active"
