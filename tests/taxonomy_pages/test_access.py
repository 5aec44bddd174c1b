"""The taxonomy administration pages are for admins only: anonymous visitors are sent to log in,
curators get 403 and change nothing."""

from __future__ import annotations

from tests.taxonomy_pages.conftest import BARISTAS, GOOD_CSV, NURSES, csv_upload, member, snapshot


def pages(member_id: int) -> list[tuple[str, str, dict]]:
    """Every page and form of the area, as (method, url, data)."""
    group_url = f"/taxonomies/jobs/groups/{BARISTAS}/"
    member_url = f"{group_url}members/{member_id}/"
    return [
        ("get", "/taxonomies/", {}),
        ("post", "/taxonomies/", {"slug": "new", "format": "csv", "file": csv_upload(GOOD_CSV)}),
        ("get", "/taxonomies/jobs/", {}),
        ("get", "/taxonomies/jobs/export.csv", {}),
        ("post", "/taxonomies/jobs/groups/new", {"code": "99-1", "name": "New"}),
        ("get", group_url, {}),
        ("post", "/taxonomies/jobs/auto-coding", {"target_precision": "95"}),
        ("post", f"{group_url}rename", {"name": "Coffee people"}),
        ("get", f"{group_url}merge?into={NURSES}", {}),
        ("post", f"{group_url}merge", {"into": NURSES}),
        ("get", f"{group_url}targets?purpose=merge&q=nurse", {}),
        ("post", f"{group_url}members/add", {"text": "Latte Artist"}),
        ("get", f"{member_url}move", {}),
        ("post", f"{member_url}move", {"group_code": NURSES}),
        ("get", f"{member_url}remove", {}),
        ("post", f"{member_url}remove", {}),
        ("get", "/audit/", {}),
    ]


def test_every_page_and_form_sends_anonymous_visitors_to_log_in(client, tiny_taxonomy):
    before = snapshot()
    for method, url, data in pages(member("Coffee Maker").id):
        response = getattr(client, method)(url, data)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/?next="), url
    assert snapshot() == before


def test_a_curator_gets_403_on_every_page_and_form_and_changes_nothing(
    client, tiny_taxonomy, curator
):
    client.force_login(curator)
    before = snapshot()
    for method, url, data in pages(member("Coffee Maker").id):
        response = getattr(client, method)(url, data)
        assert response.status_code == 403, url
    assert snapshot() == before
