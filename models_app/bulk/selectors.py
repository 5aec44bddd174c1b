"""Reads of bulk jobs: which a user may see, where one stands in words, when it expires, and
its finished result file."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from models_app.bulk.files import RESULT_FILES
from models_app.models import BulkJob
from models_app.serving.engines import artifact_path


def bulk_jobs_of(user) -> QuerySet[BulkJob]:
    """The jobs this user may see, follow, download, cancel and retry, newest first: those they
    asked for, and every job for an admin. An uploaded file (a CRM export, say) often holds
    more than titles, so other curators see neither it nor its results."""
    jobs = BulkJob.objects.select_related("taxonomy", "requested_by", "model_version__taxonomy")
    return jobs if user.is_staff else jobs.filter(requested_by_id=user.id)


def status_phrase(job: BulkJob) -> str:
    """Where the job stands, as the rest of a sentence that starts with the job."""
    return {
        BulkJob.Status.QUEUED: "is queued",
        BulkJob.Status.RUNNING: "is stopping" if job.cancel_requested else "is running",
        BulkJob.Status.SUCCEEDED: "has succeeded",
        BulkJob.Status.FAILED: "has failed",
        BulkJob.Status.CANCELLED: "was cancelled",
    }[job.status]


def no_result_why(job: BulkJob) -> str:
    """Why a job has no result to download: not yet, or never."""
    if job.active and not job.cancel_requested:
        return f"bulk job {job.id} {status_phrase(job)}: its results download once it succeeds"
    if job.status == BulkJob.Status.FAILED:
        return f"bulk job {job.id} has failed, so it has no result; retry it to go on"
    return f"bulk job {job.id} {status_phrase(job)}: it has no result"


def bulk_job_expires(job: BulkJob):
    """When a finished job is deleted with its files (``SIAMWEB_BULK_KEEP_DAYS``), or None."""
    days = settings.SIAMWEB_BULK_KEEP_DAYS
    if job.active or job.finished_at is None or not days:
        return None
    return job.finished_at + timezone.timedelta(days=days)


def bulk_job_result(job: BulkJob, kind: str) -> Path | None:
    """The finished result file of this kind ("csv" or "jsonl"), or None while there is none."""
    if job.status != BulkJob.Status.SUCCEEDED or kind not in RESULT_FILES:
        return None
    path = artifact_path(job.folder) / RESULT_FILES[kind]
    return path if path.exists() else None
