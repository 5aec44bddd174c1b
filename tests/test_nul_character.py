"""A NUL character in an address, a parameter or a form is bad input: a 400, whatever the
database (PostgreSQL refuses a NUL even in a lookup, which was a 500)."""

from __future__ import annotations

import json

import pytest
from django.db import DataError
from django.test import RequestFactory

from annotations.models import Group
from siamweb.middleware import NUL_DETAIL, TransientDatabaseErrorMiddleware

BARISTAS = "35-3023"


@pytest.mark.parametrize(
    "address",
    [
        "/review/batch/jobs/a%00b/",  # a path segment looked up as a group's code
        f"/taxonomies/jobs/groups/{BARISTAS}%00/",
    ],
)
def test_a_page_address_holding_a_nul_is_a_400(client, tiny_taxonomy, admin_user, address):
    client.force_login(admin_user)
    response = client.get(address)
    assert response.status_code == 400
    assert response.content.decode() == NUL_DETAIL


def test_an_api_address_holding_a_nul_is_a_json_400(api_client, tiny_taxonomy):
    response = api_client.get("/api/v1/taxonomies/jobs%00")
    assert response.status_code == 400
    assert response.json() == {"detail": NUL_DETAIL}


def test_a_nul_in_a_pages_parameter_or_form_is_refused_and_changes_nothing(
    client, tiny_taxonomy, admin_user
):
    """Looked up as it is: PostgreSQL refuses it (a 400 saying so), SQLite finds nothing (the
    page's own refusal); never a 500."""
    client.force_login(admin_user)
    assert client.get("/review/conflicts/?taxonomy=%00").status_code == 400
    before = sorted(Group.objects.values_list("code", "name"))
    response = client.post(f"/taxonomies/jobs/groups/{BARISTAS}/merge", {"into": "29-1141\x00"})
    assert response.status_code == 400
    assert sorted(Group.objects.values_list("code", "name")) == before


def test_a_nul_only_the_database_caught_is_a_400_too():
    """A value an API view looks up before its serializer reads it: PostgreSQL's refusal."""
    middleware = TransientDatabaseErrorMiddleware(lambda request: None)
    refused = DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
    api = middleware.process_exception(RequestFactory().get("/api/v1/groups/1"), refused)
    assert (api.status_code, json.loads(api.content)) == (400, {"detail": NUL_DETAIL})
    page = middleware.process_exception(RequestFactory().get("/review/"), refused)
    assert (page.status_code, page.content.decode()) == (400, NUL_DETAIL)
    # Any other data error stays an error.
    other = DataError("value too long for type character varying(500)")
    assert middleware.process_exception(RequestFactory().get("/review/"), other) is None
