"""Real Celery worker processes on Redis, sharing the PostgreSQL test database.

Run with the services of ``make services`` (or your own): ``DATABASE_URL`` names the PostgreSQL
server (the test database is created beside it) and ``CELERY_BROKER_URL`` the Redis database; both
are handed to the worker processes, so several engineers can share a server by choosing their own
database names and Redis database numbers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection

from annotations.models import Taxonomy
from annotations.services.taxonomy import taxonomy_import
from models_app.models import TrainingRun
from siamweb.task_names import QUEUES
from tests.conftest import TINY_CSV, build_live_model
from tests.retraining.conftest import TRAINABLE

ROOT = Path(__file__).resolve().parents[2]
# Waits for something another process does; a bound so a broken setup fails instead of hanging.
WAIT_SECONDS = 120
FINISHED = ("succeeded", "promoted", "rejected", "failed")


def wait_for(condition, what: str, log: Path | None = None, seconds: float = WAIT_SECONDS):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    tail = log.read_text()[-3000:] if log and log.exists() else ""
    pytest.fail(f"gave up waiting for {what}\n--- worker log ---\n{tail}")


def wait_until_finished(run: TrainingRun, log: Path | None = None) -> TrainingRun:
    """The run, reloaded, once it reached a final status."""

    def check():
        run.refresh_from_db()
        return run.status in FINISHED

    wait_for(check, f"{run.kind} run {run.id} to finish (it is {run.status})", log)
    return run


def wait_until_idle(taxonomy: Taxonomy, log: Path | None = None) -> None:
    """No run of the taxonomy queued or running."""
    wait_for(
        lambda: (
            not TrainingRun.objects.filter(
                taxonomy=taxonomy, status__in=TrainingRun.ACTIVE_STATUSES
            ).exists()
        ),
        f"the runs of {taxonomy.slug} to finish",
        log,
    )


@pytest.fixture
def start_worker(transactional_db, tmp_path) -> Iterator[Callable[..., subprocess.Popen]]:
    """Start `celery worker` processes against the test database and Redis.

    ``start_worker(**env)`` starts one and returns it (its log file as ``.log``) once it is
    ready; keyword arguments become environment variables of that worker only (settings such as
    ``SIAMWEB_GATE_TOLERANCE``). ``pool`` picks the Celery pool: "solo" runs tasks in the worker
    process itself, so killing that process kills the task; "prefork" is what enforces time limits.
    Every worker still running at the end of the test is stopped.
    """
    if connection.vendor != "postgresql":
        pytest.fail("the integration tests need PostgreSQL: set DATABASE_URL (make services)")
    broker = settings.CELERY_BROKER_URL
    if not broker.startswith("redis://"):
        pytest.fail("the integration tests need Redis: set CELERY_BROKER_URL (make services)")
    redis.Redis.from_url(broker).flushdb()  # messages left by earlier tests name rows long gone
    db = connection.settings_dict
    base_env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "siamweb.settings",
        # The test database (test_<name>), not the one DATABASE_URL names.
        "DATABASE_URL": (
            f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        ),
        "CELERY_BROKER_URL": broker,
        "SIAMWEB_ARTIFACTS_DIR": str(settings.SIAMWEB_ARTIFACTS_DIR),
        "SIAMWEB_VAR_DIR": str(tmp_path / "worker-var"),
        "PYTHONUNBUFFERED": "1",
    }
    processes: list[subprocess.Popen] = []

    def start(
        *, pool: str = "solo", queues: Sequence[str] = QUEUES, **env: str | float | int
    ) -> subprocess.Popen:
        log = tmp_path / f"worker-{len(processes) + 1}.log"
        with log.open("w") as log_file:
            process = subprocess.Popen(
                [
                    sys.executable, "-m", "celery", "-A", "siamweb", "worker",
                    f"--pool={pool}", "--concurrency=1", "--loglevel=INFO",
                    "--without-mingle", "--without-gossip", f"--queues={','.join(queues)}",
                    f"--hostname=test-{uuid.uuid4().hex[:8]}@%h",
                ],
                cwd=ROOT,
                env={**base_env, **{name: str(value) for name, value in env.items()}},
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        processes.append(process)
        process.log = log
        wait_for(
            lambda: " ready." in log.read_text() or process.poll() is not None,
            "the worker to start",
            log,
        )
        if process.poll() is not None:
            pytest.fail(f"the worker exited at start:\n{log.read_text()[-3000:]}")
        return process

    try:
        yield start
    finally:
        for process in processes:
            stop(process)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def worker(start_worker) -> subprocess.Popen:
    """One worker with the default settings, on every queue."""
    return start_worker()


@pytest.fixture
def trainable_taxonomy(transactional_db) -> Taxonomy:
    """The tiny five-group taxonomy with a live model that can be fine-tuned (a small n-gram
    bag: a few hundred steps a second on one core)."""
    report = taxonomy_import(slug="jobs", path=TINY_CSV, fmt="csv", name="Tiny jobs")
    build_live_model(report.taxonomy, TRAINABLE)
    return report.taxonomy
