"""gunicorn as deployed (``-c deploy/gunicorn.conf.py``): the master loads the live
engines before it forks, workers answer with them, and workers forked after a promotion get the
new model from the master."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from rest_framework.authtoken.models import Token

from models_app.models import ModelVersion
from models_app.serving.normalize import rank_taxonomy_groups
from tests.conftest import build_live_model
from tests.integration.conftest import ROOT, wait_for

pytestmark = pytest.mark.integration

TEXT = "Senior Python Developer (remote)"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def post_normalize(port: int, token: str) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            "POST",
            "/api/v1/taxonomies/jobs/normalize",
            body=json.dumps({"texts": [TEXT]}),
            headers={
                "Authorization": f"Token {token}",
                "Content-Type": "application/json",
                "Host": "localhost",
            },
        )
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def answered(port: int, token: str) -> tuple[int, dict] | None:
    try:
        return post_normalize(port, token)
    except OSError:  # refused, reset or broken: the server is replacing its workers
        return None


@contextlib.contextmanager
def running_gunicorn(tmp_path: Path, database_url: str):
    """gunicorn with the product's config on a free port; yields (process, port, log path)
    once it booted a worker; stopped at the end."""
    port = free_port()
    log = tmp_path / "gunicorn.log"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "siamweb.settings",
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "SIAMWEB_ARTIFACTS_DIR": str(settings.SIAMWEB_ARTIFACTS_DIR),
        "SIAMWEB_VAR_DIR": str(tmp_path / "web-var"),
    }
    with log.open("w") as output:
        process = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "gunicorn"), "siamweb.wsgi",
                "--config=deploy/gunicorn.conf.py", f"--bind=127.0.0.1:{port}",
                "--workers=2", "--threads=1", "--log-level=info",
                # A worker told to stop while it boots misses the signal, and gunicorn waits
                # this long before killing it (30 s by default).
                "--graceful-timeout=5",
            ],
            cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_for(
            lambda: "Booting worker" in log.read_text() or process.poll() is not None,
            "gunicorn to start",
            log,
        )
        assert process.poll() is None, log.read_text()
        yield process, port, log
    finally:
        process.terminate()
        process.wait(timeout=60)


@pytest.fixture
def gunicorn(trainable_taxonomy, tmp_path):
    """gunicorn against the test database, which holds a taxonomy with a live model."""
    db = connection.settings_dict
    url = f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    with running_gunicorn(tmp_path, url) as server:
        yield server


def test_the_server_starts_while_the_database_is_away(tmp_path):
    unreachable = "postgres://siamweb:secret@127.0.0.1:1/siamweb"  # nothing listens on port 1

    with running_gunicorn(tmp_path, unreachable) as (process, _, log):
        assert process.poll() is None
        assert "live engines not preloaded, the database did not answer" in log.read_text()


def test_workers_answer_with_the_engine_the_master_preloaded(gunicorn, trainable_taxonomy, curator):
    _, port, log = gunicorn
    first = ModelVersion.objects.get(taxonomy=trainable_taxonomy)
    assert f"preloaded jobs: {first.label}" in log.read_text()
    token = Token.objects.create(user=curator).key
    expected = rank_taxonomy_groups(trainable_taxonomy, [TEXT], k=5)[0]

    status, body = post_normalize(port, token)

    assert status == 200, body
    answer = body["results"][0]
    assert answer["model_version"] == first.label
    assert [g["code"] for g in answer["groups"]] == [g.code for g in expected.groups]


def test_workers_forked_after_a_promotion_get_the_new_model_from_the_master(
    gunicorn, trainable_taxonomy, curator
):
    process, port, log = gunicorn
    token = Token.objects.create(user=curator).key
    build_live_model(trainable_taxonomy)  # a second version goes live
    second = ModelVersion.objects.filter(taxonomy=trainable_taxonomy).latest("id")

    process.send_signal(signal.SIGHUP)  # gunicorn replaces its workers, forking new ones

    # The master loads the new engine before forking the new workers (the workers would
    # otherwise each load their own copy on their first request).
    wait_for(lambda: f"preloaded jobs: {second.label}" in log.read_text(), "the reload", log)
    # While the old workers exit, a connection one of them accepted is dropped: ask again.
    status, body = wait_for(lambda: answered(port, token), "an answer after the reload", log)
    assert "Traceback" not in log.read_text(), log.read_text()
    assert status == 200, body
    assert body["results"][0]["model_version"] == second.label
