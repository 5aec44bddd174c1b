"""A bulk job on two real Celery worker processes: both take its chunks, the result holds every
row in input order; a worker killed in the middle of a chunk costs that chunk only; a cancel stops
both; a version promoted while the job runs answers none of its rows."""

from __future__ import annotations

import csv
import io
import os
import signal
import time

import pytest
import redis
from django.conf import settings as django_settings

from models_app.bulk.jobs import bulk_job_cancel, bulk_job_create, bulk_jobs_resume_stale
from models_app.bulk.run import bulk_job_execute, bulk_job_start
from models_app.bulk.selectors import bulk_job_result
from models_app.models import BulkChunk, BulkJob
from models_app.serving.engines import artifact_path
from models_app.serving.normalize import rank_taxonomy_groups
from siamweb.task_names import FAST_QUEUE
from tests.conftest import build_live_model
from tests.integration.conftest import wait_for

pytestmark = pytest.mark.integration

TITLES = ["icu nurse", "Senior Java Engineer", "Head Barista", "CDL Truck Driver", "Tax Accountant",
          "night charge nurse", "espresso bar attendant", "staff accountant ii"]  # fmt: skip
ROWS = 20_000
CHUNK = 200  # a hundred chunks


def file_bytes() -> bytes:
    lines = ["id,title,note"] + [
        f'{i},{TITLES[i % len(TITLES)]} {i % 97},"ad {i}\nsecond line"' if i % 50 == 0
        else f"{i},{TITLES[i % len(TITLES)]} {i % 97},"
        for i in range(ROWS)
    ]  # fmt: skip
    return ("\n".join(lines) + "\n").encode()


def create(taxonomy, user=None, enqueue=True) -> BulkJob:
    return bulk_job_create(
        taxonomy=taxonomy,
        upload=io.BytesIO(file_bytes()),
        filename="ads.csv",
        column="title",
        user=user,
        enqueue=enqueue,
    )


def finished(job: BulkJob):
    def check():
        job.refresh_from_db()
        return job.status not in BulkJob.ACTIVE_STATUSES

    return check


def in_one_process(taxonomy) -> dict[str, bytes]:
    """The same file's results from one worker, start to end, in this process."""
    done = bulk_job_execute(job_id=create(taxonomy, enqueue=False).id, chunk_rows=5000)
    return {kind: bulk_job_result(done, kind).read_bytes() for kind in ("csv", "jsonl")}


def results(job: BulkJob) -> dict[str, bytes]:
    return {kind: bulk_job_result(job, kind).read_bytes() for kind in ("csv", "jsonl")}


def pid_of(chunk_worker: str) -> int:
    return int(chunk_worker.rsplit(":", 1)[1])


def test_two_workers_share_a_jobs_chunks_and_the_rows_stay_in_input_order(
    start_worker, tiny_taxonomy, curator
):
    workers = [start_worker(SIAMWEB_BULK_CHUNK_ROWS=CHUNK) for _ in range(2)]
    job = create(tiny_taxonomy, user=curator)
    wait_for(finished(job), "the job to finish", workers[0].log)
    assert (job.status, job.rows_done, job.rows_failed, job.error) == ("succeeded", ROWS, 0, "")
    chunks = list(job.chunks.all())
    assert len(chunks) == job.chunks_total == ROWS // CHUNK
    assert {(chunk.status, chunk.attempts) for chunk in chunks} == {("done", 1)}
    by_worker = {pid_of(chunk.worker) for chunk in chunks}
    assert by_worker == {worker.pid for worker in workers}  # both took chunks
    assert results(job) == in_one_process(tiny_taxonomy)
    with bulk_job_result(job, "csv").open(newline="") as handle:
        ids = [row["id"] for row in csv.DictReader(handle)]
    assert ids == [str(i) for i in range(ROWS)]


def test_a_worker_killed_in_the_middle_of_a_chunk_costs_that_chunk_only(
    start_worker, tiny_taxonomy, settings
):
    doomed = start_worker(SIAMWEB_BULK_CHUNK_ROWS=CHUNK)
    other = start_worker(SIAMWEB_BULK_CHUNK_ROWS=CHUNK)
    job = create(tiny_taxonomy)

    def stopped_in_a_chunk():
        os.kill(doomed.pid, signal.SIGSTOP)
        held = BulkChunk.objects.filter(
            job=job, status="running", worker__endswith=f":{doomed.pid}"
        ).first()
        if held is None:  # between two chunks: let it go on to the next
            os.kill(doomed.pid, signal.SIGCONT)
            time.sleep(0.02)
        return held

    lost = wait_for(stopped_in_a_chunk, "the worker to be caught in a chunk", doomed.log)
    doomed.kill()  # SIGKILL: no cleanup
    doomed.wait()
    settings.SIAMWEB_BULK_STALE_SECONDS = 2

    def lost_chunk_queued_again():
        bulk_jobs_resume_stale()  # what beat runs
        lost.refresh_from_db()
        return lost.deaths == 1

    wait_for(lost_chunk_queued_again, "the lost chunk to be queued again", other.log)
    wait_for(finished(job), "the job to finish", other.log)
    assert (job.status, job.rows_done, job.chunks_failed) == ("succeeded", ROWS, 0)
    lost.refresh_from_db()
    assert (lost.status, lost.attempts, lost.deaths) == ("done", 2, 1)
    assert pid_of(lost.worker) == other.pid
    others = job.chunks.exclude(id=lost.id)
    assert set(others.values_list("attempts", "deaths")) == {(1, 0)}  # nothing else redone
    assert results(job) == in_one_process(tiny_taxonomy)


def test_a_cancel_stops_the_chunks_on_every_worker(start_worker, tiny_taxonomy):
    workers = [start_worker(SIAMWEB_BULK_CHUNK_ROWS=CHUNK) for _ in range(2)]
    job = create(tiny_taxonomy)

    def some_chunks_done():
        job.refresh_from_db()
        return job.chunks_done >= 10

    wait_for(some_chunks_done, "a few chunks to be done", workers[0].log)
    job = bulk_job_cancel(job=job)
    rows_at_cancel, chunks_at_cancel = job.rows_done, job.chunks_done
    assert job.chunks_done < job.chunks_total
    wait_for(finished(job), "the job to stop", workers[0].log)
    assert job.status == "cancelled"
    queue = redis.Redis.from_url(django_settings.CELERY_BROKER_URL)
    # Every chunk's task still arrives; each does nothing.
    wait_for(lambda: queue.llen(FAST_QUEUE) == 0, "the chunks' tasks to be drained", workers[1].log)
    # The chunks that were in flight ended without counting: handed back, not done.
    in_flight = job.chunks.filter(status="running")
    wait_for(lambda: not in_flight.exists(), "the chunks in flight to end", workers[1].log)
    job.refresh_from_db()
    assert (job.rows_done, job.chunks_done) == (rows_at_cancel, chunks_at_cancel)
    assert job.chunks.filter(status="done").count() == chunks_at_cancel
    # No chunk files are left, whenever the chunks in flight ended against the cancel's
    # clean-up (the worker that stopped the job removes its results just after saying so).
    folder = artifact_path(job.folder)
    wait_for(
        lambda: {path.name for path in folder.iterdir()} == {"input"},
        "the cancelled job's results to be removed",
        workers[1].log,
    )
    assert {path.name for path in folder.iterdir()} == {"input"}


def test_a_version_promoted_while_the_job_runs_answers_none_of_its_rows(
    start_worker, tiny_taxonomy
):
    job = create(tiny_taxonomy, enqueue=False)
    job = bulk_job_start(job_id=job.id, chunk_rows=CHUNK)  # split, pinned, chunks queued
    assert job.model_version.label == "jobs/v1" and job.chunks_done == 0
    build_live_model(tiny_taxonomy)  # promoted before any worker took a chunk
    assert rank_taxonomy_groups(tiny_taxonomy, ["icu nurse"], k=1)[0].model_version == "jobs/v2"
    workers = [start_worker() for _ in range(2)]  # fresh processes: v2 is all they ever saw live
    wait_for(finished(job), "the job to finish", workers[0].log)
    assert (job.status, job.rows_done) == ("succeeded", ROWS)
    assert {pid_of(w) for w in job.chunks.values_list("worker", flat=True)} == {
        worker.pid for worker in workers
    }
    with bulk_job_result(job, "csv").open(newline="") as handle:
        assert {row["model_version"] for row in csv.DictReader(handle)} == {"jobs/v1"}
