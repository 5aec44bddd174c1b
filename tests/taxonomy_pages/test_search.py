"""One taxonomy's page: its groups searched as you type (bounded, a fixed number of queries), and a
new group created in place."""

from __future__ import annotations

import html

import pytest

from annotations.models import Group
from annotations.services.review.auto_coding import auto_coding_set
from annotations.services.taxonomy_edit.guidelines import taxonomy_guidelines_update
from annotations.views import taxonomy as views_taxonomy
from tests.taxonomy_pages.conftest import BARISTAS, DEVS, HTMX, NURSES, group, member, snapshot


def test_the_taxonomy_page_lists_groups_with_member_counts(client, tiny_taxonomy, admin_user):
    client.force_login(admin_user)
    response = client.get("/taxonomies/jobs/")
    assert response.status_code == 200
    groups = response.context["matches"].groups
    assert [(g.code, g.member_count) for g in groups][:2] == [("13-2011", 4), (DEVS, 5)]
    page = response.content.decode()
    assert f'href="/taxonomies/jobs/groups/{DEVS}/"' in page
    assert 'href="/taxonomies/jobs/export.csv"' in page


def test_searching_as_you_type_returns_just_the_matching_rows(client, tiny_taxonomy, admin_user):
    client.force_login(admin_user)
    response = client.get("/taxonomies/jobs/", {"q": "nurs"}, **HTMX)
    assert response.status_code == 200
    assert b"<html" not in response.content
    assert [g.code for g in response.context["matches"].groups] == [NURSES]
    # An exact string finds the group that holds it, though its name does not match.
    response = client.get("/taxonomies/jobs/", {"q": "long haul TRUCKER"}, **HTMX)
    assert [g.code for g in response.context["matches"].groups] == ["53-3032"]
    # A code prefix.
    response = client.get("/taxonomies/jobs/", {"q": "35-"}, **HTMX)
    assert [g.code for g in response.context["matches"].groups] == [BARISTAS]


def test_search_results_are_bounded_and_cost_a_fixed_number_of_queries(
    client, tiny_taxonomy, admin_user, django_assert_max_num_queries
):
    Group.objects.bulk_create(
        [
            Group(taxonomy=tiny_taxonomy, code=f"90-{i:04d}", name=f"Widget maker {i}")
            for i in range(3000)
        ]
    )
    client.force_login(admin_user)
    with django_assert_max_num_queries(8):
        response = client.get("/taxonomies/jobs/", {"q": "widget"}, **HTMX)
    matches = response.context["matches"]
    assert len(matches.groups) == views_taxonomy.SEARCH_RESULTS
    assert matches.more
    assert "More groups match" in response.content.decode()


def test_an_admin_creates_a_group_with_a_dotted_code_and_lands_on_its_page(
    client, tiny_taxonomy, admin_user
):
    client.force_login(admin_user)
    response = client.post(
        "/taxonomies/jobs/groups/new", {"code": "15-1253.00", "name": "Testers"}, **HTMX
    )
    assert response.status_code == 200
    assert response["HX-Redirect"] == "/taxonomies/jobs/groups/15-1253.00/"
    assert group("15-1253.00").name == "Testers"
    page = client.get("/taxonomies/jobs/groups/15-1253.00/")
    assert page.status_code == 200
    assert "No strings in this group yet." in page.content.decode()


def test_a_duplicate_group_code_is_a_400_in_place(client, tiny_taxonomy, admin_user):
    client.force_login(admin_user)
    before = snapshot()
    response = client.post("/taxonomies/jobs/groups/new", {"code": DEVS, "name": "X"}, **HTMX)
    assert response.status_code == 400
    assert f"code: code {DEVS} is already taken in jobs" in response.content.decode()
    assert snapshot() == before


@pytest.mark.parametrize("code", [".", "..", " .. "])
def test_a_dot_segment_code_is_a_400_in_place_naming_the_code(
    client, tiny_taxonomy, admin_user, code
):
    """A browser would open /groups/./ as /groups/ and /groups/../ as the taxonomy's page."""
    client.force_login(admin_user)
    before = snapshot()
    response = client.post("/taxonomies/jobs/groups/new", {"code": code, "name": "Dots"}, **HTMX)
    assert response.status_code == 400
    message = f"code {code.strip()!r} may not be '.' or '..'"
    assert message in html.unescape(response.content.decode())
    assert snapshot() == before


def test_unknown_taxonomies_and_groups_are_404(client, tiny_taxonomy, admin_user):
    client.force_login(admin_user)
    assert client.get("/taxonomies/nope/").status_code == 404
    assert client.get("/taxonomies/jobs/groups/99-9999/").status_code == 404
    other = member("Coffee Maker").id
    assert client.get(f"/taxonomies/jobs/groups/{DEVS}/members/{other}/move").status_code == 404


def test_a_refused_new_group_without_htmx_shows_the_whole_page_as_stored(
    client, tiny_taxonomy, admin_user
):
    """The page's other forms are filled from what is stored: saved from a page missing them,
    the guidelines would be blanked and auto-coding switched off."""
    taxonomy_guidelines_update(taxonomy=tiny_taxonomy, text="Pick **drivers** by CDL.",
                               user=admin_user)  # fmt: skip
    auto_coding_set(taxonomy=tiny_taxonomy, target_precision=0.95, audit_share=0.05,
                    user=admin_user)  # fmt: skip
    client.force_login(admin_user)
    before = snapshot()
    response = client.post("/taxonomies/jobs/groups/new", {"code": DEVS, "name": "X"})
    assert response.status_code == 400
    page = html.unescape(response.content.decode())
    assert f"code: code {DEVS} is already taken in jobs" in page
    assert response.context["guidelines_text"] == "Pick **drivers** by CDL."
    assert response.context["auto_coding_fields"]["target_precision"] == "95"
    assert "Off: every answer waits for review." not in page
    assert snapshot() == before
