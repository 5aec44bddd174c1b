"""API tokens: the token and its user come from one plain-SQL read, and answer as DRF's own
TokenAuthentication does, field for field."""

from __future__ import annotations

from django.forms.models import model_to_dict
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.models import Taxonomy
from siamweb.authentication import TokenAuthentication
from siamweb.taxonomy_reads import taxonomy_get

API = "/api/v1"


def field_values(instance) -> dict:
    return {field.attname: getattr(instance, field.attname)
            for field in instance._meta.concrete_fields}  # fmt: skip


def test_a_token_is_read_with_its_user_as_the_orm_reads_them(curator):
    token = Token.objects.create(user=curator)
    user, found = TokenAuthentication().authenticate_credentials(token.key)
    expected = Token.objects.select_related("user").get(key=token.key)
    assert field_values(found) == field_values(expected)
    assert field_values(user) == field_values(expected.user)
    assert found.user is user
    assert user.date_joined.tzinfo is not None  # a datetime, converted as the ORM converts it
    assert not user._state.adding  # a row of the database, as .get() gives


def test_a_token_request_is_answered_as_its_user(api_client, curator):
    response = api_client.get(f"{API}/judgements", {"user": curator.username})
    assert response.status_code == 200


def test_an_unknown_token_is_a_401_that_says_so(curator):
    Token.objects.create(user=curator)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    response = client.get(f"{API}/taxonomies")
    assert response.status_code == 401
    assert response.json() == {"detail": "Invalid token."}


def test_the_token_of_a_deactivated_user_is_refused(curator):
    token = Token.objects.create(user=curator)
    curator.is_active = False
    curator.save()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    response = client.get(f"{API}/taxonomies")
    assert response.status_code == 401
    assert response.json() == {"detail": "User inactive or deleted."}


def test_a_taxonomy_is_read_by_its_slug_as_the_orm_reads_it(tiny_taxonomy):
    found = taxonomy_get("jobs")
    assert model_to_dict(found) == model_to_dict(Taxonomy.objects.get(slug="jobs"))
    assert field_values(found) == field_values(tiny_taxonomy)
    assert taxonomy_get("no-such-taxonomy") is None
