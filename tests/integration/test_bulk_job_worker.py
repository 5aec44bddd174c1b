"""A bulk job on a real Celery worker: killed mid-file, the job keeps its checkpoint and offers
no result; retried on a fresh worker, it reads on from there and its result is the same, byte
for byte, as a job no one interrupted."""

from __future__ import annotations

import io

import pytest

from models_app.bulk.jobs import BulkStateError, bulk_job_create, bulk_job_retry
from models_app.bulk.run import bulk_job_execute
from models_app.bulk.selectors import bulk_job_result
from models_app.models import BulkJob
from tests.integration.conftest import wait_for

pytestmark = pytest.mark.integration

TITLES = ["icu nurse", "Senior Java Engineer", "Head Barista", "CDL Truck Driver", "Tax Accountant",
          "night charge nurse", "espresso bar attendant", "staff accountant ii"]  # fmt: skip
ROWS = 40_000  # a few hundred chunks of 100: the worker is caught in the middle
CHUNK = 100


def file_bytes() -> bytes:
    lines = ["id,title"] + [f"{i},{TITLES[i % len(TITLES)]} {i % 97}" for i in range(ROWS)]
    return ("\n".join(lines) + "\n").encode()


def test_a_job_killed_with_its_worker_resumes_on_a_fresh_one(
    start_worker, tiny_taxonomy, curator, settings
):
    worker = start_worker(SIAMWEB_BULK_CHUNK_ROWS=CHUNK)
    job = bulk_job_create(
        taxonomy=tiny_taxonomy,
        upload=io.BytesIO(file_bytes()),
        filename="ads.csv",
        column="title",
        user=curator,
    )  # fmt: skip  (sent to the worker on commit)

    def some_chunks_done():
        job.refresh_from_db()
        return job.status == "running" and job.rows_done >= 5 * CHUNK

    wait_for(some_chunks_done, "the worker to write a few chunks", worker.log)
    worker.kill()  # SIGKILL: no cleanup
    worker.wait()
    job.refresh_from_db()
    assert job.status == "running" and 0 < job.rows_done < ROWS
    assert bulk_job_result(job, "csv") is None

    settings.SIAMWEB_BULK_STALE_SECONDS = 1  # its heartbeat has stopped: the worker is gone

    def retried():
        try:
            return bulk_job_retry(job=job)
        except BulkStateError:  # not silent for long enough yet
            return None

    wait_for(retried, "the retry to be accepted")
    fresh = start_worker(SIAMWEB_BULK_CHUNK_ROWS=CHUNK * 7, SIAMWEB_BULK_STALE_SECONDS=1)

    def finished():
        job.refresh_from_db()
        return job.status not in BulkJob.ACTIVE_STATUSES

    wait_for(finished, "the retried job to finish", fresh.log)
    assert (job.status, job.rows_done, job.attempts) == ("succeeded", ROWS, 2)

    whole = bulk_job_create(
        taxonomy=tiny_taxonomy, upload=io.BytesIO(file_bytes()), filename="ads.csv",
        column="title", enqueue=False,
    )  # fmt: skip
    whole = bulk_job_execute(job_id=whole.id, chunk_rows=1000)
    for kind in ("csv", "jsonl"):
        assert bulk_job_result(job, kind).read_bytes() == bulk_job_result(whole, kind).read_bytes()
