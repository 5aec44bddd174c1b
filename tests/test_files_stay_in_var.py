"""Everything the product writes goes under its var folder (or the artifacts folder), never into
the folder it was started from: with the embedded defaults (SQLite, the filesystem broker), the
web app answering a request and sending tasks to both queues leaves the working folder empty."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import django
django.setup()
from django.core.management import call_command
from django.test import Client
call_command("migrate", verbosity=0)
assert Client(HTTP_HOST="localhost").get("/healthz").status_code == 200
from siamweb.celery import app
app.send_task("worker.tasks.reindex_stale_taxonomies")
app.send_task("worker.tasks.execute_training_run", args=[1])  # the training queue
"""


def _files_under(folder: Path) -> set[Path]:
    return {path.relative_to(folder) for path in folder.rglob("*") if path.is_file()}


def test_the_web_app_and_the_filesystem_broker_write_only_under_var(tmp_path):
    cwd, var = tmp_path / "cwd", tmp_path / "var"
    cwd.mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "CELERY_BROKER_URL", "SIAMWEB_ARTIFACTS_DIR"}
    }
    env |= {
        "DJANGO_SETTINGS_MODULE": "siamweb.settings",
        "SIAMWEB_VAR_DIR": str(var),
        "PYTHONPATH": str(ROOT),
    }
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert list(cwd.iterdir()) == []
    assert {path.name for path in tmp_path.iterdir()} == {"cwd", "var"}
    written = _files_under(var)
    assert Path("siamweb.sqlite3") in written
    # both messages queued, and the exchanges' bindings beside them
    assert len([path for path in written if path.parts[:2] == ("broker", "queue")]) == 2
    assert {Path("broker/control/fast.exchange"), Path("broker/control/training.exchange")} <= (
        written
    )
