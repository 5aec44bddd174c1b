"""Production settings (SIAMWEB_ENV=production): HTTPS only, secure cookies, HSTS and the usual
headers, and ``manage.py check --deploy`` with nothing to report. Each runs in a fresh process with
production's environment, as a deployment starts."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HOST = "siamweb.example.org"
PROXY_SECRET = secrets.token_urlsafe(32)

REQUESTS = f"""
import json, re
import django
django.setup()
from django.core.management import call_command
from django.test import Client
from annotations.services.accounts import user_ensure
call_command("migrate", verbosity=0)
user_ensure(username="ada", password="ada-pass-123", admin=True)
out = {{}}
plain = Client(HTTP_HOST="{HOST}")
response = plain.get("/accounts/login/")
out["http"] = [response.status_code, response.headers.get("Location")]
out["healthz_over_http"] = plain.get("/healthz").status_code
forged = Client(HTTP_HOST="{HOST}", HTTP_X_FORWARDED_PROTO="https")
out["forged_https"] = forged.get("/accounts/login/").status_code
browser = Client(HTTP_HOST="{HOST}", HTTP_X_FORWARDED_PROTO="https", enforce_csrf_checks=True,
    HTTP_X_SIAMWEB_PROXY_SECRET="{PROXY_SECRET}")
page = browser.get("/accounts/login/")
out["headers"] = {{k: page.headers.get(k) for k in (
    "Strict-Transport-Security", "X-Content-Type-Options", "X-Frame-Options",
    "Referrer-Policy", "Cross-Origin-Opener-Policy")}}
token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
login = browser.post("/accounts/login/", {{
    "username": "ada", "password": "ada-pass-123", "csrfmiddlewaretoken": token}},
    HTTP_REFERER="https://{HOST}/accounts/login/")
out["login"] = login.status_code
out["cookies"] = {{name: {{"secure": bool(c["secure"]), "httponly": bool(c["httponly"]),
    "samesite": c["samesite"]}} for name, c in {{**page.cookies, **login.cookies}}.items()}}
print(json.dumps(out))
"""


def production_env(tmp_path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        # The browser tests' conftest sets DJANGO_ALLOW_ASYNC_UNSAFE in this process, which a
        # deployment never has (check --deploy refuses it).
        if not key.startswith(
            ("SIAMWEB_", "DATABASE_", "CELERY_", "DEBUG", "SECRET_KEY", "SECURE_")
        )
        and key != "DJANGO_ALLOW_ASYNC_UNSAFE"
    }
    return env | {
        "DJANGO_SETTINGS_MODULE": "siamweb.settings",
        "SIAMWEB_ENV": "production",
        "SIAMWEB_VAR_DIR": str(tmp_path),
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": HOST,
        "SIAMWEB_PROXY_SECRET": PROXY_SECRET,
    }


def run(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=production_env(tmp_path),
        capture_output=True,
        text=True,
    )


def test_check_deploy_reports_nothing(tmp_path):
    result = run(tmp_path, "manage.py", "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr
    # W005 (HSTS for subdomains) and W021 (preload) are silenced on purpose: see settings.py
    assert "System check identified no issues (2 silenced)." in result.stdout


@pytest.fixture(scope="module")
def answers(tmp_path_factory) -> dict:
    result = run(tmp_path_factory.mktemp("production"), "-c", REQUESTS)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_plain_http_is_redirected_to_https_except_the_health_check(answers):
    assert answers["http"] == [301, f"https://{HOST}/accounts/login/"]
    assert answers["healthz_over_http"] == 200


def test_https_is_believed_from_the_proxy_only(answers):
    # X-Forwarded-Proto without the proxy's secret (SIAMWEB_PROXY_SECRET) is plain HTTP.
    assert answers["forged_https"] == 301


def test_pages_carry_hsts_and_the_usual_security_headers(answers):
    assert answers["headers"] == {
        "Strict-Transport-Security": "max-age=31536000",
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "same-origin",
        "Cross-Origin-Opener-Policy": "same-origin",
    }


def test_the_session_and_csrf_cookies_are_secure(answers):
    assert answers["login"] == 302
    cookies = answers["cookies"]
    assert set(cookies) == {"csrftoken", "sessionid", "siamweb_signed_in"}
    assert all(cookie["secure"] for cookie in cookies.values())
    assert cookies["sessionid"]["httponly"] and cookies["siamweb_signed_in"]["httponly"]
    assert {cookie["samesite"] for cookie in cookies.values()} == {"Lax"}
