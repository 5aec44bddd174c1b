"""One group's page: its strings, paginated, and the edits on them (add, move, remove, rename,
merge), each error shown in place naming the field."""

from __future__ import annotations

import pytest

from annotations.models import AuditEvent, Group, Member
from annotations.services.taxonomy_edit.groups import group_create
from tests.taxonomy_pages.conftest import BARISTAS, DEVS, HTMX, NURSES, group, member, snapshot


def texts_of(code: str) -> list[str]:
    return sorted(group(code).members.values_list("text", flat=True))


def test_the_group_page_shows_each_string_with_its_source_and_who_added_it(
    client, tiny_taxonomy, admin_user
):
    client.force_login(admin_user)
    client.post(f"/taxonomies/jobs/groups/{BARISTAS}/members/add", {"text": "Latte Artist"})
    response = client.get(f"/taxonomies/jobs/groups/{BARISTAS}/")
    assert response.status_code == 200
    rows = {m.text: m for m in response.context["members"]}
    assert sorted(rows) == texts_of(BARISTAS)
    page = response.content.decode()
    assert "Latte Artist" in page
    assert "Admin edit" in page and "Taxonomy import" in page
    assert ">ada<" in page


def test_a_big_group_is_paginated(client, tiny_taxonomy, admin_user):
    baristas = group(BARISTAS)
    Member.objects.bulk_create(
        [
            Member(
                taxonomy=tiny_taxonomy,
                group=baristas,
                text=f"Barista {i:03d}",
                normalized_text=f"barista {i:03d}",
            )
            for i in range(150)
        ]
    )
    client.force_login(admin_user)
    first = client.get(f"/taxonomies/jobs/groups/{BARISTAS}/")
    assert len(first.context["members"]) == 100
    assert "Page 1 of 2" in first.content.decode()
    second = client.get(f"/taxonomies/jobs/groups/{BARISTAS}/", {"page": 2}, **HTMX)
    assert len(second.context["members"]) == 54


def test_the_group_page_costs_a_fixed_number_of_queries(
    client, tiny_taxonomy, admin_user, curator, django_assert_max_num_queries
):
    baristas = group(BARISTAS)
    Member.objects.bulk_create(
        [
            Member(
                taxonomy=tiny_taxonomy,
                group=baristas,
                text=f"Barista {i:03d}",
                normalized_text=f"barista {i:03d}",
                source=Member.Source.CURATOR,
                added_by=curator if i % 2 else admin_user,
            )
            for i in range(120)
        ]
    )
    client.force_login(admin_user)
    with django_assert_max_num_queries(9):
        response = client.get(f"/taxonomies/jobs/groups/{BARISTAS}/")
    assert response.status_code == 200


def test_adding_a_string_with_htmx_returns_the_panel_with_it(client, tiny_taxonomy, admin_user):
    client.force_login(admin_user)
    response = client.post(
        f"/taxonomies/jobs/groups/{BARISTAS}/members/add", {"text": " Latte  Artist "}, **HTMX
    )
    assert response.status_code == 200
    assert b"<html" not in response.content
    assert "Added “Latte Artist”." in response.content.decode()
    added = member("Latte Artist")
    assert (added.group.code, added.source, added.added_by) == (BARISTAS, "admin", admin_user)


def test_adding_a_string_another_group_has_says_so(client, tiny_taxonomy, admin_user):
    client.force_login(admin_user)
    response = client.post(
        f"/taxonomies/jobs/groups/{BARISTAS}/members/add", {"text": "staff nurse"}, **HTMX
    )
    assert response.status_code == 200
    assert f"also in {NURSES} Registered Nurses" in response.content.decode()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "text: text is empty"),
        ("coffee maker", "text: &#x27;coffee maker&#x27; is already in 35-3023"),
        ("x" * 201, "text: text is longer than 200"),
        ("bad\x00nul", "text: text contains control characters"),
    ],
)
def test_a_bad_string_is_a_400_in_place_naming_text(
    client, tiny_taxonomy, admin_user, text, message
):
    client.force_login(admin_user)
    before = snapshot()
    response = client.post(
        f"/taxonomies/jobs/groups/{BARISTAS}/members/add", {"text": text}, **HTMX
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert message in page
    assert 'data-testid="add-error"' in page
    assert snapshot() == before


def test_moving_a_string_asks_for_the_target_then_moves_it(client, tiny_taxonomy, admin_user):
    client.force_login(admin_user)
    moving = member("Coffee Shop Server")
    base = f"/taxonomies/jobs/groups/{BARISTAS}/members/{moving.id}/move"
    panel = client.get(base, **HTMX)
    assert panel.status_code == 200
    assert "Move “Coffee Shop Server” to another group" in panel.content.decode()

    targets = client.get(
        f"/taxonomies/jobs/groups/{BARISTAS}/targets",
        {"purpose": "move", "member": moving.id, "q": "nurse"},
        **HTMX,
    )
    assert [g.code for g in targets.context["matches"].groups] == [NURSES]
    assert f'name="group_code" value="{NURSES}"' in targets.content.decode()

    response = client.post(base, {"group_code": NURSES}, **HTMX)
    assert response.status_code == 200
    assert "Moved “Coffee Shop Server” to 29-1141 Registered Nurses." in response.content.decode()
    assert member("Coffee Shop Server").group.code == NURSES
    assert AuditEvent.objects.filter(action="member.move", actor=admin_user).exists()


def test_the_type_ahead_never_offers_the_group_itself(client, tiny_taxonomy, admin_user):
    client.force_login(admin_user)
    response = client.get(
        f"/taxonomies/jobs/groups/{BARISTAS}/targets", {"purpose": "merge", "q": "s"}, **HTMX
    )
    codes = [g.code for g in response.context["matches"].groups]
    assert BARISTAS not in codes
    assert sorted(codes) == ["13-2011", DEVS, NURSES, "53-3032"]


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("99-9999", "group: no group &#x27;99-9999&#x27; in this taxonomy"),
        ("", "group: choose a group"),
        (BARISTAS, "group: &#x27;Coffee Maker&#x27; is already in 35-3023"),
    ],
)
def test_a_bad_move_is_a_400_in_place_naming_the_group(
    client, tiny_taxonomy, admin_user, code, message
):
    client.force_login(admin_user)
    before = snapshot()
    moving = member("Coffee Maker")
    response = client.post(
        f"/taxonomies/jobs/groups/{BARISTAS}/members/{moving.id}/move",
        {"group_code": code},
        **HTMX,
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert message in page
    assert 'data-testid="move-error"' in page
    assert snapshot() == before


def test_removing_a_string_is_confirmed_first(client, tiny_taxonomy, admin_user):
    client.force_login(admin_user)
    removing = member("Coffee Maker")
    url = f"/taxonomies/jobs/groups/{BARISTAS}/members/{removing.id}/remove"
    confirm = client.get(url, **HTMX)
    assert confirm.status_code == 200
    assert "Remove “Coffee Maker” from 35-3023?" in confirm.content.decode()
    assert Member.objects.filter(id=removing.id).exists()

    response = client.post(url, **HTMX)
    assert response.status_code == 200
    assert "Removed “Coffee Maker”." in response.content.decode()
    assert not Member.objects.filter(id=removing.id).exists()


def test_a_plain_form_post_redirects_back_to_the_group(client, tiny_taxonomy, admin_user):
    client.force_login(admin_user)
    removing = member("Coffee Maker")
    response = client.post(f"/taxonomies/jobs/groups/{BARISTAS}/members/{removing.id}/remove")
    assert response.status_code == 302
    assert response["Location"] == f"/taxonomies/jobs/groups/{BARISTAS}/"
    assert not Member.objects.filter(id=removing.id).exists()


def test_renaming_a_group_and_a_bad_name(client, tiny_taxonomy, admin_user):
    client.force_login(admin_user)
    url = f"/taxonomies/jobs/groups/{BARISTAS}/rename"
    response = client.post(url, {"name": "Coffee people"}, **HTMX)
    assert response.status_code == 200
    assert group(BARISTAS).name == "Coffee people"

    response = client.post(url, {"name": "  "}, **HTMX)
    assert response.status_code == 400
    assert "name: name is empty" in response.content.decode()
    assert group(BARISTAS).name == "Coffee people"


def test_merging_is_confirmed_first_then_lands_on_the_remaining_group(
    client, tiny_taxonomy, admin_user
):
    client.force_login(admin_user)
    url = f"/taxonomies/jobs/groups/{BARISTAS}/merge"
    confirm = client.get(url, {"into": NURSES}, **HTMX)
    assert confirm.status_code == 200
    assert "Merge 35-3023 Baristas into 29-1141 Registered Nurses?" in confirm.content.decode()
    assert Group.objects.filter(code=BARISTAS).exists()

    response = client.post(url, {"into": NURSES}, **HTMX)
    assert response.status_code == 200
    assert response["HX-Redirect"] == f"/taxonomies/jobs/groups/{NURSES}/"
    assert not Group.objects.filter(code=BARISTAS).exists()
    assert "Coffee Maker" in texts_of(NURSES)


def test_a_plain_merge_post_redirects_to_the_remaining_group(client, tiny_taxonomy, admin_user):
    client.force_login(admin_user)
    response = client.post(f"/taxonomies/jobs/groups/{BARISTAS}/merge", {"into": NURSES})
    assert response.status_code == 302
    assert response["Location"] == f"/taxonomies/jobs/groups/{NURSES}/"


@pytest.mark.parametrize(
    ("method", "into", "message"),
    [
        ("post", BARISTAS, "target: a group cannot be merged into itself"),
        ("get", BARISTAS, "target: a group cannot be merged into itself"),
        ("post", "99-9999", "target: no group &#x27;99-9999&#x27; in this taxonomy"),
        ("post", "", "target: choose a group"),
    ],
)
def test_a_bad_merge_is_a_400_in_place_naming_the_target(
    client, tiny_taxonomy, admin_user, method, into, message
):
    client.force_login(admin_user)
    before = snapshot()
    response = getattr(client, method)(
        f"/taxonomies/jobs/groups/{BARISTAS}/merge", {"into": into}, **HTMX
    )
    assert response.status_code == 400
    assert message in response.content.decode()
    assert snapshot() == before


def test_a_group_created_by_the_service_has_a_page(client, tiny_taxonomy, admin_user):
    group_create(taxonomy=tiny_taxonomy, code="11-1011.03", name="Officers", user=admin_user)
    client.force_login(admin_user)
    response = client.get("/taxonomies/jobs/groups/11-1011.03/")
    assert response.status_code == 200
    assert response.context["group"].name == "Officers"
