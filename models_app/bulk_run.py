"""Carrying a bulk job out: claimed by one worker, its file normalized chunk by chunk from the
checkpoint with the version and index pinned when it first started, then succeeded, failed or
stopped.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import os
import time
from collections.abc import Callable

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotations.models import Input
from annotations.services.review.inputs import inputs_submit
from models_app.bulk import worker_lost
from models_app.bulk_files import (
    INPUT_FILE,
    RESULT_COLUMNS,
    RESULT_FILES,
    TEXT_COLUMN,
    BulkFileError,
    column_position,
    csv_cell,
    input_keys,
    read_header,
    read_records,
    remove_partial,
    result_resumed,
    result_row,
    row_problem,
)
from models_app.models import BulkJob, Deployment
from models_app.serving.engines import HitsCache, NoLiveModel, artifact_path, engine_for_build
from models_app.serving.normalize import Normalization, rank_taxonomy_groups
from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.text import TextError, clean_text

logger = logging.getLogger(__name__)


# Texts whose nearest members a job keeps for the rest of the file (a file of job ads repeats
# its titles): some 70 MB at most, which bounds the job's memory whatever the file's size.
HITS_CACHED = 100_000

ChunkHook = Callable[[BulkJob], None]


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
    claimed = (
        BulkJob.objects.filter(id=job_id)
        .filter(
            Q(status=BulkJob.Status.QUEUED)
            | worker_lost()
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
    attempt = job.attempts  # this worker's claim: its writes count only while the job's is this
    try:
        return _run(job, attempt, chunk_rows or settings.SIAMWEB_BULK_CHUNK_ROWS, after_chunk)
    except (BulkFileError, ArtifactError, NoLiveModel) as exc:
        return _fail(job, attempt, str(exc))


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


def _run(
    job: BulkJob, attempt: int, chunk_rows: int, after_chunk: ChunkHook | None
) -> BulkJob | None:
    job = _pin(job)
    engine = engine_for_build(job.taxonomy, job.index_build)
    # Loading a model no longer live can take a while: say this worker still holds the job.
    mine = _held(job, attempt).filter(cancel_requested=False)
    if not mine.update(heartbeat_at=timezone.now()):
        return _stopped(job, attempt)
    cache = HitsCache(HITS_CACHED)
    folder = artifact_path(job.folder)
    source = folder / INPUT_FILE
    columns, _, _ = read_header(source, fmt=job.input_format, filename=job.filename)
    column = column_position(columns, job.column or TEXT_COLUMN, filename=job.filename)
    keys = input_keys(columns)  # the header's names, each once: the JSON Lines file's keys
    parts = {kind: folder / f"{name}.part" for kind, name in RESULT_FILES.items()}
    if not parts["csv"].exists() and (folder / RESULT_FILES["csv"]).exists():
        # Every row was in: a worker died while renaming the files, or before it could say so.
        return _finish(job, attempt)
    started, offset_at_start = time.monotonic(), job.input_offset
    with (
        source.open("rb") as handle,
        result_resumed(parts["csv"], job.csv_bytes) as csv_out,
        result_resumed(parts["jsonl"], job.jsonl_bytes) as jsonl_out,
    ):
        csv_text = io.TextIOWrapper(csv_out, encoding="utf-8", newline="", write_through=True)
        writer = csv.writer(csv_text)
        if job.csv_bytes == 0:
            writer.writerow([csv_cell(name) for name in [*columns, *RESULT_COLUMNS]])
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
                job, engine, cache, chunk, keys, column, writer, jsonl_out
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
            # The queue takes a bounded number of rows from one job; the rest are counted.
            room = max(settings.SIAMWEB_BULK_REVIEW_MAX_ROWS - job.rows_queued, 0)
            review, overflow = review[:room], len(review) - min(len(review), room)
            if review:
                checkpoint["rows_queued"] = F("rows_queued") + len(review)
            if overflow:
                checkpoint["rows_not_queued"] = F("rows_not_queued") + overflow
            # One transaction: rows go for review once, and only while this worker holds the
            # job (not after it was cancelled or deleted: an upload may hold private data).
            with transaction.atomic():
                held = mine.update(**checkpoint)
                if held and review:
                    inputs_submit(taxonomy=job.taxonomy, texts=review, source=Input.Source.UPLOAD)
            if not held:
                return _stopped(job, attempt)
            job.refresh_from_db()
            if after_chunk is not None:
                after_chunk(job)
    return _finish(job, attempt)


def _write_chunk(
    job, engine, cache, chunk, keys, column, writer, jsonl_out
) -> tuple[int, list[str]]:
    """Normalize one chunk of records and append their result rows (``keys``: the input's
    column names as ``input_keys`` gives them); the rows failed, and the texts to send for
    review (``_needs_review``)."""
    texts: list[str | None] = []
    errors: list[str] = []
    for record in chunk:
        problem = row_problem(record, len(keys))
        if problem:
            texts.append(None)
            errors.append(f"line {record.line}: {problem}")
            continue
        try:
            if column >= len(record.fields):
                raise TextError(f"is missing: the row has {len(record.fields)} field(s)")
            texts.append(
                clean_text(record.fields[column], max_length=settings.SIAMWEB_MAX_TEXT_LENGTH)
            )
            errors.append("")
        except TextError as exc:
            texts.append(None)
            errors.append(f"line {record.line}: {keys[column]} {exc}")
    good = [text for text in texts if text is not None]
    answers = iter(
        rank_taxonomy_groups(job.taxonomy, good, k=2, engine=engine, hits_cache=cache)
        if good
        else []
    )
    lines, review = [], []
    for record, text, error in zip(chunk, texts, errors, strict=True):
        # As many cells as the header names: extra ones are quoted in the row's error.
        fields = record.fields[: len(keys)] + [""] * (len(keys) - len(record.fields))
        answer = next(answers) if text is not None else None
        result = result_row(answer, error)
        if _needs_review(job, answer):
            review.append(text)
        writer.writerow([csv_cell(value) for value in [*fields, *result.values()]])
        named = dict(zip(keys, fields, strict=True))
        lines.append(json.dumps({"input": named, **result}, ensure_ascii=False) + "\n")
    jsonl_out.write("".join(lines).encode("utf-8"))
    return sum(1 for error in errors if error), review


def _needs_review(job: BulkJob, answer: Normalization | None) -> bool:
    """Whether the model's answer to a row also goes to the review queue: with a threshold set,
    when it has no group to offer, or its top score or its margin over the runner-up is below
    the job's threshold for it. A curator's own answer never does."""
    if answer is None or answer.source != "model":
        return False
    if job.review_below is None and job.review_margin_below is None:
        return False
    if not answer.groups:
        return True
    top = answer.groups[0].score
    if job.review_below is not None and top < job.review_below:
        return True
    return (
        job.review_margin_below is not None
        and len(answer.groups) > 1
        and top - answer.groups[1].score < job.review_margin_below
    )


def _held(job: BulkJob, attempt: int):
    """The job while this worker's claim (``attempt``) holds it: running, not taken over."""
    return BulkJob.objects.filter(id=job.id, status=BulkJob.Status.RUNNING, attempts=attempt)


def _stopped(job: BulkJob, attempt: int) -> BulkJob | None:
    """The checkpoint was refused: the job was cancelled, or another worker took it over."""
    cancelled = (
        _held(job, attempt)
        .filter(cancel_requested=True)
        .update(status=BulkJob.Status.CANCELLED, finished_at=timezone.now(), eta_seconds=None)
    )
    current = BulkJob.objects.filter(id=job.id).first()
    if current is None:
        return None  # cancelled as stale, then deleted (files and all) while it was still at it
    if cancelled or current.status == BulkJob.Status.CANCELLED:
        # Also when the job was cancelled as stale while this worker was still at it: what it
        # wrote or renamed since must not stay behind.
        remove_partial(current)
        return current
    return None


def _finish(job: BulkJob, attempt: int) -> BulkJob | None:
    """Every row is in: both result files under their final names, then the job succeeded;
    unless it was cancelled meanwhile, when the files go as a cancelled job's do."""
    mine = _held(job, attempt).filter(cancel_requested=False)
    if not mine.exists():
        return _stopped(job, attempt)  # the files are another worker's, or go with the job
    folder = artifact_path(job.folder)
    for name in RESULT_FILES.values():
        # Gone: renamed already (a resumed job), or removed by a cancel.
        with contextlib.suppress(FileNotFoundError):
            (folder / f"{name}.part").replace(folder / name)
    missing = [name for name in RESULT_FILES.values() if not (folder / name).exists()]
    if missing:
        error = f"the result file(s) {', '.join(missing)} of bulk job {job.id} are gone"
        return _fail(job, attempt, error)
    succeeded = mine.update(
        status=BulkJob.Status.SUCCEEDED,
        progress=1.0,
        eta_seconds=0,
        finished_at=timezone.now(),
        heartbeat_at=timezone.now(),
    )
    if not succeeded:
        return _stopped(job, attempt)
    job.refresh_from_db()
    return job


def _fail(job: BulkJob, attempt: int, error: str) -> BulkJob | None:
    logger.warning("bulk job %s failed: %s", job.id, error)
    failed = {"error": error, "finished_at": timezone.now(), "eta_seconds": None}
    if not _held(job, attempt).update(status=BulkJob.Status.FAILED, **failed):
        return _stopped(job, attempt)  # not this worker's to fail: cancelled, or taken over
    job.refresh_from_db()
    return job
