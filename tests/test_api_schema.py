"""The API describes itself: an OpenAPI 3 schema of every endpoint, and a docs page that loads
its assets from our own static files."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

ROOT = Path(__file__).resolve().parent.parent

ENDPOINTS = {
    "/api/v1/taxonomies": {"get"},
    "/api/v1/taxonomies/{slug}": {"get"},
    "/api/v1/taxonomies/{slug}/groups": {"get", "post"},
    "/api/v1/taxonomies/{slug}/members": {"get", "post"},
    "/api/v1/taxonomies/{slug}/normalize": {"post"},
    "/api/v1/taxonomies/{slug}/inputs": {"get", "post"},
    "/api/v1/groups/{group_id}": {"get", "patch"},
    "/api/v1/groups/{group_id}/merge": {"post"},
    "/api/v1/members/{member_id}": {"get", "patch", "delete"},
    "/api/v1/review-items": {"get"},
    "/api/v1/review-items/{item_id}": {"get"},
    "/api/v1/review-items/claim": {"post"},
    "/api/v1/review-items/{item_id}/release": {"post"},
    "/api/v1/judgements": {"get", "post"},
    "/api/v1/judgements/{judgement_id}": {"get"},
    "/api/v1/judgements/{judgement_id}/undo": {"post"},
    "/api/v1/review-items/{item_id}/flags": {"post"},
    "/api/v1/review-flags": {"get"},
    "/api/v1/review-flags/{flag_id}/resolve": {"post"},
    "/api/v1/feedback-pairs": {"get"},
    "/api/v1/model-versions": {"get"},
    "/api/v1/model-versions/{version_id}": {"get"},
    "/api/v1/model-versions/{version_id}/activate": {"post"},
    "/api/v1/model-versions/{version_id}/rollback": {"post"},
    "/api/v1/training-runs": {"get", "post"},
    "/api/v1/training-runs/{run_id}": {"get"},
    "/api/v1/training-runs/{run_id}/promote": {"post"},
    "/api/v1/training-runs/{run_id}/retry": {"post"},
}
HTTP_METHODS = {"get", "put", "patch", "post", "delete", "head", "options"}


@pytest.fixture
def schema(api_client) -> dict:
    response = api_client.get("/api/v1/schema", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return response.json()


def test_the_schema_is_valid_openapi_3(schema):
    assert schema["openapi"].startswith("3.")
    validate_schema(schema)  # raises on anything the OpenAPI 3 specification forbids


def test_the_schema_lists_every_endpoint_with_its_methods(schema):
    listed = {
        path: {method for method in operations if method in HTTP_METHODS}
        for path, operations in schema["paths"].items()
    }
    assert listed == ENDPOINTS


def test_every_operation_needs_a_token_or_a_session(schema):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert operation["security"] == [{"tokenAuth": []}, {"cookieAuth": []}], (path, method)


def test_lists_document_their_pagination(schema):
    groups = schema["paths"]["/api/v1/taxonomies/{slug}/groups"]["get"]
    assert {p["name"] for p in groups["parameters"]} >= {"page", "q", "slug"}
    queue = schema["paths"]["/api/v1/review-items"]["get"]
    assert {p["name"] for p in queue["parameters"]} >= {"cursor", "group", "status", "taxonomy"}


def test_the_judgement_endpoint_documents_the_idempotency_header(schema):
    create = schema["paths"]["/api/v1/judgements"]["post"]
    (header,) = [p for p in create["parameters"] if p["in"] == "header"]
    assert header["name"] == "Idempotency-Key"
    assert {"200", "201", "400", "409"} <= set(create["responses"])


def test_the_schema_and_docs_need_a_signed_in_user(db):
    assert APIClient().get("/api/v1/schema").status_code == 401
    assert APIClient().get("/api/v1/docs").status_code == 401


def test_the_docs_page_loads_its_assets_from_our_static_files(client, curator):
    client.force_login(curator)
    response = client.get("/api/v1/docs")
    assert response.status_code == 200
    html = response.content.decode()
    assert "/api/v1/schema" in html
    assert not re.search(r"https?://", html)
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert assets
    for asset in assets:
        assert asset.startswith(settings.STATIC_URL) and settings.STATIC_URL == "/static/"
        assert finders.find(asset.removeprefix(settings.STATIC_URL)), asset


def test_the_schema_generates_without_warnings():
    """What CI runs: ``manage.py spectacular --validate --fail-on-warn``, in a fresh process."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "siamweb.settings_test"}
    result = subprocess.run(
        [sys.executable, "manage.py", "spectacular", "--validate", "--fail-on-warn"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "openapi: 3" in result.stdout
