"""A bulk job's result as an HTTP download, for the bulk pages and the API alike."""

from __future__ import annotations

from django.http import FileResponse

from models_app.bulk.selectors import bulk_job_result
from models_app.models import BulkJob

CONTENT_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}


def bulk_result_download(job: BulkJob, kind: str) -> FileResponse | None:
    """The finished result of this kind as a download named after the upload, or None while
    there is none (``no_result_why`` says why)."""
    path = bulk_job_result(job, kind)
    if path is None:
        return None
    stem = job.filename.rsplit(".", 1)[0] or "bulk"
    return FileResponse(
        path.open("rb"),
        as_attachment=True,
        filename=f"{stem}-normalized.{kind}",
        content_type=CONTENT_TYPES[kind],
    )
