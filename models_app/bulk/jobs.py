"""Bulk normalization: a file of texts normalized by workers, chunk by chunk, into result files.

A job's file (a CSV with a header row, the column to normalize named; or text, one per line)
streams to ``bulk/<job folder>/`` under the artifacts folder. A worker splits it into chunks of
whole records; any number of workers normalize the chunks at once, each into its own files under
``chunks/``: every input column kept, then the top group, its score and the member behind it,
where the answer came from, the model version, the runner-up and the margin. A row whose text
cannot be used (empty, too long, control characters, bytes that are not UTF-8, broken quoting,
more fields than the header) is kept with the reason in ``error``. When the last chunk is done,
their files are joined in input order, synced and renamed to ``result.csv`` and
``result.jsonl``, then the job is marked succeeded: a result is offered only whole.

Every chunk is answered with the model version and index build pinned when the job started,
whatever is live by then. A worker that dies costs the chunk it was on: its heartbeat stops and
the chunk is queued again (``bulk_jobs_resume_stale``, beat); a chunk taken back twice has its
rows written with the reason instead (``docs/decisions/bulk-fan-out.md``).

Here: creating, cancelling, retrying and requeueing jobs and chunks. They are read by
``models_app.bulk.selectors`` and downloaded through ``models_app.bulk.download``; a job's files
are read and written by ``models_app.bulk.files``; ``models_app.bulk.run`` carries jobs and
chunks out.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import IO

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from annotations.models import Taxonomy
from annotations.text_rule import TextError, clean_text
from models_app.bulk.files import (
    BULK_FORMATS,
    INPUT_FILE,
    TEXT_COLUMN,
    BulkFileError,
    column_position,
    read_header,
    read_records,
    remove_partial,
)
from models_app.bulk.selectors import status_phrase
from models_app.models import BulkChunk, BulkJob, Deployment
from models_app.serving.engines import NoLiveModel, artifact_path
from siamweb.humanize import format_size
from siamweb.task_names import EXECUTE_BULK_CHUNK, EXECUTE_BULK_JOB
from siamweb.uploads import NotUtf8Error, copy_capped, other_separator, utf8_text

# The upload is checked this far before the job is accepted (encoding, header, a first row);
# a row further on that is not UTF-8 or not valid CSV is kept in the results with the reason.
_HEAD_BYTES = 1024 * 1024


class BulkStateError(ValueError):
    """The job is not in a state that allows what was asked (cancel a finished job...)."""


def _check_head(path: Path, *, fmt: str, filename: str, column: str) -> tuple[int, int]:
    """Refuse at once what is wrong at the start of the file: encoding, header, no rows. The
    byte offset and line the first data row starts at."""
    with path.open("rb") as handle:
        head = handle.read(_HEAD_BYTES)
    try:
        utf8_text(head, filename=filename, complete=len(head) < _HEAD_BYTES)
    except NotUtf8Error as exc:
        if exc.utf16:
            raise BulkFileError(str(exc)) from None
        # A file of millions of lines: where it goes wrong is said to the byte.
        raise BulkFileError(
            f"{filename} is not UTF-8: line {exc.line} (byte {exc.start:,}) holds "
            f"{head[exc.start : exc.start + 4]!r}; save the file as UTF-8"
        ) from None
    columns, offset, line = read_header(path, fmt=fmt, filename=filename)
    separator = other_separator(columns) if fmt == BulkJob.Format.CSV else None
    if separator is not None:
        # Read with commas it is one column, and every row would be normalized whole.
        raise BulkFileError(
            f"{filename}'s header row {columns[0]!r} seems separated by {separator}, not "
            "commas: save the file as comma-separated CSV"
        )
    column_position(columns, column, filename=filename)
    with path.open("rb") as handle:
        rows = read_records(handle, fmt=fmt, filename=filename, offset=offset, line=line)
        if next(rows, None) is None:
            raise BulkFileError(f"{filename} holds no rows")
        if len(head) < _HEAD_BYTES:
            # The whole file was checked: a fault that would stop the job (a quote never
            # closed) is refused now, not after it was queued.
            for _ in rows:
                pass
    return offset, line


# --- creating, cancelling, retrying ---------------------------------------------------------


def bulk_max_bytes() -> int:
    return settings.SIAMWEB_BULK_MAX_BYTES


def stale_seconds() -> int:
    """A running job's heartbeat older than this has lost its worker."""
    return settings.SIAMWEB_BULK_STALE_SECONDS


def stale_before():
    """The moment a running job's heartbeat must be newer than, or its worker is lost."""
    return timezone.now() - timezone.timedelta(seconds=stale_seconds())


def worker_lost() -> Q:
    """Running jobs whose worker died: their heartbeat is stale."""
    return Q(status=BulkJob.Status.RUNNING, heartbeat_at__lt=stale_before())


def bulk_job_create(
    *,
    taxonomy: Taxonomy,
    upload: IO[bytes],
    filename: str,
    column: str = "",
    review_below: float | None = None,
    review_margin_below: float | None = None,
    user=None,
    enqueue: bool = True,
) -> BulkJob:
    """Store an uploaded file and queue its job; ``BulkFileError`` says what is wrong with it,
    ``NoLiveModel`` that there is nothing to answer with yet.

    ``upload`` is read in pieces (Django keeps a large upload in a temporary file), so a file
    of any size up to ``SIAMWEB_BULK_MAX_BYTES`` passes through bounded memory.
    """
    if not Deployment.objects.filter(taxonomy=taxonomy).exists():
        raise NoLiveModel(taxonomy)
    for name, value in (
        ("review_below", review_below),
        ("review_margin_below", review_margin_below),
    ):
        if value is not None and not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be between 0 and 1")
    suffix = Path(filename).suffix.lower()
    fmt = BULK_FORMATS.get(suffix)
    if fmt is None:
        raise BulkFileError(
            f"{filename or 'the file'} is neither a .csv nor a .txt file; upload a CSV with a "
            "header row or a text file with one text per line"
        )
    # A text file has one column; a column named for it (left over from a CSV) is ignored.
    column = (column.strip() if fmt == BulkJob.Format.CSV else "") or TEXT_COLUMN
    try:
        column = clean_text(column, max_length=BulkJob._meta.get_field("column").max_length)
    except TextError as exc:
        raise BulkFileError(f"the column's name {exc}") from None
    folder = Path("bulk") / uuid.uuid4().hex
    target = artifact_path(str(folder))
    target.mkdir(parents=True)
    try:
        size = _store(upload, target / INPUT_FILE, filename=filename)
        offset, line = _check_head(target / INPUT_FILE, fmt=fmt, filename=filename, column=column)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    job = BulkJob.objects.create(
        taxonomy=taxonomy,
        requested_by=user if user is not None and user.is_authenticated else None,
        filename=filename[:255],
        input_format=fmt,
        column=column if fmt == BulkJob.Format.CSV else "",
        folder=str(folder),
        input_bytes=size,
        input_offset=offset,
        input_line=line,
        review_below=review_below,
        review_margin_below=review_margin_below,
    )
    if enqueue:
        bulk_job_enqueue(job_id=job.id)
    return job


def _store(upload: IO[bytes], path: Path, *, filename: str) -> int:
    limit = bulk_max_bytes()
    with path.open("wb") as out:
        size = copy_capped(upload, out, limit=limit)
        if size > limit:
            raise BulkFileError(
                f"{filename} is over {format_size(limit)}, the largest file a bulk job "
                "takes (SIAMWEB_BULK_MAX_BYTES); split it into smaller files"
            )
        out.flush()
        os.fsync(out.fileno())
    if size == 0:
        raise BulkFileError(f"{filename} is empty")
    return size


def bulk_job_enqueue(*, job_id: int) -> None:
    # After the commit: a worker that picked the id up before would not find the row.
    transaction.on_commit(lambda: current_app.send_task(EXECUTE_BULK_JOB, args=[job_id]))


def bulk_chunks_enqueue(*, chunk_ids: list[int]) -> None:
    """Queue a task for each chunk, once the rows are committed: whichever worker is free takes
    the next, so a job's chunks run on every worker at once."""
    if chunk_ids:
        transaction.on_commit(
            lambda: [current_app.send_task(EXECUTE_BULK_CHUNK, args=[i]) for i in chunk_ids]
        )


def bulk_job_cancel(*, job: BulkJob) -> BulkJob:
    """Stop a job: a queued one (or one whose worker died) at once, a running one after the
    chunk it is on; its partial results are deleted."""
    now_cancelled = BulkJob.objects.filter(id=job.id).filter(
        Q(status=BulkJob.Status.QUEUED) | worker_lost()
    )
    if now_cancelled.update(
        status=BulkJob.Status.CANCELLED, cancel_requested=True, finished_at=timezone.now()
    ):
        remove_partial(job)
    elif not BulkJob.objects.filter(id=job.id, status=BulkJob.Status.RUNNING).update(
        cancel_requested=True
    ):
        job.refresh_from_db()
        raise BulkStateError(f"bulk job {job.id} {status_phrase(job)}: there is nothing to stop")
    job.refresh_from_db()
    return job


def bulk_job_retry(*, job: BulkJob) -> BulkJob:
    """Queue a failed job (or one whose worker died) again: it continues from its checkpoint."""
    retried = (
        BulkJob.objects.filter(id=job.id)
        .filter(Q(status=BulkJob.Status.FAILED) | worker_lost())
        # A cancel asked of the failed or stopped job gives way to the retry asked after it.
        .update(
            status=BulkJob.Status.QUEUED,
            error="",
            finished_at=None,
            eta_seconds=None,
            cancel_requested=False,
        )
    )
    job.refresh_from_db()
    if not retried:
        raise BulkStateError(
            f"bulk job {job.id} {status_phrase(job)}; only a failed job or one whose worker "
            "stopped can be retried"
        )
    bulk_job_enqueue(job_id=job.id)
    return job


def bulk_job_delete(*, job: BulkJob, ended_before=None) -> bool:
    """Delete a finished job with its upload and its results (only if it ended before
    ``ended_before``, when given); whether it was. A queued or running job must be cancelled
    first, a worker may be writing its files: ``BulkStateError``."""
    finished = BulkJob.objects.filter(id=job.id).exclude(status__in=BulkJob.ACTIVE_STATUSES)
    if ended_before is not None:
        finished = finished.filter(finished_at__lt=ended_before)
    deleted, _ = finished.delete()
    if deleted:
        shutil.rmtree(artifact_path(job.folder), ignore_errors=True)
        return True
    current = BulkJob.objects.filter(id=job.id).first()
    if current is not None and current.active:
        then = "delete it once it has stopped" if current.cancel_requested else "cancel it first"
        raise BulkStateError(f"bulk job {job.id} {status_phrase(current)}: {then}")
    return False  # deleted a moment ago by someone else, or it ended again since ended_before


def bulk_jobs_delete_expired() -> int:
    """Delete the jobs that ended more than ``SIAMWEB_BULK_KEEP_DAYS`` ago, files and all; how
    many. 0 days keeps every job."""
    days = settings.SIAMWEB_BULK_KEEP_DAYS
    if not days:
        return 0
    ended_before = timezone.now() - timezone.timedelta(days=days)
    expired = BulkJob.objects.exclude(status__in=BulkJob.ACTIVE_STATUSES).filter(
        finished_at__lt=ended_before
    )
    deleted = 0
    for job in expired.only("id", "folder"):
        try:
            # Asked again row by row: it may have been retried, or ended again, since.
            deleted += bulk_job_delete(job=job, ended_before=ended_before)
        except BulkStateError:
            continue
    return deleted


# --- jobs their task could not finish -------------------------------------------------------


def bulk_chunks_requeue_stale(*, job_id: int | None = None) -> list[int]:
    """Take back the running chunks (of one job, or of every running job) whose heartbeat
    stopped: each counts a death and is queued again. Their ids, for the caller to queue."""
    stale = BulkChunk.objects.filter(
        status=BulkChunk.Status.RUNNING,
        heartbeat_at__lt=stale_before(),
        job__status=BulkJob.Status.RUNNING,
    )
    if job_id is not None:
        stale = stale.filter(job_id=job_id)
    requeued = []
    for chunk_id in stale.values_list("id", flat=True):
        # Asked again row by row: its worker may have come back since the list was read.
        if BulkChunk.objects.filter(
            id=chunk_id, status=BulkChunk.Status.RUNNING, heartbeat_at__lt=stale_before()
        ).update(status=BulkChunk.Status.QUEUED, deaths=F("deaths") + 1, heartbeat_at=None):
            requeued.append(chunk_id)
    return requeued


def bulk_jobs_resume_stale() -> int:
    """Queue again every chunk whose worker died, and every running job whose heartbeat stopped
    (no chunk moves: its split, its last step or all its workers died); each goes on from
    where it was. A broker redelivers such a task only after hours, if at all. How many chunks
    and jobs were queued again."""
    chunk_ids = bulk_chunks_requeue_stale()
    if chunk_ids:
        # Their jobs are moving again: the chunks' tasks are theirs, not the whole job's.
        jobs = BulkChunk.objects.filter(id__in=chunk_ids).values("job_id")
        BulkJob.objects.filter(id__in=jobs).update(heartbeat_at=timezone.now())
        bulk_chunks_enqueue(chunk_ids=chunk_ids)
    resumed = len(chunk_ids)
    for job_id in BulkJob.objects.filter(worker_lost()).values_list("id", flat=True):
        # Asked again row by row: its worker may have come back since the list was read.
        if BulkJob.objects.filter(worker_lost(), id=job_id).update(
            status=BulkJob.Status.QUEUED, eta_seconds=None
        ):
            bulk_job_enqueue(job_id=job_id)
            resumed += 1
    return resumed


def bulk_job_requeue(*, job_id: int) -> None:
    """Hand a running job back to the queue (its task ran out of time): it continues from its
    checkpoint on the next delivery."""
    if BulkJob.objects.filter(id=job_id, status=BulkJob.Status.RUNNING).update(
        status=BulkJob.Status.QUEUED
    ):
        bulk_job_enqueue(job_id=job_id)


def bulk_job_fail_unexpected(*, job_id: int, error: str) -> None:
    """An error the job cannot recover from by itself (a bug, a full disk): FAILED, with the
    chunks done kept for a retry."""
    BulkJob.objects.filter(id=job_id, status=BulkJob.Status.RUNNING).update(
        status=BulkJob.Status.FAILED, error=error[:2000], finished_at=timezone.now()
    )


def chunk_lines(chunk: BulkChunk) -> str:
    """The lines of the file a chunk holds, as the rest of a sentence ("lines 2 to 2,001")."""
    last = chunk.next_line - 1
    return f"line {chunk.line:,}" if last <= chunk.line else f"lines {chunk.line:,} to {last:,}"


def bulk_chunk_fail_unexpected(*, chunk_id: int, error: str) -> None:
    """The same, met in a chunk: the job FAILED naming the chunk's lines, the chunk queued for
    the retry (not counted as a death: its worker did not die)."""
    chunk = BulkChunk.objects.filter(id=chunk_id).first()
    if chunk is None:
        return
    BulkChunk.objects.filter(id=chunk_id, status=BulkChunk.Status.RUNNING).update(
        status=BulkChunk.Status.QUEUED, heartbeat_at=None
    )
    bulk_job_fail_unexpected(job_id=chunk.job_id, error=f"rows on {chunk_lines(chunk)}: {error}")
