"""A bulk job's file is cut into chunks of whole records that any worker takes: done in any order
by any number of workers, the result holds every row in input order; each chunk is counted,
retried and given up alone; a cancel stops them all; every chunk answers with the version the job
started with."""

from __future__ import annotations

import csv
import io
import itertools
import json

import pytest
from celery.exceptions import Retry
from django.db import OperationalError
from django.db.models import F
from django.utils import timezone

from annotations.models import ReviewItem
from models_app.bulk import run as bulk_run
from models_app.bulk.files import record_spans
from models_app.bulk.jobs import bulk_job_cancel, bulk_job_create, bulk_job_delete, stale_seconds
from models_app.bulk.run import (
    bulk_chunk_execute,
    bulk_job_execute,
    bulk_job_finish,
    bulk_job_start,
)
from models_app.bulk.selectors import bulk_job_result
from models_app.models import BulkChunk, BulkJob
from models_app.serving.engines import artifact_path
from models_app.serving.normalize import rank_taxonomy_groups
from siamweb import task_names
from tests.conftest import build_live_model, forget_serving
from worker.tasks import (
    execute_bulk_chunk,
    execute_bulk_job,
    finish_bulk_job,
    resume_stale_bulk_jobs,
)

TITLES = ["Senior Java Engineer", "icu nurse", "Head Barista", "CDL Truck Driver", "Tax Accountant",
          "python developer", "night charge nurse", "espresso bar attendant", "long haul trucker",
          "staff accountant ii", "backend developer remote"]  # fmt: skip
POISON = "night charge nurse"  # the row its worker dies on, in the tests that kill one


def jobs_csv(titles=TITLES) -> bytes:
    out = io.StringIO()
    csv.writer(out).writerows([["id", "title"], *[[str(i), t] for i, t in enumerate(titles)]])
    return out.getvalue().encode()


def create(taxonomy, data: bytes = b"", **options) -> BulkJob:
    return bulk_job_create(
        taxonomy=taxonomy,
        upload=io.BytesIO(data or jobs_csv()),
        filename="jobs.csv",
        column="title",
        enqueue=False,
        **options,
    )


def split(job: BulkJob, rows: int) -> list[BulkChunk]:
    """The job claimed and cut into chunks of ``rows`` rows; none is done yet."""
    assert bulk_job_start(job_id=job.id, chunk_rows=rows, enqueue=False).status == "running"
    return list(job.chunks.order_by("index"))


def whole_result(taxonomy, data: bytes = b"") -> dict[str, bytes]:
    """The results of the same file normalized by one worker, start to end."""
    done = bulk_job_execute(job_id=create(taxonomy, data).id, chunk_rows=1000)
    return {kind: bulk_job_result(done, kind).read_bytes() for kind in ("csv", "jsonl")}


def results(job: BulkJob) -> dict[str, bytes]:
    return {kind: bulk_job_result(job, kind).read_bytes() for kind in ("csv", "jsonl")}


def make_chunk_stale(chunk: BulkChunk) -> None:
    """The chunk's heartbeat as old as a dead worker's."""
    silent = timezone.now() - timezone.timedelta(seconds=stale_seconds() + 1)
    BulkChunk.objects.filter(id=chunk.id).update(heartbeat_at=silent)


class WorkerDied(BaseException):
    """What a killed worker leaves behind: the chunk stops between two statements."""


@pytest.fixture
def poison(monkeypatch):
    """A worker dies whenever it normalizes a chunk holding ``POISON``."""
    rank = bulk_run.rank_taxonomy_groups

    def rank_or_die(taxonomy, texts, **options):
        if POISON in texts:
            raise WorkerDied
        return rank(taxonomy, texts, **options)

    monkeypatch.setattr(bulk_run, "rank_taxonomy_groups", rank_or_die)


def test_a_quoted_field_with_a_newline_is_never_cut_between_two_chunks(tiny_taxonomy):
    rows = [["id", "title", "note"]] + [
        [str(i), t, f'line one of {i}\nline "two", {i}' if i % 3 == 0 else ""]
        for i, t in enumerate(TITLES)
    ]
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    data = out.getvalue().encode()
    job = create(tiny_taxonomy, data)
    chunks = split(job, 2)
    assert [chunk.rows for chunk in chunks] == [2, 2, 2, 2, 2, 1]
    source = (artifact_path(job.folder) / "input").read_bytes()
    for chunk in chunks:
        # Each chunk is whole CSV records: read alone, it is its rows and nothing else.
        text = source[chunk.offset : chunk.end_offset].decode()
        assert len(list(csv.reader(io.StringIO(text)))) == chunk.rows
    assert [chunk.line for chunk in chunks] == [
        2,
        5,
        8,
        10,
        13,
        16,
    ]  # a row with a note holds two lines
    for first, second in itertools.pairwise(chunks):
        assert (first.end_offset, first.next_line) == (second.offset, second.line)
    for chunk in reversed(chunks):
        bulk_chunk_execute(chunk_id=chunk.id, enqueue=False)
    done = bulk_job_finish(job_id=job.id)
    assert results(done) == whole_result(tiny_taxonomy, data)
    lines = bulk_job_result(done, "jsonl").read_text().splitlines()
    assert json.loads(lines[3])["input"]["note"] == 'line one of 3\nline "two", 3'


def test_the_split_holds_one_record_at_a_time(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"icu nurse\n" * 100_000)  # 1 MB
    reads = []

    class Watched(io.FileIO):
        def readline(self, size=-1):
            line = super().readline(size)
            reads.append(len(line))
            return line

    with Watched(path) as handle:
        spans = list(
            record_spans(handle, fmt="txt", filename="big.txt", offset=0, line=1, rows=30_000)
        )
    assert [span.rows for span in spans] == [30_000, 30_000, 30_000, 10_000]
    assert spans[-1].end == 1_000_000 and spans[-1].next_line == 100_001
    assert max(reads) == len(b"icu nurse\n")  # a line a read: never the file


def test_chunks_done_in_any_order_by_different_workers_give_the_rows_in_input_order(
    tiny_taxonomy,
):
    job = create(tiny_taxonomy)
    chunks = split(job, 3)
    assert len(chunks) == 4 and job.chunks.filter(status="queued").count() == 4
    for position, chunk in enumerate([chunks[2], chunks[0], chunks[3], chunks[1]]):
        done = bulk_chunk_execute(chunk_id=chunk.id, worker=f"worker-{position % 2}", enqueue=False)
        assert done.status == "done"
    assert set(job.chunks.values_list("worker", flat=True)) == {"worker-0", "worker-1"}
    assert bulk_chunk_execute(chunk_id=chunks[0].id, enqueue=False) is None  # done already
    done = bulk_job_finish(job_id=job.id)
    assert (done.status, done.rows_done, done.chunks_done, done.chunks_total) == (
        "succeeded", 11, 4, 4,
    )  # fmt: skip
    assert results(done) == whole_result(tiny_taxonomy)
    with bulk_job_result(done, "csv").open(newline="") as handle:
        assert [row["title"] for row in csv.DictReader(handle)] == TITLES
    assert not (artifact_path(done.folder) / "chunks").exists()


def test_progress_and_the_time_left_count_every_chunk_whoever_did_it(tiny_taxonomy):
    job = create(tiny_taxonomy)
    chunks = split(job, 3)
    BulkJob.objects.filter(id=job.id).update(
        eta_from=timezone.now() - timezone.timedelta(seconds=10)
    )
    bulk_chunk_execute(chunk_id=chunks[3].id, worker="a", enqueue=False)
    bulk_chunk_execute(chunk_id=chunks[1].id, worker="b", enqueue=False)
    job.refresh_from_db()
    read = (chunks[3].end_offset - chunks[3].offset) + (chunks[1].end_offset - chunks[1].offset)
    assert (job.rows_done, job.bytes_done, job.chunks_done) == (5, read, 2)
    assert job.progress == pytest.approx((job.input_offset + read) / job.input_bytes)
    left = job.input_bytes - job.input_offset - read
    assert job.eta_seconds == pytest.approx(left / (read / 10), rel=0.1)


def test_a_chunk_whose_worker_dies_is_queued_again_and_costs_that_chunk_only(
    tiny_taxonomy, poison, monkeypatch
):
    job = create(tiny_taxonomy)
    chunks = split(job, 3)  # the poison is in the third chunk
    for chunk in chunks[:2]:
        bulk_chunk_execute(chunk_id=chunk.id, enqueue=False)
    with pytest.raises(WorkerDied):
        bulk_chunk_execute(chunk_id=chunks[2].id, worker="doomed", enqueue=False)
    bulk_chunk_execute(chunk_id=chunks[3].id, enqueue=False)
    lost = BulkChunk.objects.get(id=chunks[2].id)
    assert (lost.status, lost.worker) == ("running", "doomed")
    assert bulk_chunk_execute(chunk_id=lost.id, enqueue=False) is None  # it may still be alive
    make_chunk_stale(lost)
    assert resume_stale_bulk_jobs.run() == 1  # that chunk; the job itself is moving
    lost.refresh_from_db()
    assert (lost.status, lost.deaths) == ("queued", 1)
    monkeypatch.undo()  # the next worker gets through it
    bulk_chunk_execute(chunk_id=lost.id, worker="fresh", enqueue=False)
    done = bulk_job_finish(job_id=job.id)
    assert (done.status, done.rows_done, done.rows_failed, done.error) == ("succeeded", 11, 0, "")
    assert results(done) == whole_result(tiny_taxonomy)
    assert list(done.chunks.values_list("attempts", "deaths")) == [(1, 0), (1, 0), (2, 1), (1, 0)]


def test_a_count_the_database_refused_queues_the_chunk_again_and_is_no_death(
    tiny_taxonomy, monkeypatch
):
    job = create(tiny_taxonomy)
    (first, *_) = split(job, 3)
    counting = bulk_run._eta

    def deadlocked(*args):
        raise OperationalError("deadlock detected")

    monkeypatch.setattr(bulk_run, "_eta", deadlocked)  # inside the count's transaction
    with pytest.raises(OperationalError):
        bulk_chunk_execute(chunk_id=first.id, enqueue=False)
    first.refresh_from_db()
    assert (first.status, first.deaths, first.attempts) == ("queued", 0, 1)
    assert BulkJob.objects.get(id=job.id).rows_done == 0  # nothing of it counted
    monkeypatch.setattr(bulk_run, "_eta", counting)
    done = bulk_chunk_execute(chunk_id=first.id, enqueue=False)
    assert (done.status, done.deaths, done.attempts) == ("done", 0, 2)
    assert BulkJob.objects.get(id=job.id).rows_done == first.rows


def test_a_chunk_whose_worker_dies_twice_is_given_up_and_the_job_finishes_with_its_rows_as_errors(
    tiny_taxonomy, poison, monkeypatch
):
    job = create(tiny_taxonomy)
    chunks = split(job, 3)
    lost = chunks[2]
    for death in (1, 2):
        with pytest.raises(WorkerDied):
            bulk_chunk_execute(chunk_id=lost.id, worker=f"worker-{death}", enqueue=False)
        make_chunk_stale(lost)
        if death == 1:
            assert resume_stale_bulk_jobs.run() == 1
    # The second death is found by the next claim: the rows are written, not tried again.
    given_up = bulk_chunk_execute(chunk_id=lost.id, worker="worker-3", enqueue=False)
    assert (given_up.status, given_up.deaths, given_up.attempts) == ("failed", 2, 3)
    assert given_up.error == (
        "its worker stopped 2 times (last: worker-3); lines 8 to 10 not normalized"
    )
    for chunk in (chunks[0], chunks[1], chunks[3]):
        bulk_chunk_execute(chunk_id=chunk.id, enqueue=False)
    done = bulk_job_finish(job_id=job.id)
    assert (done.status, done.rows_done, done.rows_failed) == ("succeeded", 11, 3)
    assert (done.chunks_done, done.chunks_failed) == (4, 1)
    assert done.error.startswith("3 rows (lines 8 to 10) were not normalized: the worker")
    with bulk_job_result(done, "csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    monkeypatch.undo()  # the same file with no worker dying on it
    with io.BytesIO(whole_result(tiny_taxonomy)["csv"]) as clean:
        expected = list(csv.DictReader(io.TextIOWrapper(clean, newline="")))
    assert [row["title"] for row in rows] == TITLES
    for position, (row, answered) in enumerate(zip(rows, expected, strict=True)):
        if 6 <= position <= 8:  # the given-up chunk: its input kept, no answer, the reason
            assert (row["id"], row["group_code"], row["model_version"]) == (str(position), "", "")
            assert row["error"] == (
                f"line {position + 2}: not normalized: the worker normalizing lines 8 to 10 "
                "stopped 2 times without finishing, so they were not tried again"
            )
        else:
            assert row == answered


def test_a_job_cancelled_while_chunks_are_in_flight_counts_none_of_them(tiny_taxonomy, monkeypatch):
    job = create(tiny_taxonomy, review_margin_below=1.0)  # every row also goes for review
    chunks = split(job, 2)
    bulk_chunk_execute(chunk_id=chunks[0].id, worker="a", enqueue=False)
    rank = bulk_run.rank_taxonomy_groups
    in_flight = []

    def cancelled_meanwhile(taxonomy, texts, **options):
        if not in_flight:  # chunk 1 is at work on worker a; worker b does chunk 2, then a cancel
            in_flight.append(True)
            bulk_chunk_execute(chunk_id=chunks[2].id, worker="b", enqueue=False)
            assert bulk_job_cancel(job=job).cancel_requested
            assert (artifact_path(job.folder) / "chunks").exists()
        return rank(taxonomy, texts, **options)

    monkeypatch.setattr(bulk_run, "rank_taxonomy_groups", cancelled_meanwhile)
    assert bulk_chunk_execute(chunk_id=chunks[1].id, worker="a", enqueue=False) is None
    job.refresh_from_db()
    assert (job.status, job.rows_done, job.rows_queued) == ("cancelled", 4, 4)
    assert ReviewItem.objects.count() == 4  # chunks 0 and 2: nothing from the one cancelled
    for chunk in chunks[3:]:  # their tasks still arrive: each does nothing
        assert bulk_chunk_execute(chunk_id=chunk.id, enqueue=False) is None
    assert list(job.chunks.values_list("status", flat=True)) == [
        "done", "queued", "done", "queued", "queued", "queued",
    ]  # fmt: skip
    assert bulk_job_finish(job_id=job.id).status == "cancelled"
    folder = artifact_path(job.folder)
    assert {path.name for path in folder.iterdir()} == {"input"}


def test_every_chunk_answers_with_the_version_the_job_started_with(tiny_taxonomy):
    job = create(tiny_taxonomy)
    chunks = split(job, 3)
    bulk_chunk_execute(chunk_id=chunks[0].id, worker="a", enqueue=False)
    build_live_model(tiny_taxonomy)  # promoted while the job runs
    assert rank_taxonomy_groups(tiny_taxonomy, ["icu nurse"], k=1)[0].model_version == "jobs/v2"
    for chunk in chunks[1:]:
        forget_serving()  # another worker process, which never loaded the first version
        bulk_run._cache.clear()
        bulk_chunk_execute(chunk_id=chunk.id, worker="b", enqueue=False)
    done = bulk_job_finish(job_id=job.id)
    with bulk_job_result(done, "csv").open(newline="") as handle:
        assert {row["model_version"] for row in csv.DictReader(handle)} == {"jobs/v1"}
    assert done.model_version.label == "jobs/v1"


def test_the_review_cap_holds_across_chunks_done_by_different_workers(tiny_taxonomy, settings):
    settings.SIAMWEB_BULK_REVIEW_MAX_ROWS = 3
    job = create(tiny_taxonomy, review_below=1.0)
    chunks = split(job, 2)
    for position, chunk in enumerate(reversed(chunks)):
        bulk_chunk_execute(chunk_id=chunk.id, worker=f"worker-{position % 2}", enqueue=False)
    done = bulk_job_finish(job_id=job.id)
    qualified = sum(
        a.groups[0].probability < 1.0 for a in rank_taxonomy_groups(tiny_taxonomy, TITLES, k=1)
    )
    assert (done.rows_queued, done.rows_not_queued) == (3, qualified - 3)
    assert ReviewItem.objects.filter(taxonomy=tiny_taxonomy).count() == 3


def test_deleting_a_job_removes_its_chunk_files(tiny_taxonomy):
    job = create(tiny_taxonomy)
    chunks = split(job, 3)
    bulk_chunk_execute(chunk_id=chunks[0].id, enqueue=False)
    BulkJob.objects.filter(id=job.id).update(status=BulkJob.Status.FAILED)
    folder = artifact_path(job.folder)
    assert len(list((folder / "chunks").iterdir())) == 2
    assert bulk_job_delete(job=job)
    assert not folder.exists() and not BulkChunk.objects.exists()


def test_a_split_that_died_goes_on_from_its_last_chunk(tiny_taxonomy, monkeypatch):
    monkeypatch.setattr(bulk_run, "SPLIT_BATCH", 2)
    add = bulk_run._add_chunks

    def die_after_the_first_batch(job, attempt, chunks, enqueue, total=None):
        if job.chunks.exists():
            raise WorkerDied
        return add(job, attempt, chunks, enqueue, total)

    job = create(tiny_taxonomy)
    monkeypatch.setattr(bulk_run, "_add_chunks", die_after_the_first_batch)
    with pytest.raises(WorkerDied):
        bulk_job_start(job_id=job.id, chunk_rows=2, enqueue=False)
    job.refresh_from_db()
    assert (job.chunks.count(), job.chunks_total) == (2, None)
    monkeypatch.setattr(bulk_run, "_add_chunks", add)
    silent = timezone.now() - timezone.timedelta(seconds=stale_seconds() + 1)
    BulkJob.objects.filter(id=job.id).update(heartbeat_at=silent)
    done = bulk_job_execute(job_id=job.id, chunk_rows=5)  # the first split's size stays
    assert (done.status, done.chunks_total, done.attempts) == ("succeeded", 6, 2)
    assert list(done.chunks.values_list("index", "rows")) == [
        (0, 2), (1, 2), (2, 2), (3, 2), (4, 2), (5, 1),
    ]  # fmt: skip
    assert results(done) == whole_result(tiny_taxonomy)


def test_the_tasks_queue_every_chunk_and_the_last_one_queues_the_finish(
    tiny_taxonomy, monkeypatch, settings, django_capture_on_commit_callbacks
):
    settings.SIAMWEB_BULK_CHUNK_ROWS = 3
    sent = []
    monkeypatch.setattr(
        bulk_run.current_app, "send_task", lambda name, args: sent.append((name, *args))
    )
    job = create(tiny_taxonomy)
    with django_capture_on_commit_callbacks(execute=True):
        assert execute_bulk_job.run(job.id) == "running"
    chunk_ids = list(job.chunks.order_by("index").values_list("id", flat=True))
    assert sent == [(task_names.EXECUTE_BULK_CHUNK, i) for i in chunk_ids]
    sent.clear()
    for chunk_id in chunk_ids:
        with django_capture_on_commit_callbacks(execute=True):
            assert execute_bulk_chunk.run(chunk_id) == "done"
    assert sent == [(task_names.FINISH_BULK_JOB, job.id)]
    job.refresh_from_db()
    assert (job.status, job.chunks_done) == ("running", len(chunk_ids))
    # The job's task delivered again (or retried) with every chunk done: the finish, again.
    BulkJob.objects.filter(id=job.id).update(status="queued", attempts=F("attempts"))
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        execute_bulk_job.run(job.id)
    assert sent == [(task_names.FINISH_BULK_JOB, job.id)]


def test_the_bulk_tasks_fail_the_job_on_a_bug_but_not_on_a_dropped_connection_or_a_busy_job(
    tiny_taxonomy, monkeypatch
):
    job = create(tiny_taxonomy)
    chunks = split(job, 3)

    def raising(error: Exception):
        def call(**kwargs):
            raise error

        return call

    monkeypatch.setattr(bulk_run, "bulk_job_start", raising(bulk_run.JobBusy()))
    with pytest.raises(Retry):
        execute_bulk_job.run(job.id)
    monkeypatch.setattr(bulk_run, "bulk_job_finish", raising(OperationalError("gone")))
    with pytest.raises(OperationalError):
        finish_bulk_job.run(job.id)
    job.refresh_from_db()
    assert (job.status, job.error) == ("running", "")

    monkeypatch.setattr(bulk_run, "bulk_chunk_execute", raising(ValueError("a bug")))
    with pytest.raises(ValueError):
        execute_bulk_chunk.run(chunks[0].id)
    job.refresh_from_db()
    assert (job.status, job.error) == ("failed", "rows on lines 2 to 4: ValueError: a bug")


def test_the_jobs_page_counts_its_chunks(tiny_taxonomy, client, curator):
    job = create(tiny_taxonomy, user=curator)
    client.force_login(curator)
    assert "splitting the file" in client.get(f"/bulk/{job.id}/").content.decode()
    chunks = split(job, 3)
    bulk_chunk_execute(chunk_id=chunks[1].id, enqueue=False)
    page = client.get(f"/bulk/{job.id}/").content.decode()
    assert '<dd data-testid="job-chunks">1 of 4 done</dd>' in page
