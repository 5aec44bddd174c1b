"""The Bulk pages (mounted at "bulk/"): upload a file to normalize, follow its job, download.

A job's page polls its panel every two seconds while the job is queued or running (htmx); the
panel that answers once it is over carries no trigger, and shows the downloads if it succeeded.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from models_app.bulk.download import CONTENT_TYPES, bulk_result_download
from models_app.bulk.files import BulkFileError
from models_app.bulk.forms import BulkJobForm
from models_app.bulk.jobs import (
    BulkStateError,
    bulk_job_cancel,
    bulk_job_create,
    bulk_job_delete,
    bulk_job_retry,
    bulk_max_bytes,
    stale_before,
)
from models_app.bulk.selectors import bulk_job_expires, bulk_jobs_of, no_result_why
from models_app.models import BulkJob
from models_app.serving.engines import NoLiveModel
from siamweb.humanize import duration_text, format_size
from siamweb.web.decorators import curator_required

JOBS_LISTED = 20
POLL_SECONDS = 2


def _job(request: HttpRequest, job_id: int) -> BulkJob:
    job = bulk_jobs_of(request.user).filter(id=job_id).first()
    if job is None:  # another curator's job is as absent as one that never was
        raise Http404(f"no bulk job {job_id}")
    return job


def _job_context(request: HttpRequest, job: BulkJob, error: str = "") -> dict:
    lost = job.status == BulkJob.Status.RUNNING and job.heartbeat_at is not None
    lost = lost and job.heartbeat_at < stale_before()
    return {
        "job": job,
        "percent": int(job.progress * 100),
        "eta": duration_text(job.eta_seconds) if job.active else "",
        "polling": job.active,
        "poll_seconds": POLL_SECONDS,
        "review_max_rows": settings.SIAMWEB_BULK_REVIEW_MAX_ROWS,
        "review_pending_per_user": settings.SIAMWEB_REVIEW_PENDING_PER_USER,
        "downloads": job.status == BulkJob.Status.SUCCEEDED,
        # A running job whose worker died: retried by hand, or by beat's next check.
        "worker_lost": duration_text((timezone.now() - job.heartbeat_at).total_seconds())
        if lost
        else "",
        "error": error,
        "deleted_on": bulk_job_expires(job),
    }


@curator_required
@require_http_methods(["GET", "POST"])
def bulk_list(request: HttpRequest) -> HttpResponse:
    form = BulkJobForm()
    error, status = "", 200
    if request.method == "POST":
        # A body over the limit never gets here (siamweb.middleware.RequestSizeLimitMiddleware).
        status = 400
        form = BulkJobForm(request.POST, request.FILES)
        if form.is_valid():
            upload = form.cleaned_data["file"]
            try:
                job = bulk_job_create(
                    taxonomy=form.cleaned_data["taxonomy"],
                    upload=upload,
                    filename=upload.name,
                    column=form.cleaned_data["column"],
                    review_below=form.cleaned_data["review_below"],
                    review_margin_below=form.cleaned_data["review_margin_below"],
                    user=request.user,
                )
            except (BulkFileError, NoLiveModel) as exc:
                form.add_error("file" if isinstance(exc, BulkFileError) else "taxonomy", str(exc))
            else:
                messages.info(
                    request, f"{job.filename} was accepted: this page follows its progress."
                )
                return redirect("bulk-job", job_id=job.id)
    context = {
        "form": form,
        "error": error,
        "jobs": bulk_jobs_of(request.user)[:JOBS_LISTED],
        "max_size": format_size(bulk_max_bytes()),
    }
    return render(request, "bulk/list.html", context, status=status)


@curator_required
@require_GET
def bulk_job(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _job(request, job_id)
    context = _job_context(request, job)
    if request.htmx:
        return render(request, "bulk/_job_panel.html", context)
    return render(request, "bulk/job.html", context)


def _act(request: HttpRequest, job_id: int, action, done) -> HttpResponse:
    """Carry ``action`` out on the job and say ``done`` (a text, or one made from the job)."""
    job = _job(request, job_id)
    try:
        job = action(job=job)
    except BulkStateError as exc:
        return render(request, "bulk/job.html", _job_context(request, job, str(exc)), status=409)
    except BulkJob.DoesNotExist:  # deleted between the lookup and the action
        raise Http404(f"no bulk job {job_id}") from None
    messages.info(request, done(job) if callable(done) else done)
    return redirect("bulk-job", job_id=job.id)


@curator_required
@require_POST
def bulk_job_cancel_view(request: HttpRequest, job_id: int) -> HttpResponse:
    return _act(request, job_id, bulk_job_cancel, _cancelled)


def _cancelled(job: BulkJob) -> str:
    if job.status == BulkJob.Status.CANCELLED:
        return "Cancelled: the partial results are deleted."
    return "Stopping: each worker ends after the chunk it is on; the partial results are deleted."


@curator_required
@require_POST
def bulk_job_retry_view(request: HttpRequest, job_id: int) -> HttpResponse:
    return _act(request, job_id, bulk_job_retry, "Queued again: it goes on from its last chunk.")


@curator_required
@require_http_methods(["GET", "POST"])
def bulk_job_delete_view(request: HttpRequest, job_id: int) -> HttpResponse:
    """GET: ask to confirm; POST: delete the job with its upload and its results."""
    job = _job(request, job_id)
    context = {
        "section": "Bulk",
        "title": f"Delete bulk job #{job.id}?",
        "explanation": f"{job.filename} as uploaded and its results are deleted for good.",
        "action": reverse("bulk-job-delete", kwargs={"job_id": job.id}),
        "button": "Delete the job and its files",
        "cancel": reverse("bulk-job", kwargs={"job_id": job.id}),
        "testid": "confirm-delete",
    }
    if request.method == "GET":
        return render(request, "models/confirm.html", context)
    try:
        bulk_job_delete(job=job)
    except BulkStateError as exc:
        return render(request, "models/confirm.html", {**context, "error": str(exc)}, status=409)
    messages.info(request, f"Bulk job #{job.id} is deleted, with its file and its results.")
    return redirect("bulk")


@curator_required
@require_GET
def bulk_job_download(request: HttpRequest, job_id: int, kind: str) -> HttpResponse:
    job = _job(request, job_id)
    if kind not in CONTENT_TYPES:
        raise Http404(f"no {kind} result: the results are csv and jsonl")
    download = bulk_result_download(job, kind)
    if download is None:  # a link from a page shown before the job failed or was cancelled
        return render(
            request, "bulk/job.html", _job_context(request, job, no_result_why(job)), status=409
        )
    return download
