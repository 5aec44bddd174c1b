"""Fuzzing of the whole API: schemathesis generates requests from the OpenAPI schema, valid and
invalid, for every operation, as an admin and as a curator, and sends them to the app in process.

Every response must be no 5xx, a status code the schema documents, a content type it declares and
a body that matches; a schema-valid request must not be refused as bad input, and a schema-invalid
one must be. The example count is bounded (and generation deterministic) so the tier runs in the
default test run: ``pytest -m fuzz`` runs it alone, ``FUZZ_EXAMPLES`` asks for more.
"""

from __future__ import annotations

import json
import os
import re

import pytest
import schemathesis
from django.core import signals
from django.core.handlers.wsgi import WSGIHandler
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from rest_framework.authtoken.models import Token
from schemathesis.checks import positive_data_acceptance
from schemathesis.config import SchemathesisConfig

from annotations.models import Input
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.leases import review_item_claim
from annotations.services.review.verdicts import judgement_create

pytestmark = pytest.mark.fuzz

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
CONFIG = SchemathesisConfig.from_dict(
    {
        "generation": {"max-examples": EXAMPLES, "deterministic": True},
        # A request a millisecond too slow is not what this tier looks for.
        "suppress-health-check": ["all"],
    }
)

# The schema as the server generates it for /api/v1/schema (it is the same for every user).
schema = schemathesis.openapi.from_dict(
    SchemaGenerator().get_schema(request=None, public=True), config=CONFIG
)
schema.app = WSGIHandler()

# The refusals of a schema-valid request the schema cannot state: an id or slug that names no row
# (DRF's words for it), as it depends on what the database holds; a range whose two ends, each
# valid, are the wrong way round (OpenAPI cannot relate two fields); a group code that is a dot
# segment ("." or "..", which the schema's description states); and an uploaded file whose
# content is not a readable CSV or text file.
REFUSED_BEYOND_THE_SCHEMA = re.compile(
    r"does not exist\.?$|^must not exceed score_max$|may not be '\.' or '\.\.'"
)
FILE_FIELDS = {
    name
    for component in schema.raw_schema["components"]["schemas"].values()
    for name, field in component.get("properties", {}).items()
    if field.get("format") == "binary"
}


def _messages(body: object) -> list[str]:
    if isinstance(body, dict):
        return [message for value in body.values() for message in _messages(value)]
    if isinstance(body, list):
        return [message for value in body for message in _messages(value)]
    return [str(body)]


def positive_data_acceptance_but_unknown_references(ctx, response, case):
    """Schema-valid data is accepted, unless all it got wrong is naming an object that is not
    there (a random id or slug), a range the wrong way round, or a file that holds no texts."""
    if response.status_code == 400:
        errors = json.loads(response.content)
        if isinstance(errors, dict):
            errors = {field: e for field, e in errors.items() if field not in FILE_FIELDS}
        messages = _messages(errors)
        if all(REFUSED_BEYOND_THE_SCHEMA.search(message) for message in messages):
            return None
    return positive_data_acceptance(ctx, response, case)


@pytest.fixture(autouse=True)
def _one_connection_for_the_test():
    """Requests go through Django's WSGI handler, which closes the connection when a request
    starts and ends; the test's transaction lives on it, so (as Django's test client does) the
    handler leaves it open."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture(params=["admin", "curator"])
def token(request, admin_user, curator, tiny_taxonomy) -> str:
    """A taxonomy with a live model, review items and a verdict; the token of one role."""
    inputs_submit(
        taxonomy=tiny_taxonomy, texts=["nurse", "welder", "teacher"], source=Input.Source.API
    )
    item = review_item_claim(user=curator)
    judgement_create(review_item=item, user=curator, verdict="confirm", group=None)
    user = admin_user if request.param == "admin" else curator
    return Token.objects.get_or_create(user=user)[0].key


@schema.parametrize()
def test_every_response_matches_the_schema(case, token):
    case.call_and_validate(
        headers={"Authorization": f"Token {token}"},
        excluded_checks=[positive_data_acceptance],
        additional_checks=[positive_data_acceptance_but_unknown_references],
    )
