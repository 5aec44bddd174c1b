"""The API describes itself: an OpenAPI 3 schema of every endpoint, and a docs page that loads
its assets from our own static files."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import jsonschema_rs
import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

from annotations.models import Taxonomy

ROOT = Path(__file__).resolve().parent.parent

ENDPOINTS = {
    "/api/v1/taxonomies": {"get", "post"},
    "/api/v1/taxonomies/{slug}": {"get"},
    "/api/v1/taxonomies/{slug}/groups": {"get", "post"},
    "/api/v1/taxonomies/{slug}/members": {"get", "post"},
    "/api/v1/taxonomies/{slug}/normalize": {"post"},
    "/api/v1/taxonomies/{slug}/vouching": {"get"},
    "/api/v1/taxonomies/{slug}/auto-coding": {"get", "put"},
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
    "/api/v1/training-runs/{run_id}/cancel": {"post"},
    "/api/v1/bulk-jobs": {"get", "post"},
    "/api/v1/bulk-jobs/{job_id}": {"get", "delete"},
    "/api/v1/bulk-jobs/{job_id}/cancel": {"post"},
    "/api/v1/bulk-jobs/{job_id}/retry": {"post"},
    "/api/v1/bulk-jobs/{job_id}/result.csv": {"get"},
    "/api/v1/bulk-jobs/{job_id}/result.jsonl": {"get"},
    "/api/v1/account/signed-in": {"get"},
    "/api/v1/account/token": {"get", "delete"},
    "/api/v1/account/token/rotate": {"post"},
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


def test_the_bulk_results_document_their_own_content_types(schema):
    for kind, media_type in (("csv", "text/csv"), ("jsonl", "application/x-ndjson")):
        responses = schema["paths"][f"/api/v1/bulk-jobs/{{job_id}}/result.{kind}"]["get"][
            "responses"
        ]
        assert list(responses["200"]["content"]) == [media_type]
        assert list(responses["409"]["content"]) == ["application/json"]


def test_the_schema_and_docs_need_a_signed_in_user(db):
    assert APIClient().get("/api/v1/schema").status_code == 401
    assert APIClient().get("/api/v1/docs").status_code == 401


def test_the_docs_page_loads_its_assets_from_our_static_files(client, curator):
    client.force_login(curator)
    response = client.get("/api/v1/docs")
    assert response.status_code == 200
    html = response.content.decode()
    assert not re.search(r"https?://", html)
    # Swagger UI's start-up script comes from the page's own address, and reads the schema.
    script = client.get("/api/v1/docs?script=")
    assert script["Content-Type"] == "application/javascript"
    assert "/api/v1/schema" in script.content.decode()
    # Every asset, that is: not the links back to the app and to the token page, nor the script.
    links = {"/", "/accounts/token/", "/api/v1/docs?script="}
    assets = [a for a in re.findall(r'(?:src|href)="([^"]+)"', html) if a not in links]
    assert assets
    for asset in assets:
        assert asset.startswith(settings.STATIC_URL) and settings.STATIC_URL == "/static/"
        assert finders.find(asset.removeprefix(settings.STATIC_URL)), asset


def test_the_docs_page_links_back_to_the_app(client, curator):
    client.force_login(curator)
    html = client.get("/api/v1/docs").content.decode()
    assert (
        '<nav class="siamweb-back" data-testid="api-docs-back"><a href="/">← Back to Siamweb</a>'
        in html
    )
    assert 'id="swagger-ui"' in html


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


# --- the schema states what the server enforces ---------------------------------------------


def _component(schema: dict, name: str) -> dict:
    return schema["components"]["schemas"][name]


def test_the_schema_states_the_request_limits_the_settings_set(api_client, settings):
    settings.SIAMWEB_MAX_TEXTS_PER_REQUEST = 7
    settings.SIAMWEB_MAX_TEXT_LENGTH = 30
    settings.SIAMWEB_MAX_K = 9
    schema = api_client.get("/api/v1/schema", HTTP_ACCEPT="application/json").json()
    for name in ("NormalizeApiInput", "InputListSubmitApiSubmitInput"):
        texts = _component(schema, name)["properties"]["texts"]
        assert (texts["minItems"], texts["maxItems"]) == (1, 7)
        assert (texts["items"]["minLength"], texts["items"]["maxLength"]) == (1, 30)
        k = _component(schema, name)["properties"]["k"]
        assert (k["minimum"], k["maximum"]) == (1, 9)
    member = _component(schema, "MemberListCreateApiCreateInput")["properties"]["text"]
    assert member["maxLength"] == 30


def test_the_text_pattern_is_the_rule_clean_text_applies(schema):
    pattern = _component(schema, "NormalizeApiInput")["properties"]["texts"]["items"]["pattern"]
    # A direction mark and a joiner are dropped, not refused: the text is accepted.
    for accepted in ("nurse", " welder ", "مهندس\u200f", "chef 👩\u200d🍳", "a\tb\nc"):
        assert re.search(pattern, accepted), accepted
    refused = ("", "   ", "\t\n", "\u3000", "bell\x07", "nul\x00", "\x85x", "\u200b\u200f")
    for text in (*refused, "a\u202bb", "a\u2062b", "\u3164"):
        assert not re.search(pattern, text), text
    # Refused beyond what the pattern can name: the description says so.
    description = _component(schema, "NormalizeApiInput")["properties"]["texts"]["items"]
    assert "U+D800-DFFF" in description["description"]
    assert "U+E0020-E007F" in description["description"]


def _patterns(node):
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            yield node["pattern"]
        for value in node.values():
            yield from _patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from _patterns(value)


def test_every_pattern_compiles_where_a_generator_reads_it(schema):
    """schemathesis validates and generates with Rust's regex engine and dropped the text
    pattern on six operations when it could not compile it: the fuzz test then never sent the
    texts the rule refuses."""
    patterns = set(_patterns(schema))
    assert any("\\u202e" in pattern for pattern in patterns)  # the text rule's is among them
    is_a_regex = jsonschema_rs.Draft202012Validator({"format": "regex"}, validate_formats=True)
    for pattern in patterns:
        jsonschema_rs.Draft202012Validator({"type": "string", "pattern": pattern})
        assert is_a_regex.is_valid(pattern), pattern[:80]


def test_group_codes_names_and_the_idempotency_key_state_their_limits(schema):
    create = _component(schema, "GroupListCreateApiCreateInput")["properties"]
    assert create["code"]["maxLength"] == 64 and "/" in create["code"]["pattern"]
    assert "neither '.' nor '..'" in create["code"]["description"]
    assert create["name"]["maxLength"] == 300
    rename = _component(schema, "GroupDetailApiRenameInput")
    assert rename["required"] == ["name"]  # a PATCH body is whole, not partial
    create_judgement = schema["paths"]["/api/v1/judgements"]["post"]
    (header,) = [p for p in create_judgement["parameters"] if p["in"] == "header"]
    assert header["schema"]["maxLength"] == 100


def test_path_ids_and_slugs_are_described_as_the_urls_match_them(schema):
    parameters = [
        parameter
        for operations in schema["paths"].values()
        for operation in operations.values()
        for parameter in operation.get("parameters", [])
        if parameter["in"] == "path"
    ]
    assert parameters
    for parameter in parameters:
        if parameter["name"] == "slug":
            assert parameter["schema"]["pattern"] == "^[-a-zA-Z0-9_]+$"
        else:
            assert parameter["schema"] == {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}


def test_every_operation_documents_its_errors_as_json(schema):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            assert {"401", "406", "429", "503"} <= set(responses), (path, method)
            if "{" in path:
                assert "404" in responses, (path, method)
            if "requestBody" in operation:
                assert {"400", "415"} <= set(responses), (path, method)
            for code, response in responses.items():
                if code >= "400":
                    assert list(response["content"]) == ["application/json"], (path, method)


def test_admin_operations_document_403(schema):
    assert "403" in schema["paths"]["/api/v1/groups/{group_id}/merge"]["post"]["responses"]
    assert "403" in schema["paths"]["/api/v1/training-runs"]["post"]["responses"]
    assert "403" in schema["paths"]["/api/v1/judgements"]["post"]["responses"]  # curators only
    # any signed-in user may normalize
    assert "403" not in schema["paths"]["/api/v1/taxonomies/{slug}/normalize"]["post"]["responses"]


def test_an_uploaded_file_is_described_as_the_bytes_of_a_multipart_part(schema):
    body = schema["paths"]["/api/v1/bulk-jobs"]["post"]["requestBody"]["content"]
    ref = body["multipart/form-data"]["schema"]["$ref"].rpartition("/")[2]
    assert _component(schema, ref)["properties"]["file"]["format"] == "binary"


def _inlined(schema: dict, node):
    """``node`` with every ``$ref`` to a component replaced by the component itself."""
    if isinstance(node, dict):
        if "$ref" in node:
            return _inlined(schema, _component(schema, node["$ref"].rpartition("/")[2]))
        return {key: _inlined(schema, value) for key, value in node.items()}
    if isinstance(node, list):
        return [_inlined(schema, value) for value in node]
    return node


def test_a_bare_comment_flag_needs_its_comment_in_the_schema_as_on_the_server(schema):
    operation = schema["paths"]["/api/v1/review-items/{item_id}/flags"]["post"]
    body = _inlined(schema, operation["requestBody"]["content"]["application/json"]["schema"])
    accepted = [
        {"kind": "comment", "comment": "is this a nurse?"},
        {"kind": "unsure"},
        {"kind": "taxonomy_gap", "comment": ""},
        {"kind": "unsure", "comment": "line one\nline two"},
    ]
    for request in accepted:
        jsonschema.validate(request, body)
    # What the server answers 400 (naming comment) the schema refuses too.
    for request in ({"kind": "comment"}, {"kind": "comment", "comment": " \t "}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(request, body)
    assert {"200", "201", "400"} <= set(operation["responses"])


def test_the_token_endpoints_document_their_answers(schema):
    read = schema["paths"]["/api/v1/account/token"]["get"]["responses"]
    assert {"200", "401", "404", "429"} <= set(read)
    facts = _inlined(schema, read["200"]["content"]["application/json"]["schema"])
    assert set(facts["properties"]) == {"created", "expires"}  # never the key
    revoke = schema["paths"]["/api/v1/account/token"]["delete"]["responses"]
    assert {"204", "401", "404", "429"} <= set(revoke)
    rotate = schema["paths"]["/api/v1/account/token/rotate"]["post"]["responses"]
    assert {"201", "401", "429"} <= set(rotate)
    made = _inlined(schema, rotate["201"]["content"]["application/json"]["schema"])
    assert set(made["properties"]) == {"key", "created", "expires"}


def test_the_conflicts_of_texts_without_a_live_model_name_the_taxonomy(schema, api_client, db):
    Taxonomy.objects.create(slug="bare", name="Bare")
    for path in ("normalize", "inputs"):
        documented = schema["paths"][f"/api/v1/taxonomies/{{slug}}/{path}"]["post"]["responses"]
        assert documented["409"]["content"]["application/json"]["schema"] == {
            "type": "object",
            "additionalProperties": {},
        }
        response = api_client.post(
            f"/api/v1/taxonomies/bare/{path}", {"texts": ["x"]}, format="json"
        )
        assert response.status_code == 409
        assert list(response.json()) == ["taxonomy"]


def test_a_normalize_answer_has_no_field_the_schema_leaves_out(api_client, schema, tiny_taxonomy):
    """A client generated from the schema sees every field the API answers with."""
    response = api_client.post(
        "/api/v1/taxonomies/jobs/normalize", {"texts": ["java developer"], "k": 3}, format="json"
    )
    (result,) = response.json()["results"]
    output = schema["paths"]["/api/v1/taxonomies/{slug}/normalize"]["post"]["responses"]["200"]
    envelope = output["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    result_ref = _component(schema, envelope)["properties"]["results"]["items"]["$ref"]
    result_schema = _component(schema, result_ref.rsplit("/", 1)[1])
    group_ref = result_schema["properties"]["groups"]["items"]["$ref"]
    group_schema = _component(schema, group_ref.rsplit("/", 1)[1])
    assert set(result) == set(result_schema["properties"])
    assert result["groups"] and all(
        set(g) == set(group_schema["properties"]) for g in result["groups"]
    )
