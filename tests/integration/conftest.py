"""A real Celery worker process on Redis, sharing the PostgreSQL test database."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
# Waits for something another process does; a bound so a broken setup fails instead of hanging.
WAIT_SECONDS = 120


def wait_for(condition, what: str, log: Path | None = None):
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    tail = log.read_text()[-3000:] if log and log.exists() else ""
    pytest.fail(f"gave up waiting for {what}\n--- worker log ---\n{tail}")


@pytest.fixture
def worker(transactional_db, tmp_path):
    """Start `celery worker` as its own process against the test database and Redis."""
    if connection.vendor != "postgresql":
        pytest.fail("the integration tests need PostgreSQL: set DATABASE_URL (make services)")
    broker = settings.CELERY_BROKER_URL
    if not broker.startswith("redis://"):
        pytest.fail("the integration tests need Redis: set CELERY_BROKER_URL (make services)")
    redis.Redis.from_url(broker).flushdb()  # messages left by earlier tests name rows long gone
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "siamweb.settings",
        "DATABASE_URL": (
            f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        ),
        "CELERY_BROKER_URL": broker,
        "SIAMWEB_ARTIFACTS_DIR": str(settings.SIAMWEB_ARTIFACTS_DIR),
        "SIAMWEB_VAR_DIR": str(tmp_path / "worker-var"),
        "PYTHONUNBUFFERED": "1",
    }
    log = tmp_path / "worker.log"
    with log.open("w") as log_file:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "siamweb", "worker",
                "--pool=solo", "--loglevel=INFO", "--without-mingle", "--without-gossip",
                "--queues=celery,training", f"--hostname=test-{uuid.uuid4().hex[:8]}@%h",
            ],
            cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_for(
            lambda: " ready." in log.read_text() or process.poll() is not None,
            "the worker to start",
            log,
        )
        if process.poll() is not None:
            pytest.fail(f"the worker exited at start:\n{log.read_text()[-3000:]}")
        process.log = log
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
