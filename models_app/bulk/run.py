"""Carrying a bulk job out, its file cut into chunks that any number of workers normalize at once.

Three steps, each a task of its own, each safe to run twice:

- ``bulk_job_start`` (the job's task) claims the job, pins the model version and index build
  live then, and splits the file into chunks of whole records, reading it a line at a time: a
  quoted field with a newline stays in its chunk, and no more than one record is held. The
  chunks are created and queued a batch at a time while the split reads on, so workers start
  on the first before the last is found. Taken up again (a retry, a worker that died), it
  queues what is left and splits on from the last chunk.
- ``bulk_chunk_execute`` (a chunk's task) claims one chunk, normalizes its rows with the pinned
  engine into the chunk's own two files, and counts it in one transaction with the job's row
  locked: rows, progress, the time left, and the rows sent for review (at most
  ``SIAMWEB_BULK_REVIEW_MAX_ROWS`` from the whole job, the rest counted). The worker that
  counts the last chunk queues the job's last step.
- ``bulk_job_finish`` joins the chunks' files in input order into the result files, renamed
  into place whole, and marks the job succeeded.

A worker that dies costs the chunk it was on: the chunk's heartbeat stops and it is queued
again (``models_app.bulk.jobs.bulk_jobs_resume_stale``); taken back from a silent worker
``CHUNK_DEATHS`` times, its rows are written with the reason in ``error`` and the job finishes
with them. A cancel stops every chunk at its end: none that ends after it counts.

``bulk_job_execute`` carries a whole job out in this process, one chunk after another, through
the same three steps: what one worker would do, for tests and benchmarks.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import os
import shutil
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotations.models import AutoCodingPolicy, Input
from annotations.services.review.auto_coding import Vouched, drawn_for_audit
from annotations.services.review.inputs import inputs_submit, pending_review_room
from annotations.text_rule import TextError, clean_text
from models_app.bulk.files import (
    CHUNKS_DIR,
    INPUT_FILE,
    RESULT_COLUMNS,
    RESULT_FILES,
    TEXT_COLUMN,
    BulkFileError,
    Record,
    answer_chance,
    answer_margin,
    chunk_files,
    column_position,
    csv_cell,
    input_keys,
    read_header,
    read_records,
    record_spans,
    remove_partial,
    result_row,
    row_problem,
)
from models_app.bulk.jobs import (
    bulk_chunks_enqueue,
    bulk_chunks_requeue_stale,
    chunk_lines,
    stale_before,
    worker_lost,
)
from models_app.models import BulkChunk, BulkJob, Deployment
from models_app.serving.engines import (
    SERVING_UNAVAILABLE,
    HitsCache,
    NoLiveModel,
    artifact_path,
    engine_for_build,
)
from models_app.serving.normalize import Normalization, rank_taxonomy_groups
from models_app.serving.rankers import serving_ranker
from models_app.serving.vouching import vouching_threshold_now
from models_app.siamese.artifacts import ArtifactError
from siamweb.task_names import FINISH_BULK_JOB

logger = logging.getLogger(__name__)


# Texts whose nearest members a worker keeps for the rest of a job's chunks (a file of job ads
# repeats its titles): some 70 MB at most, which bounds its memory whatever the file's size.
HITS_CACHED = 100_000
# A chunk taken back this many times from a worker that went silent is not tried again: the
# next claim writes its rows with the reason (a row that kills its worker would kill them all).
CHUNK_DEATHS = 2
# Chunks created and queued in one transaction while the split reads on.
SPLIT_BATCH = 100

ChunkHook = Callable[[BulkJob], None]


class JobBusy(Exception):
    """The job is running with a fresh heartbeat: another worker has it, or had it until it
    died a moment ago. The task asks again once a heartbeat would be stale."""


class _NotReady(Exception):
    """The job stopped being ready to finish while its chunks were being joined."""


# --- the job: claimed, pinned, split ----------------------------------------------------------


def bulk_job_start(
    *, job_id: int, chunk_rows: int | None = None, enqueue: bool = True
) -> BulkJob | None:
    """Claim a queued job (or one whose heartbeat stopped), pin its version, queue its chunks
    left to do and split the rest of its file into chunks; the job, or None when there was
    nothing to do (finished, cancelled, taken over, or no such job). Raises ``JobBusy`` when it
    is running with a fresh heartbeat. ``enqueue=False`` queues no task (the caller runs the
    chunks itself)."""
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
            eta_from=now,
            eta_bytes_from=F("bytes_done"),
            eta_seconds=None,
        )
    )
    if not claimed:
        if BulkJob.objects.filter(id=job_id, status=BulkJob.Status.RUNNING).exists():
            raise JobBusy(job_id)
        return None
    job = BulkJob.objects.select_related("taxonomy", "index_build").get(id=job_id)
    attempt = job.attempts  # this claim: the split writes only while the job's is this
    try:
        job = _pin(job)
        # Chunks whose worker died with the job's: each death counted, queued again.
        bulk_chunks_requeue_stale(job_id=job.id)
        if enqueue:
            queued = job.chunks.filter(status=BulkChunk.Status.QUEUED)
            bulk_chunks_enqueue(chunk_ids=list(queued.values_list("id", flat=True)))
        if job.chunks_total is None and not _split(job, attempt, chunk_rows, enqueue):
            return _stopped(job, attempt)
    except (BulkFileError, *SERVING_UNAVAILABLE) as exc:
        return _fail(job, attempt, str(exc))
    if not _held(job, attempt).filter(cancel_requested=False).exists():
        return _stopped(job, attempt)
    job.refresh_from_db()
    if enqueue and job.chunks_done == job.chunks_total:
        # Every chunk was done already (its last step died, or the job was retried after it).
        bulk_job_finish_enqueue(job_id=job.id)
    return job


def _pin(job: BulkJob) -> BulkJob:
    """The version and index the job answers with: the live ones when it first starts."""
    if job.index_build_id is None:
        deployment = (
            Deployment.objects.filter(taxonomy=job.taxonomy).select_related("index_build").first()
        )
        if deployment is None:
            raise NoLiveModel(job.taxonomy)
        build = deployment.index_build
        threshold, version, audit_share = _auto_coding_now(job)
        BulkJob.objects.filter(id=job.id, index_build__isnull=True).update(
            index_build=build, model_version_id=build.model_version_id,
            ranker_pinned=deployment.ranker_id or 0,
            auto_coding_threshold=threshold, auto_coding_version=version,
            auto_coding_audit_share=audit_share,
        )  # fmt: skip
        job.refresh_from_db()
    if job.index_build is None:
        raise ArtifactError(
            f"the index build bulk job {job.id} started with was deleted; it cannot go on with "
            "the same model"
        )
    return job


def _auto_coding_now(job: BulkJob) -> tuple[float | None, int | None, float | None]:
    """The taxonomy's auto-coding threshold, policy version and audit share as the job starts
    (all None: off, paused, or no threshold shown by the evidence)."""
    policy = AutoCodingPolicy.objects.filter(taxonomy_id=job.taxonomy_id).first()
    if policy is None or not policy.active:
        return None, None, None
    threshold = vouching_threshold_now(job.taxonomy, policy.target_precision)
    if threshold is None:
        return None, None, None
    return threshold, policy.version, policy.audit_share


def _auto_coding_paused(job: BulkJob) -> bool:
    """Whether the audit paused the policy the job started with, or a later version of it. An
    admin's change leaves the job coding as it began; the audit's pause stops it, and stays for
    it when an admin sets the policy again: its answers were shown wrong too often."""
    return AutoCodingPolicy.objects.filter(
        taxonomy_id=job.taxonomy_id, paused_version__gte=job.auto_coding_version
    ).exists()


def _split(job: BulkJob, attempt: int, chunk_rows: int | None, enqueue: bool) -> bool:
    """Cut the file from the last chunk (or its first row) to its end into chunks, created and
    queued a batch at a time; whether this claim still held the job at the end."""
    BulkJob.objects.filter(id=job.id, chunk_rows__isnull=True).update(
        chunk_rows=chunk_rows or settings.SIAMWEB_BULK_CHUNK_ROWS
    )
    job.refresh_from_db()
    last = job.chunks.order_by("-index").first()
    if last is None:
        offset, line, index = job.input_offset, job.input_line, 0
    else:
        offset, line, index = last.end_offset, last.next_line, last.index + 1
    folder = artifact_path(job.folder)
    (folder / CHUNKS_DIR).mkdir(exist_ok=True)
    batch: list[BulkChunk] = []
    with (folder / INPUT_FILE).open("rb") as handle:
        spans = record_spans(
            handle,
            fmt=job.input_format,
            filename=job.filename,
            offset=offset,
            line=line,
            rows=job.chunk_rows,
        )
        for span in spans:
            batch.append(
                BulkChunk(
                    job=job,
                    index=index,
                    offset=span.offset,
                    end_offset=span.end,
                    line=span.line,
                    next_line=span.next_line,
                    rows=span.rows,
                )
            )
            index += 1
            if len(batch) == SPLIT_BATCH:
                if not _add_chunks(job, attempt, batch, enqueue):
                    return False
                batch = []
    return _add_chunks(job, attempt, batch, enqueue, total=index)


def _add_chunks(
    job: BulkJob, attempt: int, chunks: list[BulkChunk], enqueue: bool, total: int | None = None
) -> bool:
    """Create and queue a batch of chunks (with the count of all of them after the last batch),
    while this claim holds the job and no cancel was asked."""
    with transaction.atomic():
        seen = {"heartbeat_at": timezone.now()}
        if total is not None:
            seen["chunks_total"] = total
        if not _held(job, attempt).filter(cancel_requested=False).update(**seen):
            return False
        created = BulkChunk.objects.bulk_create(chunks)
        if enqueue:
            bulk_chunks_enqueue(chunk_ids=[chunk.id for chunk in created])
    return True


# --- a chunk: claimed, normalized, counted ----------------------------------------------------


@dataclass
class _Written:
    """What a chunk wrote: its files, and what it counts towards the job."""

    files: dict[str, str]
    rows: int
    failed: int
    review: list[str] = field(default_factory=list)
    error: str = ""
    coded: int = 0  # rows whose answer reached the job's auto-coding threshold
    # Coded rows drawn for the audit, by text: queued blind, as the job's policy vouched them.
    audits: dict[str, Vouched] = field(default_factory=dict)


# One worker's cache of nearest members, for the job whose chunks it did last.
_cache: dict[int, HitsCache] = {}


def _hits_cache(job_id: int) -> HitsCache:
    if job_id not in _cache:
        _cache.clear()
        _cache[job_id] = HitsCache(HITS_CACHED)
    return _cache[job_id]


def bulk_chunk_execute(
    *, chunk_id: int, worker: str = "", enqueue: bool = True
) -> BulkChunk | None:
    """Claim a chunk, normalize its rows into its own files and count it towards its job; the
    chunk, or None when it was not this worker's to do (done, running elsewhere, its job not
    running, cancelled or gone). ``worker`` names who did it. The worker that counts the last
    chunk queues the job's last step (unless ``enqueue`` is false)."""
    now = timezone.now()
    claimed = (
        BulkChunk.objects.filter(
            Q(status=BulkChunk.Status.QUEUED)
            | Q(status=BulkChunk.Status.RUNNING, heartbeat_at__lt=stale_before()),
            id=chunk_id,
            job__status=BulkJob.Status.RUNNING,
            job__cancel_requested=False,
        )
        # Taking a chunk from a worker that went silent counts that worker's death.
        .update(
            status=BulkChunk.Status.RUNNING,
            attempts=F("attempts") + 1,
            deaths=F("deaths")
            + Case(When(status=BulkChunk.Status.RUNNING, then=Value(1)), default=Value(0)),
            heartbeat_at=now,
            worker=(worker or f"{socket.gethostname()}:{os.getpid()}")[:255],
        )
    )
    if not claimed:
        job_id = BulkChunk.objects.filter(id=chunk_id).values_list("job_id", flat=True).first()
        if job_id is not None:
            _cancel_if_asked(job_id)
        return None
    chunk = BulkChunk.objects.select_related("job__taxonomy", "job__index_build").get(id=chunk_id)
    job, attempt = chunk.job, chunk.attempts
    BulkJob.objects.filter(id=job.id, status=BulkJob.Status.RUNNING).update(heartbeat_at=now)
    try:
        if chunk.deaths >= CHUNK_DEATHS:
            written = _write_given_up(job, chunk, attempt)
        else:
            if job.index_build is None:
                raise ArtifactError(
                    f"the index build bulk job {job.id} started with was deleted; it cannot go "
                    "on with the same model"
                )
            engine = engine_for_build(job.taxonomy, job.index_build)
            # Loading a model no longer live can take a while: say this worker still has it.
            if not _chunk_held(chunk, attempt).update(heartbeat_at=timezone.now()):
                return None
            written = _write_normalized(job, chunk, attempt, engine)
    except FileNotFoundError:
        # The job's folder went: it was cancelled, or deleted, while this chunk was at work.
        if BulkJob.objects.filter(id=job.id, status=BulkJob.Status.RUNNING).exists():
            raise
        _release(chunk, attempt)
        return None
    except (BulkFileError, *SERVING_UNAVAILABLE) as exc:
        # The job fails (queued again for its retry), unless another worker took the chunk over.
        if _chunk_held(chunk, attempt).update(status=BulkChunk.Status.QUEUED, heartbeat_at=None):
            _fail(job, None, f"rows on {chunk_lines(chunk)}: {exc}")
        return None
    except Exception:
        # Not a death (that leaves no chance to say so): an error the task reports. The chunk
        # is queued again for a retry rather than left to look like a silent worker's.
        _release(chunk, attempt)
        raise
    try:
        return _count(job, chunk, attempt, written, enqueue)
    except Exception:
        # The count rolled back (a deadlock, the database away a moment): the same, no death.
        _release(chunk, attempt)
        raise


def _chunk_held(chunk: BulkChunk, attempt: int):
    """The chunk while this worker's claim (``attempt``) holds it."""
    return BulkChunk.objects.filter(id=chunk.id, status=BulkChunk.Status.RUNNING, attempts=attempt)


def _release(chunk: BulkChunk, attempt: int) -> None:
    try:
        _chunk_held(chunk, attempt).update(status=BulkChunk.Status.QUEUED, heartbeat_at=None)
    except Exception:  # the database itself is what failed: the heartbeat will go stale
        logger.exception("could not hand chunk %s back", chunk.id)


def _records(job: BulkJob, chunk: BulkChunk) -> tuple[list[str], int, list[Record]]:
    """The job's columns, the position of the one to normalize, and the chunk's records."""
    source = artifact_path(job.folder) / INPUT_FILE
    columns, _, _ = read_header(source, fmt=job.input_format, filename=job.filename)
    column = column_position(columns, job.column or TEXT_COLUMN, filename=job.filename)
    with source.open("rb") as handle:
        records = read_records(
            handle,
            fmt=job.input_format,
            filename=job.filename,
            offset=chunk.offset,
            line=chunk.line,
        )
        chunk_records = list(islice(records, chunk.rows))
    if len(chunk_records) != chunk.rows or chunk_records[-1].end != chunk.end_offset:
        raise BulkFileError(
            f"{job.filename} changed since it was split: {chunk_lines(chunk)} no longer hold "
            f"{chunk.rows:,} rows"
        )
    return columns, column, chunk_records


def _write_normalized(job: BulkJob, chunk: BulkChunk, attempt: int, engine) -> _Written:
    """Normalize the chunk's records and write their result rows (``_needs_review``: which
    also go to the review queue)."""
    columns, column, records = _records(job, chunk)
    keys = input_keys(columns)  # the header's names, each once: the JSON Lines file's keys
    texts: list[str | None] = []
    errors: list[str] = []
    for record in records:
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
    cache = _hits_cache(job.id)
    ranker = None  # a job pinned before rankers were: the live one
    if job.ranker_pinned is not None:
        ranker = serving_ranker(engine, job.ranker_pinned or None)
    answers = iter(
        rank_taxonomy_groups(
            job.taxonomy, good, k=2, engine=engine, ranker=ranker, hits_cache=cache
        )
        if good
        else []
    )
    results, review, audits = [], [], {}
    threshold = job.auto_coding_threshold
    if threshold is not None and _auto_coding_paused(job):
        threshold = None
    for text, error in zip(texts, errors, strict=True):
        answer = next(answers) if text is not None else None
        results.append(result_row(answer, error, auto_coding_threshold=threshold))
        # A row the product codes by itself never waits for review; a share of them is audited.
        if results[-1]["auto_coded"]:
            if drawn_for_audit(job.auto_coding_audit_share or 0.0):
                audits[text] = Vouched(
                    answer.groups[0].group_id, threshold, job.auto_coding_version, audit=True
                )
        elif _needs_review(job, answer):
            review.append(text)
    files = _write_files(job, chunk, attempt, keys, records, results)
    failed = sum(1 for result in results if result["error"])
    coded = sum(1 for result in results if result["auto_coded"])
    return _Written(
        files=files, rows=len(records), failed=failed, review=review, coded=coded, audits=audits
    )


def _write_given_up(job: BulkJob, chunk: BulkChunk, attempt: int) -> _Written:
    """The chunk's rows, not normalized, each with the reason: its workers died on it."""
    columns, _, records = _records(job, chunk)
    keys = input_keys(columns)
    lines = chunk_lines(chunk)
    why = (
        f"not normalized: the worker normalizing {lines} stopped {chunk.deaths} times without "
        "finishing, so they were not tried again"
    )
    results = [result_row(None, f"line {record.line}: {why}") for record in records]
    files = _write_files(job, chunk, attempt, keys, records, results)
    error = (
        f"its worker stopped {chunk.deaths} times (last: {chunk.worker}); {lines} not normalized"
    )
    return _Written(files=files, rows=len(records), failed=len(records), error=error)


def _write_files(job, chunk, attempt, keys, records, results) -> dict[str, str]:
    """The chunk's result rows, synced to its own files for this attempt."""
    csv_text = io.StringIO(newline="")
    writer = csv.writer(csv_text)
    lines = []
    for record, result in zip(records, results, strict=True):
        # As many cells as the header names: extra ones are quoted in the row's error.
        fields = record.fields[: len(keys)] + [""] * (len(keys) - len(record.fields))
        writer.writerow([csv_cell(value) for value in [*fields, *result.values()]])
        named = dict(zip(keys, fields, strict=True))
        lines.append(json.dumps({"input": named, **result}, ensure_ascii=False) + "\n")
    names = chunk_files(chunk.index, attempt)
    folder = artifact_path(job.folder) / CHUNKS_DIR
    for kind, data in (("csv", csv_text.getvalue()), ("jsonl", "".join(lines))):
        # Never creates the folder: one deleted with its job stays deleted.
        with (folder / names[kind]).open("wb") as out:
            out.write(data.encode("utf-8"))
            out.flush()
            os.fsync(out.fileno())
    return names


def _needs_review(job: BulkJob, answer: Normalization | None) -> bool:
    """Whether the model's answer to a row also goes to the review queue: with a threshold set,
    when it has no group to offer, or its chance of being right (``answer_chance``: the card's
    probability) or its lead over the runner-up (the result's ``margin``) is below the job's
    threshold for it. A curator's own answer never does."""
    if answer is None or answer.source != "model":
        return False
    if job.review_below is None and job.review_margin_below is None:
        return False
    if not answer.groups:
        return True
    if job.review_below is not None and answer_chance(answer) < job.review_below:
        return True
    if job.review_margin_below is None:
        return False
    margin = answer_margin(answer)
    return margin is not None and margin < job.review_margin_below


def _count(
    job: BulkJob, chunk: BulkChunk, attempt: int, written: _Written, enqueue: bool
) -> BulkChunk | None:
    """The chunk done, and counted towards its job, in one transaction with the job's row
    locked (so the review cap holds whichever workers count at once); only while this worker
    still holds the chunk and its job runs with no cancel asked."""
    now = timezone.now()
    with transaction.atomic():
        current = BulkJob.objects.select_for_update().filter(id=job.id).first()
        counts = current is not None and current.status == BulkJob.Status.RUNNING
        counts = counts and not current.cancel_requested
        given_up = bool(written.error)
        status = BulkChunk.Status.FAILED if given_up else BulkChunk.Status.DONE
        if counts:
            counts = bool(
                _chunk_held(chunk, attempt).update(
                    status=status, heartbeat_at=now, error=written.error
                )
            )
        if counts:
            # The queue takes a bounded number of rows from one job, and from one user's sends
            # together; the rest are counted.
            room = max(settings.SIAMWEB_BULK_REVIEW_MAX_ROWS - current.rows_queued, 0)
            if written.review and room and job.requested_by_id is not None:
                room = min(room, pending_review_room(user=job.requested_by))
            review = written.review[:room]
            current.rows_queued += len(review)
            current.rows_not_queued += len(written.review) - len(review)
            current.rows_done += written.rows
            current.rows_failed += written.failed
            current.rows_auto_coded += written.coded
            current.bytes_done += chunk.end_offset - chunk.offset
            current.chunks_done += 1
            current.chunks_failed += given_up
            current.progress = min(
                (current.input_offset + current.bytes_done) / current.input_bytes, 1.0
            )
            current.eta_seconds = _eta(current, now)
            current.heartbeat_at = now
            current.save(
                update_fields=[
                    "rows_queued", "rows_not_queued", "rows_done", "rows_failed", "rows_auto_coded",
                    "bytes_done",
                    "chunks_done", "chunks_failed", "progress", "eta_seconds", "heartbeat_at",
                ]
            )  # fmt: skip
            # Rows go for review once, and only while the job runs (not after it was cancelled
            # or deleted: an upload may hold private data).
            if review:
                inputs_submit(
                    taxonomy=job.taxonomy,
                    texts=review,
                    source=Input.Source.UPLOAD,
                    queued_by=job.requested_by,
                    # The job decided these need a person (under the policy it started with):
                    # the live policy does not code them.
                    auto_coding=False,
                    bulk_job_id=job.id,
                )
            if written.audits:
                # The product's own sample, not the job's send: it takes no room of the job's
                # or its user's, and is not the job's to review (its rows are answered).
                inputs_submit(
                    taxonomy=job.taxonomy,
                    texts=list(written.audits),
                    source=Input.Source.UPLOAD,
                    auto_coding=False,
                    audits=written.audits,
                )
            last = current.chunks_done == current.chunks_total
            if last and enqueue:
                bulk_job_finish_enqueue(job_id=job.id)
    if not counts:
        _remove_chunk_files(job, written.files)
        stopped = _cancel_if_asked(job.id)
        if stopped is None or stopped.status != BulkJob.Status.RUNNING:
            _remove_empty_chunks_folder(job)
        # Handed back last: once no chunk of a stopped job runs, none of its files are left.
        _release(chunk, attempt)  # still this worker's: its job stopped; a retry does it again
        return None
    chunk.refresh_from_db()
    return chunk


def _eta(job: BulkJob, now) -> float | None:
    """Seconds left at the rate every worker together read the file since this run started."""
    if job.eta_from is None:
        return None
    elapsed = (now - job.eta_from).total_seconds()
    read = job.bytes_done - job.eta_bytes_from
    if elapsed <= 0 or read <= 0:
        return None
    left = job.input_bytes - job.input_offset - job.bytes_done
    return max(left, 0) / (read / elapsed)


def _remove_chunk_files(job: BulkJob, names: dict[str, str]) -> None:
    folder = artifact_path(job.folder) / CHUNKS_DIR
    for name in names.values():
        (folder / name).unlink(missing_ok=True)


def _remove_empty_chunks_folder(job: BulkJob) -> None:
    """The chunks' folder of a job that stopped, once no chunk's files are left in it. A chunk
    that ends after the cancel's clean-up may have written into the folder while it was being
    removed, leaving it behind: each such chunk, having removed its own files, removes the
    folder unless another chunk's are still there (that chunk does it when it ends)."""
    with contextlib.suppress(OSError):
        (artifact_path(job.folder) / CHUNKS_DIR).rmdir()


def _cancel_if_asked(job_id: int) -> BulkJob | None:
    """A running job a cancel was asked of, stopped: CANCELLED, its results deleted. The job
    as it stands (None when it is gone)."""
    stopped = BulkJob.objects.filter(
        id=job_id, status=BulkJob.Status.RUNNING, cancel_requested=True
    ).update(status=BulkJob.Status.CANCELLED, finished_at=timezone.now(), eta_seconds=None)
    current = BulkJob.objects.filter(id=job_id).first()
    if stopped and current is not None:
        remove_partial(current)
    return current


# --- the job's last step: the chunks joined ---------------------------------------------------


def bulk_job_finish_enqueue(*, job_id: int) -> None:
    transaction.on_commit(lambda: current_app.send_task(FINISH_BULK_JOB, args=[job_id]))


def _ready(job_id: int):
    """The job while every chunk is done, it runs and no cancel was asked."""
    return BulkJob.objects.filter(
        id=job_id,
        status=BulkJob.Status.RUNNING,
        cancel_requested=False,
        chunks_total__isnull=False,
        chunks_done=F("chunks_total"),
    )


def bulk_job_finish(*, job_id: int) -> BulkJob | None:
    """Join the chunks' files in input order into the two result files, renamed to their final
    names, then mark the job succeeded; unless it was cancelled meanwhile, when the files go as
    a cancelled job's do. The job, or None when it was not ready (or is gone)."""
    if not _ready(job_id).update(heartbeat_at=timezone.now()):
        return _finish_refused(job_id)
    job = BulkJob.objects.select_related("taxonomy").get(id=job_id)
    folder = artifact_path(job.folder)
    columns, _, _ = read_header(folder / INPUT_FILE, fmt=job.input_format, filename=job.filename)
    header = io.StringIO(newline="")
    csv.writer(header).writerow([csv_cell(name) for name in [*columns, *RESULT_COLUMNS]])
    # Two workers could be at this at once (one given up on as silent, alive after all): each
    # joins into its own files; both hold the same rows.
    token = uuid.uuid4().hex[:12]
    parts = {kind: folder / f"{name}.{token}.part" for kind, name in RESULT_FILES.items()}
    chunks = job.chunks.order_by("index").only("index", "attempts", "line", "next_line")
    try:
        with parts["csv"].open("wb") as csv_out, parts["jsonl"].open("wb") as jsonl_out:
            csv_out.write(header.getvalue().encode("utf-8"))
            for done, chunk in enumerate(chunks.iterator(), 1):
                names = chunk_files(chunk.index, chunk.attempts)
                for kind, out in (("csv", csv_out), ("jsonl", jsonl_out)):
                    try:
                        with (folder / CHUNKS_DIR / names[kind]).open("rb") as part:
                            shutil.copyfileobj(part, out, 1024 * 1024)
                    except FileNotFoundError:
                        if not _ready(job_id).exists():
                            raise _NotReady from None
                        raise BulkFileError(
                            f"the results of {chunk_lines(chunk)} of bulk job "
                            f"{job.id} are gone from its folder ({CHUNKS_DIR}/{names[kind]}); "
                            "it cannot be finished: upload the file again"
                        ) from None
                if done % 200 == 0 and not _ready(job_id).update(heartbeat_at=timezone.now()):
                    raise _NotReady
            for out in (csv_out, jsonl_out):
                out.flush()
                os.fsync(out.fileno())
    except BulkFileError as exc:
        _remove_parts(parts)
        return _fail(job, None, str(exc))
    except (_NotReady, FileNotFoundError):  # cancelled: the folder's results went with it
        _remove_parts(parts)
        return _finish_refused(job_id)
    for kind, name in RESULT_FILES.items():
        try:
            parts[kind].replace(folder / name)
        except FileNotFoundError:  # removed by a cancel
            return _finish_refused(job_id)
    succeeded = _ready(job_id).update(
        status=BulkJob.Status.SUCCEEDED,
        progress=1.0,
        eta_seconds=0,
        finished_at=timezone.now(),
        heartbeat_at=timezone.now(),
        error=_given_up_note(job),
    )
    if not succeeded:
        return _finish_refused(job_id)
    shutil.rmtree(folder / CHUNKS_DIR, ignore_errors=True)
    for part in folder.glob("result.*.part"):  # a worker's that died while joining
        part.unlink(missing_ok=True)
    job.refresh_from_db()
    return job


def _given_up_note(job: BulkJob) -> str:
    """What a succeeded job says of the chunks given up on, or ""."""
    given_up = job.chunks.filter(status=BulkChunk.Status.FAILED).order_by("index")
    spans = [chunk_lines(chunk) for chunk in given_up.only("line", "next_line")]
    if not spans:
        return ""
    rows = sum(given_up.values_list("rows", flat=True))
    shown = ", ".join(spans[:10]) + (f" and {len(spans) - 10} more" if len(spans) > 10 else "")
    return (
        f"{rows:,} rows ({shown}) were not normalized: the worker normalizing them stopped "
        f"{CHUNK_DEATHS} times without finishing. They are in the results with the reason in "
        "error; the other rows are answered."
    )


def _remove_parts(parts: dict) -> None:
    for path in parts.values():
        path.unlink(missing_ok=True)


def _finish_refused(job_id: int) -> BulkJob | None:
    """The job stopped being this step's to finish: cancelled (its files go), or finished or
    failed by another."""
    current = _cancel_if_asked(job_id)
    if current is not None and current.status == BulkJob.Status.CANCELLED:
        remove_partial(current)
    return current if current is not None and not current.active else None


# --- a claim on the job ----------------------------------------------------------------------


def _held(job: BulkJob, attempt: int):
    """The job while this worker's claim (``attempt``) holds it: running, not taken over."""
    return BulkJob.objects.filter(id=job.id, status=BulkJob.Status.RUNNING, attempts=attempt)


def _stopped(job: BulkJob, attempt: int) -> BulkJob | None:
    """The claim was refused: the job was cancelled, or another worker took it over."""
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
        # wrote since must not stay behind.
        remove_partial(current)
        return current
    return None


def _fail(job: BulkJob, attempt: int | None, error: str) -> BulkJob | None:
    """FAILED with the error, while the job runs (and this claim holds it, when given)."""
    logger.warning("bulk job %s failed: %s", job.id, error)
    failed = {"error": error[:2000], "finished_at": timezone.now(), "eta_seconds": None}
    running = (
        _held(job, attempt)
        if attempt is not None
        else BulkJob.objects.filter(id=job.id, status=BulkJob.Status.RUNNING)
    )
    if not running.filter(cancel_requested=False).update(status=BulkJob.Status.FAILED, **failed):
        if attempt is not None:
            return _stopped(job, attempt)  # not this worker's to fail: cancelled, or taken over
        return _cancel_if_asked(job.id)
    job.refresh_from_db()
    return job


# --- a whole job in this process --------------------------------------------------------------


def bulk_job_execute(
    *, job_id: int, chunk_rows: int | None = None, after_chunk: ChunkHook | None = None
) -> BulkJob | None:
    """Carry a job out in this process: claim and split it, do its chunks in order, join them;
    the job, or None when there was nothing to do (finished, cancelled, taken over, or no such
    job). Raises ``JobBusy`` when another worker holds it. ``after_chunk`` is called with the
    job after each chunk is counted."""
    job = bulk_job_start(job_id=job_id, chunk_rows=chunk_rows, enqueue=False)
    if job is None or job.status != BulkJob.Status.RUNNING:
        return job
    attempt = job.attempts
    todo = job.chunks.filter(status=BulkChunk.Status.QUEUED).order_by("index")
    for chunk_id in list(todo.values_list("id", flat=True)):
        bulk_chunk_execute(chunk_id=chunk_id, enqueue=False)
        current = BulkJob.objects.filter(id=job_id).first()
        if current is None:
            return None
        if _not_held(current, attempt):
            return _outcome(current, attempt)
        if after_chunk is not None:
            after_chunk(current)
    current = BulkJob.objects.filter(id=job_id).first()
    if current is None:
        return None
    if _not_held(current, attempt):
        return _outcome(current, attempt)
    return bulk_job_finish(job_id=job_id)


def _not_held(job: BulkJob, attempt: int) -> bool:
    return job.status != BulkJob.Status.RUNNING or job.cancel_requested or job.attempts != attempt


def _outcome(job: BulkJob, attempt: int) -> BulkJob | None:
    """What a whole-job run ends with when it cannot go on: the job once it has ended (failed,
    or cancelled: its results deleted), None when another worker took it over."""
    if job.status == BulkJob.Status.FAILED:
        return job
    return _stopped(job, attempt)
