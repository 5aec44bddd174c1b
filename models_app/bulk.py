"""Bulk normalization: a file of texts normalized by a worker, chunk by chunk, into result files.

A job's file (a CSV with a header row, the column to normalize named; or text, one per line)
streams to ``bulk/<job folder>/`` under the artifacts folder. The worker reads it a chunk of rows
at a time and appends to ``result.csv.part`` and ``result.jsonl.part``: every input column kept,
then the top group, its score and the member behind it, where the answer came from, the model
version, the runner-up and the margin. A row whose text cannot be used (empty, too long, control
characters) is kept with the reason in ``error``. When the last row is in, both files are synced
and renamed to their final names, then the job is marked succeeded: a result is offered only
whole.

After each chunk the job records the input offset it read to and the two files' lengths (the
checkpoint). A worker that dies leaves the job running with a heartbeat that stops; the next
delivery of its task (or a retry) cuts the files back to the checkpoint and reads on from there,
with the model version and index build pinned when the job started, whatever is live by then.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotations.models import Input, Taxonomy
from annotations.normalization import Normalization, normalize_texts
from annotations.services.inputs_upload import format_size
from annotations.services.review import inputs_submit
from models_app.live import HitsCache, NoLiveModel, artifact_path, engine_for_build
from models_app.models import BulkJob, Deployment
from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.text import TextError, clean_text

logger = logging.getLogger(__name__)
EXECUTE_BULK_JOB = "worker.tasks.execute_bulk_job"

BULK_FORMATS = {".csv": BulkJob.Format.CSV, ".txt": BulkJob.Format.TEXT}
TEXT_COLUMN = "text"  # the column of a text file, and a CSV's column when none is named
RESULT_COLUMNS = [
    "group_code",
    "group_name",
    "score",
    "matched_member",
    "source",
    "model_version",
    "runner_up_code",
    "runner_up_name",
    "runner_up_score",
    "margin",
    "error",
]
INPUT_FILE = "input"
RESULT_FILES = {"csv": "result.csv", "jsonl": "result.jsonl"}
# Texts whose nearest members a job keeps for the rest of the file (a file of job ads repeats
# its titles): some 70 MB at most, which bounds the job's memory whatever the file's size.
HITS_CACHED = 100_000
# The upload is checked this far before the job is accepted (encoding, header, a first row);
# a bad byte further on fails the job when the worker reaches it, naming where it is.
_HEAD_BYTES = 1024 * 1024
_UTF8_BOM = codecs.BOM_UTF8
# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")

ChunkHook = Callable[[BulkJob], None]


class BulkFileError(ValueError):
    """The file cannot be normalized as a whole; the message says why and where."""


class BulkStateError(ValueError):
    """The job is not in a state that allows what was asked (cancel a finished job...)."""


# --- reading the input ----------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    end: int  # the byte offset just past this record: where a resumed job reads on from
    line: int  # the physical line the record starts on, 1-based
    next_line: int  # the line the next record starts on
    fields: list[str]


def _decode(raw: bytes, *, offset: int, line: int, filename: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BulkFileError(
            f"{filename} is not UTF-8: line {line} (byte {offset + exc.start:,}) holds "
            f"{raw[exc.start : exc.start + 4]!r}; save the file as UTF-8"
        ) from None


def read_records(
    handle: IO[bytes], *, fmt: str, filename: str, offset: int, line: int = 1
) -> Iterator[Record]:
    """The records of ``handle`` from byte ``offset`` on (a record's start), one at a time.

    Bytes are read a line at a time, so a file of any size is read in bounded memory and each
    record knows the offset it ends at. A CSV record ends at a newline outside quotes: RFC 4180
    doubles a quote inside a quoted field, so the count of quotes is even there.
    """
    handle.seek(offset)
    if offset == 0 and handle.read(3) != _UTF8_BOM:
        handle.seek(0)
    position = handle.tell()
    while True:
        start_line, pieces, quotes = line, [], 0
        while True:
            raw = handle.readline()
            if not raw:
                break
            line += 1
            pieces.append(raw)
            quotes += raw.count(b'"')
            if fmt != BulkJob.Format.CSV or quotes % 2 == 0:
                break
        if not pieces:
            return
        if quotes % 2:
            raise BulkFileError(
                f"{filename} is not valid CSV: a quote opened on line {start_line} is never "
                "closed (unexpected end of data)"
            )
        raw = b"".join(pieces)
        text = _decode(raw, offset=position, line=start_line, filename=filename)
        position += len(raw)
        if fmt == BulkJob.Format.CSV:
            try:
                rows = list(csv.reader(io.StringIO(text), strict=True))
            except csv.Error as exc:
                raise BulkFileError(
                    f"{filename} is not valid CSV near line {start_line}: {exc}"
                ) from None
            fields = rows[0] if rows else []
        else:
            fields = [text.rstrip("\r\n")]
        yield Record(end=position, line=start_line, next_line=line, fields=fields)


def read_header(path: Path, *, fmt: str, filename: str) -> tuple[list[str], int, int]:
    """The input's columns, and the byte offset and line its first data row starts at."""
    if fmt != BulkJob.Format.CSV:
        with path.open("rb") as handle:
            bom = 3 if handle.read(3) == _UTF8_BOM else 0
        return [TEXT_COLUMN], bom, 1
    with path.open("rb") as handle:
        first = next(read_records(handle, fmt=fmt, filename=filename, offset=0), None)
    if first is None or not any(name.strip() for name in first.fields):
        raise BulkFileError(f"{filename} has no header row naming its columns")
    return [name.strip() for name in first.fields], first.end, first.next_line


def _check_head(path: Path, *, fmt: str, filename: str, column: str) -> None:
    """Refuse at once what is wrong at the start of the file: encoding, header, no rows."""
    with path.open("rb") as handle:
        head = handle.read(_HEAD_BYTES)
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise BulkFileError(f"{filename} is UTF-16 text; save it as UTF-8")
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=len(head) < _HEAD_BYTES)
    except UnicodeDecodeError as exc:
        line = head[: exc.start].count(b"\n") + 1
        raise BulkFileError(
            f"{filename} is not UTF-8: line {line} (byte {exc.start:,}) holds "
            f"{head[exc.start : exc.start + 4]!r}; save the file as UTF-8"
        ) from None
    columns, offset, line = read_header(path, fmt=fmt, filename=filename)
    if column not in columns:
        raise BulkFileError(
            f"{filename} has no column {column!r}; its columns are "
            + ", ".join(repr(name) for name in columns)
        )
    with path.open("rb") as handle:
        rows = read_records(handle, fmt=fmt, filename=filename, offset=offset, line=line)
        if next(rows, None) is None:
            raise BulkFileError(f"{filename} holds no rows")


# --- creating, cancelling, retrying ---------------------------------------------------------


def bulk_max_bytes() -> int:
    return settings.SIAMWEB_BULK_MAX_BYTES


def stale_seconds() -> int:
    """A running job's heartbeat older than this has lost its worker."""
    return settings.SIAMWEB_BULK_STALE_SECONDS


def bulk_job_create(
    *,
    taxonomy: Taxonomy,
    upload: IO[bytes],
    filename: str,
    column: str = "",
    review_below: float | None = None,
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
    if review_below is not None and not 0.0 <= review_below <= 1.0:
        raise ValueError("review_below must be between 0 and 1")
    suffix = Path(filename).suffix.lower()
    fmt = BULK_FORMATS.get(suffix)
    if fmt is None:
        raise BulkFileError(
            f"{filename or 'the file'} is neither a .csv nor a .txt file; upload a CSV with a "
            "header row or a text file with one text per line"
        )
    column = column.strip() or TEXT_COLUMN
    folder = Path("bulk") / uuid.uuid4().hex
    target = artifact_path(str(folder))
    target.mkdir(parents=True)
    try:
        size = _store(upload, target / INPUT_FILE, filename=filename)
        _check_head(target / INPUT_FILE, fmt=fmt, filename=filename, column=column)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    _, offset, line = read_header(target / INPUT_FILE, fmt=fmt, filename=filename)
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
    )
    if enqueue:
        bulk_job_enqueue(job_id=job.id)
    return job


def request_too_big(content_length: str | None) -> str | None:
    """Why a request this long is refused before its body is read, or None.

    Django writes an uploaded file to a temporary file before a view sees it: a 2 GB body would
    fill the disk first. The form's fields and multipart framing add a few KB to the file."""
    try:
        length = int(content_length or 0)
    except ValueError:
        return None
    limit = bulk_max_bytes()
    if length <= limit + 64 * 1024:
        return None
    return (
        f"the upload is {format_size(length)}; a bulk job takes files up to {format_size(limit)} "
        "(SIAMWEB_BULK_MAX_BYTES), split it into smaller files"
    )


def _store(upload: IO[bytes], path: Path, *, filename: str) -> int:
    limit, size = bulk_max_bytes(), 0
    with path.open("wb") as out:
        while piece := upload.read(1024 * 1024):
            size += len(piece)
            if size > limit:
                raise BulkFileError(
                    f"{filename} is over {format_size(limit)}, the largest file a bulk job "
                    "takes (SIAMWEB_BULK_MAX_BYTES); split it into smaller files"
                )
            out.write(piece)
        out.flush()
        os.fsync(out.fileno())
    if size == 0:
        raise BulkFileError(f"{filename} is empty")
    return size


def bulk_job_enqueue(*, job_id: int) -> None:
    # After the commit: a worker that picked the id up before would not find the row.
    transaction.on_commit(lambda: current_app.send_task(EXECUTE_BULK_JOB, args=[job_id]))


def bulk_job_cancel(*, job: BulkJob) -> BulkJob:
    """Stop a job: a queued one (or one whose worker died) at once, a running one after the
    chunk it is on; its partial results are deleted."""
    stale = timezone.now() - timezone.timedelta(seconds=stale_seconds())
    now_cancelled = BulkJob.objects.filter(id=job.id).filter(
        Q(status=BulkJob.Status.QUEUED) | Q(status=BulkJob.Status.RUNNING, heartbeat_at__lt=stale)
    )
    if now_cancelled.update(
        status=BulkJob.Status.CANCELLED, cancel_requested=True, finished_at=timezone.now()
    ):
        _remove_partial(job)
    elif not BulkJob.objects.filter(id=job.id, status=BulkJob.Status.RUNNING).update(
        cancel_requested=True
    ):
        job.refresh_from_db()
        raise BulkStateError(f"bulk job {job.id} is {job.get_status_display().lower()}")
    job.refresh_from_db()
    return job


def bulk_job_retry(*, job: BulkJob) -> BulkJob:
    """Queue a failed job (or one whose worker died) again: it continues from its checkpoint."""
    stale = timezone.now() - timezone.timedelta(seconds=stale_seconds())
    retried = (
        BulkJob.objects.filter(id=job.id)
        .filter(
            Q(status=BulkJob.Status.FAILED)
            | Q(status=BulkJob.Status.RUNNING, heartbeat_at__lt=stale)
        )
        .update(status=BulkJob.Status.QUEUED, error="", finished_at=None, eta_seconds=None)
    )
    job.refresh_from_db()
    if not retried:
        raise BulkStateError(
            f"bulk job {job.id} is {job.get_status_display().lower()}; only a failed job or one "
            "whose worker stopped can be retried"
        )
    bulk_job_enqueue(job_id=job.id)
    return job


# --- carrying a job out ---------------------------------------------------------------------


class JobBusy(Exception):
    """The job is running with a fresh heartbeat: another worker has it, or had it until it
    died a moment ago. The task asks again once a heartbeat would be stale."""


def bulk_job_execute(
    *, job_id: int, chunk_rows: int | None = None, after_chunk: ChunkHook | None = None
) -> BulkJob | None:
    """Normalize a job's file from its checkpoint to the end; the job, or None when there was
    nothing to do (finished, cancelled, or no such job). Raises ``JobBusy`` when another
    worker holds it. ``after_chunk`` is called with the job after each checkpoint."""
    now = timezone.now()
    stale = now - timezone.timedelta(seconds=stale_seconds())
    claimed = (
        BulkJob.objects.filter(id=job_id)
        .filter(
            Q(status=BulkJob.Status.QUEUED)
            | Q(status=BulkJob.Status.RUNNING, heartbeat_at__lt=stale)
            | Q(status=BulkJob.Status.RUNNING, heartbeat_at__isnull=True)
        )
        .update(
            status=BulkJob.Status.RUNNING,
            attempts=F("attempts") + 1,
            heartbeat_at=now,
            started_at=Coalesce("started_at", now),
        )
    )
    if not claimed:
        if BulkJob.objects.filter(id=job_id, status=BulkJob.Status.RUNNING).exists():
            raise JobBusy(job_id)
        return None
    job = BulkJob.objects.select_related("taxonomy", "index_build__model_version").get(id=job_id)
    try:
        return _run(job, chunk_rows or settings.SIAMWEB_BULK_CHUNK_ROWS, after_chunk)
    except (BulkFileError, ArtifactError, NoLiveModel) as exc:
        return _fail(job, str(exc))


def _pin(job: BulkJob) -> BulkJob:
    """The version and index the job answers with: the live ones when it first starts."""
    if job.index_build_id is None:
        deployment = (
            Deployment.objects.filter(taxonomy=job.taxonomy).select_related("index_build").first()
        )
        if deployment is None:
            raise NoLiveModel(job.taxonomy)
        build = deployment.index_build
        BulkJob.objects.filter(id=job.id, index_build__isnull=True).update(
            index_build=build, model_version_id=build.model_version_id
        )
        job.refresh_from_db()
    if job.index_build is None:
        raise ArtifactError(
            f"the index build bulk job {job.id} started with was deleted; it cannot go on with "
            "the same model"
        )
    return job


def _run(job: BulkJob, chunk_rows: int, after_chunk: ChunkHook | None) -> BulkJob | None:
    job = _pin(job)
    engine = engine_for_build(job.taxonomy, job.index_build)
    cache = HitsCache(HITS_CACHED)
    folder = artifact_path(job.folder)
    source = folder / INPUT_FILE
    columns, _, _ = read_header(source, fmt=job.input_format, filename=job.filename)
    column = columns.index(job.column or TEXT_COLUMN)
    parts = {kind: folder / f"{name}.part" for kind, name in RESULT_FILES.items()}
    if not parts["csv"].exists() and (folder / RESULT_FILES["csv"]).exists():
        return _succeed(job)  # renamed by a worker that died before it could say so
    attempt, started, offset_at_start = job.attempts, time.monotonic(), job.input_offset
    with (
        source.open("rb") as handle,
        _resumed(parts["csv"], job.csv_bytes) as csv_out,
        _resumed(parts["jsonl"], job.jsonl_bytes) as jsonl_out,
    ):
        csv_text = io.TextIOWrapper(csv_out, encoding="utf-8", newline="", write_through=True)
        writer = csv.writer(csv_text)
        if job.csv_bytes == 0:
            writer.writerow([_cell(name) for name in [*columns, *RESULT_COLUMNS]])
        records = read_records(
            handle,
            fmt=job.input_format,
            filename=job.filename,
            offset=job.input_offset,
            line=job.input_line,
        )
        while True:
            chunk = [record for _, record in zip(range(chunk_rows), records, strict=False)]
            if not chunk:
                break
            failed, review = _write_chunk(
                job, engine, cache, chunk, columns, column, writer, jsonl_out
            )
            for out in (csv_out, jsonl_out):
                out.flush()
                os.fsync(out.fileno())
            offset = chunk[-1].end
            elapsed = time.monotonic() - started
            rate = (offset - offset_at_start) / elapsed if elapsed > 0 else 0.0
            checkpoint = {
                "input_offset": offset,
                "input_line": chunk[-1].next_line,
                "rows_done": F("rows_done") + len(chunk),
                "rows_failed": F("rows_failed") + failed,
                "csv_bytes": csv_out.tell(),
                "jsonl_bytes": jsonl_out.tell(),
                "progress": offset / job.input_bytes,
                "eta_seconds": (job.input_bytes - offset) / rate if rate > 0 else None,
                "heartbeat_at": timezone.now(),
            }
            if review:
                # Before the checkpoint: a worker dying in between sends these again on resume
                # (one more occurrence each), rather than never.
                inputs_submit(taxonomy=job.taxonomy, texts=review, source=Input.Source.UPLOAD)
                checkpoint["rows_queued"] = F("rows_queued") + len(review)
            mine = BulkJob.objects.filter(
                id=job.id, status=BulkJob.Status.RUNNING, attempts=attempt
            )
            if not mine.filter(cancel_requested=False).update(**checkpoint):
                return _stopped(job, attempt)
            job.refresh_from_db()
            if after_chunk is not None:
                after_chunk(job)
    for kind, part in parts.items():
        part.rename(folder / RESULT_FILES[kind])
    return _succeed(job)


class _resumed:
    """A result file opened for appending after cutting it back to the checkpoint's length:
    rows a dead worker wrote after its last checkpoint are written again, not twice."""

    def __init__(self, path: Path, length: int) -> None:
        self.path, self.length = path, length

    def __enter__(self) -> IO[bytes]:
        self.handle = self.path.open("r+b" if self.path.exists() else "w+b")
        self.handle.truncate(self.length)
        self.handle.seek(self.length)
        return self.handle

    def __exit__(self, *exc_info) -> None:
        self.handle.close()


def _write_chunk(
    job, engine, cache, chunk, columns, column, writer, jsonl_out
) -> tuple[int, list[str]]:
    """Normalize one chunk of records and append their result rows; the rows failed, and the
    texts the model answered below the job's ``review_below``."""
    texts: list[str | None] = []
    errors: list[str] = []
    for record in chunk:
        try:
            if column >= len(record.fields):
                raise TextError(f"is missing: the row has {len(record.fields)} field(s)")
            texts.append(
                clean_text(record.fields[column], max_length=settings.SIAMWEB_MAX_TEXT_LENGTH)
            )
            errors.append("")
        except TextError as exc:
            texts.append(None)
            errors.append(f"line {record.line}: {columns[column]} {exc}")
    good = [text for text in texts if text is not None]
    answers = iter(
        normalize_texts(job.taxonomy, good, k=2, engine=engine, hits_cache=cache) if good else []
    )
    lines, review = [], []
    for record, text, error in zip(chunk, texts, errors, strict=True):
        fields = record.fields + [""] * (len(columns) - len(record.fields))
        answer = next(answers) if text is not None else None
        result = _result_row(answer, error)
        if (
            job.review_below is not None
            and answer is not None
            and answer.source == "model"
            and (not answer.groups or answer.groups[0].score < job.review_below)
        ):
            review.append(text)
        writer.writerow([_cell(value) for value in [*fields, *result.values()]])
        named = dict(zip(columns, fields, strict=False))
        lines.append(json.dumps({"input": named, **result}, ensure_ascii=False) + "\n")
    jsonl_out.write("".join(lines).encode("utf-8"))
    return sum(1 for error in errors if error), review


def _result_row(answer: Normalization | None, error: str) -> dict:
    top = answer.groups[0] if answer is not None and answer.groups else None
    runner_up = answer.groups[1] if answer is not None and len(answer.groups) > 1 else None
    if answer is not None and top is None:
        error = "no group to offer (every group was rejected for this text)"
    return {
        "group_code": top.code if top else "",
        "group_name": top.name if top else "",
        "score": top.score if top else None,
        "matched_member": top.member if top else "",
        "source": top.source if top else "",
        "model_version": answer.model_version if answer is not None else "",
        "runner_up_code": runner_up.code if runner_up else "",
        "runner_up_name": runner_up.name if runner_up else "",
        "runner_up_score": runner_up.score if runner_up else None,
        "margin": round(top.score - runner_up.score, 4) if top and runner_up else None,
        "error": error,
    }


def _cell(value) -> str:
    """A CSV cell a spreadsheet shows as text: one starting like a formula gets a quote mark
    in front (OWASP's advice for CSV injection); numbers are left as they are."""
    if value is None:
        return ""
    text = str(value)
    if text.startswith(_FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def _stopped(job: BulkJob, attempt: int) -> BulkJob | None:
    """The checkpoint was refused: the job was cancelled, or another worker took it over."""
    cancelled = BulkJob.objects.filter(
        id=job.id, status=BulkJob.Status.RUNNING, attempts=attempt, cancel_requested=True
    ).update(status=BulkJob.Status.CANCELLED, finished_at=timezone.now(), eta_seconds=None)
    job.refresh_from_db()
    if cancelled:
        _remove_partial(job)
        return job
    return None


def _succeed(job: BulkJob) -> BulkJob:
    BulkJob.objects.filter(id=job.id, status=BulkJob.Status.RUNNING).update(
        status=BulkJob.Status.SUCCEEDED,
        progress=1.0,
        eta_seconds=0,
        finished_at=timezone.now(),
        heartbeat_at=timezone.now(),
    )
    job.refresh_from_db()
    return job


def _fail(job: BulkJob, error: str) -> BulkJob:
    logger.warning("bulk job %s failed: %s", job.id, error)
    BulkJob.objects.filter(id=job.id, status=BulkJob.Status.RUNNING).update(
        status=BulkJob.Status.FAILED, error=error, finished_at=timezone.now(), eta_seconds=None
    )
    job.refresh_from_db()
    return job


def bulk_jobs_resume_stale() -> int:
    """Queue again every running job whose heartbeat stopped (its worker died): each goes on
    from its checkpoint. A broker redelivers such a task only after hours, if at all."""
    stale = timezone.now() - timezone.timedelta(seconds=stale_seconds())
    resumed = 0
    for job_id in BulkJob.objects.filter(
        status=BulkJob.Status.RUNNING, heartbeat_at__lt=stale
    ).values_list("id", flat=True):
        if BulkJob.objects.filter(
            id=job_id, status=BulkJob.Status.RUNNING, heartbeat_at__lt=stale
        ).update(status=BulkJob.Status.QUEUED, eta_seconds=None):
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
    """An error the job cannot recover from by itself (a bug, a full disk): FAILED, with its
    checkpoint kept for a retry."""
    BulkJob.objects.filter(id=job_id, status=BulkJob.Status.RUNNING).update(
        status=BulkJob.Status.FAILED, error=error[:2000], finished_at=timezone.now()
    )


def _remove_partial(job: BulkJob) -> None:
    folder = artifact_path(job.folder)
    for name in RESULT_FILES.values():
        for path in (folder / name, folder / f"{name}.part"):
            path.unlink(missing_ok=True)


# --- reading -------------------------------------------------------------------------------

CONTENT_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}


def bulk_jobs() -> QuerySet[BulkJob]:
    """Jobs newest first, with what their pages and the API show of them."""
    return BulkJob.objects.select_related("taxonomy", "requested_by", "model_version__taxonomy")


def may_change(user, job: BulkJob) -> bool:
    """Cancelling and retrying are for whoever asked for the job, or an admin."""
    return user.is_staff or job.requested_by_id == user.id


def bulk_job_result(job: BulkJob, kind: str) -> Path | None:
    """The finished result file of this kind ("csv" or "jsonl"), or None while there is none."""
    if job.status != BulkJob.Status.SUCCEEDED or kind not in RESULT_FILES:
        return None
    path = artifact_path(job.folder) / RESULT_FILES[kind]
    return path if path.exists() else None
