"""Settings come from the environment and refuse malformed values at start-up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
SHOW = (
    "import django; django.setup(); from django.conf import settings as s; "
    "print(s.DATABASES['default']['ENGINE'], s.CELERY_BROKER_URL, s.DEBUG, s.SIAMWEB_ARTIFACTS_DIR)"
)


def start(tmp_path, **env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SIAMWEB_", "DATABASE_", "CELERY_", "DEBUG", "SECRET_KEY"))
    }
    clean.update({"DJANGO_SETTINGS_MODULE": "siamweb.settings", "SIAMWEB_VAR_DIR": str(tmp_path)})
    clean.update(env)
    return subprocess.run(
        [sys.executable, "-c", SHOW], cwd=ROOT, env=clean, capture_output=True, text=True
    )


def test_the_embedded_default_is_sqlite_a_filesystem_broker_and_no_debug(tmp_path):
    result = start(tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "django.db.backends.sqlite3",
        "filesystem://",
        "False",
        str(tmp_path / "artifacts"),
    ]


def test_database_url_and_broker_url_select_the_real_services(tmp_path):
    result = start(
        tmp_path,
        DATABASE_URL="postgres://u:p@db.example:5432/siamweb",
        CELERY_BROKER_URL="redis://127.0.0.1:6379/3",
        DEBUG="yes",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:3] == [
        "django.db.backends.postgresql",
        "redis://127.0.0.1:6379/3",
        "True",
    ]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DEBUG": "maybe"}, "DEBUG must be a boolean"),
        ({"DATABASE_URL": "nonsense://x"}, "DATABASE_URL is malformed"),
        ({"SIAMWEB_MAX_TEXT_LENGTH": "long"}, "SIAMWEB_MAX_TEXT_LENGTH must be an integer"),
        ({"SIAMWEB_MAX_TEXT_LENGTH": "3"}, "SIAMWEB_MAX_TEXT_LENGTH must be at least 10"),
        ({"SIAMWEB_ENV": "staging"}, "SIAMWEB_ENV must be 'development' or 'production'"),
        ({"SIAMWEB_ENV": "production"}, "SECRET_KEY must be set"),
        ({"CELERY_BROKER_URL": "localhost:6379"}, "CELERY_BROKER_URL must start with"),
        ({"LOG_LEVEL": "loud"}, "LOG_LEVEL must be"),
        (
            {"SIAMWEB_FINETUNE_BUDGET_VERDICTS": "0"},
            "SIAMWEB_FINETUNE_BUDGET_VERDICTS must be at least 1",
        ),
        ({"SIAMWEB_ENV": "production", "SECRET_KEY": "short"}, "SECRET_KEY must be set"),
        (
            {"SIAMWEB_ENV": "production", "SECRET_KEY": "k" * 50},
            "SIAMWEB_PROXY_SECRET must be set",
        ),
        (
            {"SIAMWEB_ENV": "production", "SECRET_KEY": "k" * 50, "SIAMWEB_PROXY_SECRET": "short"},
            "SIAMWEB_PROXY_SECRET must be set",
        ),
        ({"SIAMWEB_GATE_ALPHA": "0.5"}, "SIAMWEB_GATE_ALPHA must be below 0.5"),
        ({"SIAMWEB_GATE_ALPHA": "0"}, "SIAMWEB_GATE_ALPHA must be at least"),
        ({"SIAMWEB_GATE_ALPHA": "five percent"}, "SIAMWEB_GATE_ALPHA"),
        ({"SIAMWEB_GATE_ALPHA": "nan"}, "SIAMWEB_GATE_ALPHA must be a finite number"),
        ({"SIAMWEB_FINETUNE_MAX_MINUTES": "inf"}, "must be a finite number"),
        ({"SIAMWEB_VAR_DIR": "relative/var"}, "SIAMWEB_VAR_DIR must be an absolute path"),
        (
            {"SIAMWEB_API_TOKEN_MAX_AGE_DAYS": "3000000"},
            "SIAMWEB_API_TOKEN_MAX_AGE_DAYS must be at most 36500",
        ),
        (
            {"SIAMWEB_DEFAULT_K": "60"},
            "SIAMWEB_DEFAULT_K (60) must be at most SIAMWEB_MAX_K (50)",
        ),
        (
            {"CELERY_TASK_SOFT_TIME_LIMIT": "4000"},
            "CELERY_TASK_SOFT_TIME_LIMIT (4000 s) must be at most CELERY_TASK_TIME_LIMIT (3900 s)",
        ),
    ],
)
def test_malformed_values_stop_start_up_naming_the_variable(tmp_path, env, message):
    result = start(tmp_path, **env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert message in result.stderr


def test_production_starts_with_a_real_secret_key_and_proxy_secret(tmp_path):
    result = start(
        tmp_path, SIAMWEB_ENV="production", SECRET_KEY="k" * 50, SIAMWEB_PROXY_SECRET="p" * 32
    )
    assert result.returncode == 0, result.stderr


def test_a_file_where_the_artifacts_folder_should_be_is_refused(tmp_path):
    blocker = tmp_path / "artifacts-file"
    blocker.write_text("")
    result = start(tmp_path, SIAMWEB_ARTIFACTS_DIR=str(blocker))
    assert result.returncode != 0
    assert "SIAMWEB_ARTIFACTS_DIR must name a directory" in result.stderr


SQLITE_PRAGMAS = (
    "import django; django.setup(); from django.db import connection; "
    "cursor = connection.cursor(); "
    "print(cursor.execute('PRAGMA journal_mode').fetchone()[0], "
    "cursor.execute('PRAGMA busy_timeout').fetchone()[0], "
    "connection.settings_dict['OPTIONS']['transaction_mode'])"
)


@pytest.mark.parametrize("named_by_url", [False, True])
def test_every_sqlite_database_gets_wal_a_busy_timeout_and_immediate_transactions(
    tmp_path, named_by_url
):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIAMWEB_", "DATABASE_"))}
    env.update({"DJANGO_SETTINGS_MODULE": "siamweb.settings", "SIAMWEB_VAR_DIR": str(tmp_path)})
    if named_by_url:
        env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'elsewhere.sqlite3'}"
    result = subprocess.run(
        [sys.executable, "-c", SQLITE_PRAGMAS], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["wal", "30000", "IMMEDIATE"]
    expected = tmp_path / ("elsewhere.sqlite3" if named_by_url else "siamweb.sqlite3")
    assert expected.exists()


def test_postgresql_prepares_normalizes_read_unless_turned_off(tmp_path):
    show = "import django; django.setup(); from django.conf import settings as s; " \
        "print(s.DATABASES['default']['OPTIONS'])"  # fmt: skip
    url = {"DATABASE_URL": "postgres://u:p@db:5432/siamweb"}
    for env, threshold in (({}, 0), ({"SIAMWEB_DB_PREPARED_STATEMENTS": "false"}, None)):
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("SIAMWEB_", "DATABASE_"))}
        clean.update({"DJANGO_SETTINGS_MODULE": "siamweb.settings",
                      "SIAMWEB_VAR_DIR": str(tmp_path), **url, **env})  # fmt: skip
        result = subprocess.run(
            [sys.executable, "-c", show], cwd=ROOT, env=clean, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        expected = {"prepare_threshold": threshold, "options": "-c jit=off"}
        assert result.stdout.strip() == repr(expected)


@pytest.mark.django_db
def test_postgresql_never_compiles_a_query():
    # JIT took 237 of the batch groups page's 316 ms of SQL (docs/benchmarks.md).
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone() == ("off",)
