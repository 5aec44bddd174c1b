"""Who may do what, over every route the URL resolver knows (none hand-listed):

- anonymous users are refused everywhere but the health check, the login page and the icon;
- curators are refused every admin page and form and every admin operation of the API;
- a POST from a browser session without its CSRF token is refused, on pages and on the API.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.authtoken.models import Token
from rest_framework.permissions import SAFE_METHODS
from rest_framework.test import APIClient

from siamweb.web.permissions import CuratorReadsAdminWrites, IsAdmin

PUBLIC = {"healthz", "favicon.ico", "accounts/login/", "accounts/logout/"}
CONVERTER = re.compile(r"<(?:(\w+):)?(\w+)>")
VALUES = {"int": "1", "slug": "jobs", "str": "x", "path": "x/y"}
LOGIN = "/accounts/login/"


def _walk(patterns, prefix: str = ""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern))
        else:
            assert isinstance(pattern, URLPattern)
            yield prefix + str(pattern.pattern), pattern


def _url(route: str) -> str:
    return "/" + CONVERTER.sub(lambda m: VALUES[m.group(1) or "str"], route)


# Django's own admin site keeps its own login (tested below), and is not walked route by route.
ROUTES = [
    (route, p) for route, p in _walk(get_resolver().url_patterns) if not route.startswith("admin/")
]
PAGES = [(route, p) for route, p in ROUTES if not route.startswith("api/")]
API = [(route, p) for route, p in ROUTES if route.startswith("api/")]


def _api_methods(pattern: URLPattern) -> list[str]:
    view = pattern.callback.cls
    return [m for m in ("get", "post", "put", "patch", "delete") if hasattr(view, m)]


def _admin_only(pattern: URLPattern, method: str) -> bool:
    permissions = pattern.callback.cls.permission_classes
    return IsAdmin in permissions or (
        CuratorReadsAdminWrites in permissions and method.upper() not in SAFE_METHODS
    )


ADMIN_API = [
    (route, method)
    for route, pattern in API
    for method in _api_methods(pattern)
    if _admin_only(pattern, method)
]
ADMIN_PAGES = [route for route, pattern in PAGES if getattr(pattern.callback, "admin_only", False)]


def _refused_anonymous(response) -> bool:
    """A 401 or 403, or redirects that end on the login page (the home page goes by /review/)."""
    if response.redirect_chain:
        return response.redirect_chain[-1][0].startswith(LOGIN)
    return response.status_code in (401, 403)


@pytest.mark.parametrize("route", [route for route, _ in ROUTES if route not in PUBLIC])
def test_anonymous_users_are_refused(db, route):
    client = Client()
    answers = [client.get(_url(route), follow=True), client.post(_url(route), follow=True)]
    # a method the view does not take is a 405 before anything else; the other is refused
    assert all(_refused_anonymous(r) or r.status_code == 405 for r in answers), [
        (r.status_code, r.redirect_chain) for r in answers
    ]
    assert any(_refused_anonymous(r) for r in answers)


def test_the_public_routes_are_the_health_check_login_and_icon(db):
    assert Client().get("/healthz").status_code == 200
    assert Client().get(LOGIN).status_code == 200
    assert {route for route, _ in ROUTES} >= PUBLIC


def test_the_admin_site_sends_anonymous_users_and_curators_to_its_login(client, curator):
    assert client.get("/admin/")["Location"].startswith("/admin/login/")
    client.force_login(curator)
    assert client.get("/admin/")["Location"].startswith("/admin/login/")


def test_the_admin_actions_are_all_found():
    """The enumeration is not vacuous: every admin action the product has is among them."""
    assert {
        "taxonomies/",
        "taxonomies/<slug:slug>/groups/new",
        "taxonomies/<slug:slug>/groups/<str:code>/rename",
        "taxonomies/<slug:slug>/groups/<str:code>/merge",
        "taxonomies/<slug:slug>/groups/<str:code>/members/add",
        "taxonomies/<slug:slug>/groups/<str:code>/members/<int:member_id>/move",
        "taxonomies/<slug:slug>/groups/<str:code>/members/<int:member_id>/remove",
        "models/<slug:slug>/finetune",
        "models/versions/<int:version_id>/rollback",
        "models/runs/<int:run_id>/promote",
        "models/runs/<int:run_id>/retry",
        "review/conflicts/",
        "review/conflicts/<int:item_id>/resolve",
        "audit/",
    } <= set(ADMIN_PAGES)
    assert {
        ("api/v1/taxonomies/<slug:slug>/groups", "post"),
        ("api/v1/groups/<int:group_id>", "patch"),
        ("api/v1/groups/<int:group_id>/merge", "post"),
        ("api/v1/taxonomies/<slug:slug>/members", "post"),
        ("api/v1/members/<int:member_id>", "patch"),
        ("api/v1/members/<int:member_id>", "delete"),
        ("api/v1/model-versions/<int:version_id>/activate", "post"),
        ("api/v1/model-versions/<int:version_id>/rollback", "post"),
        ("api/v1/training-runs", "post"),
        ("api/v1/training-runs/<int:run_id>/promote", "post"),
        ("api/v1/training-runs/<int:run_id>/retry", "post"),
    } <= set(ADMIN_API)


@pytest.mark.parametrize("route", ADMIN_PAGES)
def test_curators_are_refused_every_admin_page_and_form(client, curator, route):
    client.force_login(curator)
    answers = [client.get(_url(route)), client.post(_url(route), {"name": "x", "code": "x"})]
    assert all(r.status_code in (403, 405) for r in answers), [r.status_code for r in answers]
    assert any(r.status_code == 403 for r in answers)


@pytest.mark.parametrize(("route", "method"), ADMIN_API)
def test_curators_are_refused_every_admin_operation_of_the_api(curator, route, method):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=curator).key}")
    response = getattr(client, method)(_url(route), {}, format="json")
    assert response.status_code == 403
    assert response.json() == {"detail": "admins only"}


@pytest.mark.parametrize("route", [route for route, _ in PAGES])
def test_a_page_post_without_its_csrf_token_is_refused(admin_user, route):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    response = client.post(_url(route), {"name": "x"})
    assert response.status_code == 403
    assert b"CSRF" in response.content


@pytest.mark.parametrize(
    ("route", "method"),
    [
        (route, method)
        for route, pattern in API
        for method in _api_methods(pattern)
        if method != "get"
    ],
)
def test_an_api_write_from_a_session_without_its_csrf_token_is_refused(admin_user, route, method):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    response = getattr(client, method)(_url(route), "{}", content_type="application/json")
    assert response.status_code == 403
    assert response.json()["detail"].startswith("CSRF Failed")


def test_a_post_with_its_csrf_token_gets_past_the_check(admin_user):
    """The refusals above are the CSRF check's, not something any POST gets."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    page = client.get("/taxonomies/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())
    response = client.post("/taxonomies/", {"csrfmiddlewaretoken": token.group(1)})
    assert response.status_code != 403
