"""Every answer carries the Content-Security-Policy of ``SIAMWEB_CONTENT_SECURITY_POLICY`` (pages,
the API, static files, error pages), and nothing the site serves needs an inline script or style
to work. The browser test (tests/browser/test_content_security_policy_in_browser.py) shows the
pages run under it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

ROOT = Path(__file__).resolve().parent.parent


def policy(response) -> str | None:
    return response.headers.get("Content-Security-Policy")


def test_a_page_carries_the_policy(client):
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    assert policy(response) == settings.SIAMWEB_CONTENT_SECURITY_POLICY


def test_the_default_policy_allows_nothing_inline_nor_from_elsewhere(tmp_path):
    result = start(SIAMWEB_VAR_DIR=str(tmp_path))
    assert result.returncode == 0, result.stderr
    directives = dict(d.strip().split(" ", 1) for d in result.stdout.strip().split(";"))
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"


def test_an_api_answer_carries_the_policy(api_client, tiny_taxonomy):
    response = api_client.get("/api/v1/taxonomies")
    assert response.status_code == 200
    assert policy(response) == settings.SIAMWEB_CONTENT_SECURITY_POLICY
    refused = Client().get("/api/v1/taxonomies")
    assert refused.status_code == 401
    assert policy(refused) == settings.SIAMWEB_CONTENT_SECURITY_POLICY


def test_a_static_file_carries_the_policy(client):
    response = client.get("/static/css/siamweb.css")
    assert response.status_code == 200
    assert policy(response) == settings.SIAMWEB_CONTENT_SECURITY_POLICY


def test_a_missing_page_carries_the_policy(client):
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert policy(response) == settings.SIAMWEB_CONTENT_SECURITY_POLICY


@pytest.mark.urls("tests.urls_with_a_failing_page")
def test_the_page_of_a_failure_carries_the_policy_and_is_styled_from_a_file(client):
    client.raise_request_exception = False
    response = client.get("/fail/")
    assert response.status_code == 500
    assert policy(response) == settings.SIAMWEB_CONTENT_SECURITY_POLICY
    html = response.content.decode()
    assert "Something broke on our side" in html
    assert '<link rel="stylesheet" href="/static/css/siamweb.css">' in html
    assert inline_code(html) == []


def test_a_form_sent_without_its_csrf_token_gets_the_sites_page_under_the_policy(db):
    response = Client(enforce_csrf_checks=True).post(
        "/accounts/login/", {"username": "ada", "password": "x"}
    )
    assert response.status_code == 403
    assert policy(response) == settings.SIAMWEB_CONTENT_SECURITY_POLICY
    html = response.content.decode()
    assert 'data-testid="csrf-failure"' in html
    assert inline_code(html) == []


def test_the_setting_is_the_header(client, settings):
    settings.SIAMWEB_CONTENT_SECURITY_POLICY = "default-src 'none'"
    assert policy(client.get("/accounts/login/")) == "default-src 'none'"


def test_the_api_docs_page_runs_swagger_ui_from_files_only(client, curator):
    client.force_login(curator)
    html = client.get("/api/v1/docs").content.decode()
    assert inline_code(html) == []
    assert '<script src="/api/v1/docs?script="></script>' in html
    script = client.get("/api/v1/docs?script=")
    assert script.status_code == 200
    assert script["Content-Type"] == "application/javascript"
    assert "SwaggerUIBundle(" in script.content.decode()


# What a strict policy refuses: a <script> without src, a <style> element, a style attribute, an
# inline event handler, a javascript: address, htmx's evaluated attributes, eval and its kin.
INLINE = re.compile(
    r"<script(?![^>]*\bsrc=)[^>]*>|<style\b|\sstyle=|\son[a-z]+=|javascript:|hx-on|hx-vars"
    r"|hx-vals=[\"']\s*(?:js|javascript):|\beval\(|new Function\(|setTimeout\([\"']"
)


def inline_code(text: str) -> list[str]:
    return INLINE.findall(text)


def test_no_template_or_script_of_ours_needs_inline_code():
    files = [*(ROOT / "templates").rglob("*.html"), *(ROOT / "static" / "js").rglob("*.js")]
    assert len(files) > 40
    found = {
        str(path.relative_to(ROOT)): inline_code(path.read_text(encoding="utf-8")) for path in files
    }
    assert {path: hits for path, hits in found.items() if hits} == {}


def start(**env: str) -> subprocess.CompletedProcess:
    """Django's settings read in a fresh process, as a deployment starts."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SIAMWEB_", "DATABASE_"))}
    show = "import django; django.setup(); from django.conf import settings as s; "
    show += "print(s.SIAMWEB_CONTENT_SECURITY_POLICY)"
    return subprocess.run(
        [sys.executable, "-c", show],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "siamweb.settings", **env},
        capture_output=True,
        text=True,
    )


def test_the_policy_comes_from_the_environment_on_one_line(tmp_path):
    result = start(
        SIAMWEB_VAR_DIR=str(tmp_path),
        SIAMWEB_CONTENT_SECURITY_POLICY="default-src 'self';\n  img-src 'self' https:",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "default-src 'self'; img-src 'self' https:"


def test_an_empty_policy_stops_the_start(tmp_path):
    result = start(SIAMWEB_VAR_DIR=str(tmp_path), SIAMWEB_CONTENT_SECURITY_POLICY=" ")
    assert result.returncode != 0
    assert "SIAMWEB_CONTENT_SECURITY_POLICY must be a Content-Security-Policy" in result.stderr
