"""Member strings in the API: listed and filtered, one by id; added, moved and removed by an
admin, each bad request a 400 naming the field."""

from __future__ import annotations

import pytest

from annotations.models import AuditEvent, Group, Member
from tests.api_taxonomy.conftest import API, db_state, group, member


def test_members_are_listed_and_filtered_by_group_and_source(api_client, tiny_taxonomy):
    everyone = api_client.get(f"{API}/taxonomies/jobs/members").json()
    assert everyone["count"] == 21
    nurses = api_client.get(
        f"{API}/taxonomies/jobs/members", {"group": group("29-1141").id, "source": "taxonomy"}
    ).json()
    assert sorted(m["text"] for m in nurses["results"]) == [
        "Charge Nurse",
        "ICU Nurse",
        "Registered Nurses",
        "Staff Nurse",
    ]
    first = nurses["results"][0]
    assert first["group"] == {
        "id": group("29-1141").id,
        "code": "29-1141",
        "name": "Registered Nurses",
    }
    assert (first["source"], first["added_by"], first["judgement"]) == ("taxonomy", None, None)
    curated = api_client.get(f"{API}/taxonomies/jobs/members", {"source": "curator"}).json()
    assert curated["count"] == 0


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"group": "nurses"}, "group"),
        ({"group": 999999}, "group"),
        ({"group": "other"}, "group"),
        ({"source": "robot"}, "source"),
    ],
)
def test_bad_member_filters_are_a_400_naming_the_field(
    api_client, tiny_taxonomy, other_taxonomy, params, field
):
    if params.get("group") == "other":
        params = {"group": Group.objects.get(taxonomy=other_taxonomy).id}
    response = api_client.get(f"{API}/taxonomies/jobs/members", params)
    assert response.status_code == 400
    assert list(response.json()) == [field]


def test_an_admin_adds_a_member_and_hears_where_else_the_text_is(admin_client, tiny_taxonomy):
    baristas, nurses = group("35-3023"), group("29-1141")
    response = admin_client.post(
        f"{API}/taxonomies/jobs/members",
        {"group": nurses.id, "text": "Coffee  Maker"},
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    assert (body["text"], body["source"], body["added_by"]) == ("Coffee Maker", "admin", "ada")
    assert body["also_in"] == [{"id": baristas.id, "code": "35-3023", "name": "Baristas"}]
    added = Member.objects.get(id=body["id"])
    assert (added.group_id, added.source) == (nurses.id, "admin")


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"text": "Night Nurse"}, "group", "This field is required."),
        ({"group": "{nurses}"}, "text", "This field is required."),
        ({"group": "{nurses}", "text": "icu   NURSE"}, "text", "is already in 29-1141"),
        ({"group": "{nurses}", "text": "   "}, "text", "is empty"),
        ({"group": "{nurses}", "text": "bell\x07"}, "text", "control characters"),
        ({"group": "{nurses}", "text": "x" * 201}, "text", "longer than 200 characters"),
        ({"group": "{nurses}", "text": 42}, "text", "must be a string"),
        ({"group": "{other}", "text": "Night Nurse"}, "group", "not in taxonomy jobs"),
        ({"group": 999999, "text": "Night Nurse"}, "group", "does not exist"),
    ],
)
def test_a_bad_new_member_is_a_400_naming_the_field(
    admin_client, tiny_taxonomy, other_taxonomy, body, field, message
):
    ids = {"nurses": group("29-1141").id, "other": Group.objects.get(taxonomy=other_taxonomy).id}
    body = {
        key: int(value.format(**ids)) if isinstance(value, str) and value.startswith("{") else value
        for key, value in body.items()
    }
    before = db_state()
    response = admin_client.post(f"{API}/taxonomies/jobs/members", body, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert message in response.json()[field][0]
    assert db_state() == before


def test_a_member_is_shown_by_id(api_client, tiny_taxonomy):
    icu = member("ICU Nurse")
    response = api_client.get(f"{API}/members/{icu.id}")
    assert response.status_code == 200
    assert (response.json()["text"], response.json()["group"]["code"]) == ("ICU Nurse", "29-1141")
    assert api_client.get(f"{API}/members/999999").json() == {"detail": "no member 999999"}


def test_an_admin_moves_a_member(admin_client, tiny_taxonomy):
    icu, baristas = member("ICU Nurse"), group("35-3023")
    response = admin_client.patch(f"{API}/members/{icu.id}", {"group": baristas.id}, format="json")
    assert response.status_code == 200
    assert response.json()["group"]["code"] == "35-3023"
    icu.refresh_from_db()
    assert icu.group_id == baristas.id
    assert AuditEvent.objects.filter(action="member.move").count() == 1


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("same", "is already in 29-1141"),
        ("other", "another taxonomy"),
        (999999, "does not exist"),
        (None, "This field may not be null."),
        # It used to move the member to the group whose id it truncated to.
        ("fraction", "A valid integer is required."),
    ],
)
def test_a_bad_move_is_a_400_naming_group(
    admin_client, tiny_taxonomy, other_taxonomy, target, message
):
    icu = member("ICU Nurse")
    target = {
        "same": icu.group_id,
        "other": Group.objects.get(taxonomy=other_taxonomy).id,
        "fraction": Group.objects.get(taxonomy__slug="jobs", code="35-3023").id + 0.9,
    }.get(target, target)
    before = db_state()
    response = admin_client.patch(f"{API}/members/{icu.id}", {"group": target}, format="json")
    assert response.status_code == 400
    assert list(response.json()) == ["group"]
    assert message in response.json()["group"][0]
    assert db_state() == before


def test_an_admin_removes_a_member(admin_client, tiny_taxonomy):
    icu = member("ICU Nurse")
    response = admin_client.delete(f"{API}/members/{icu.id}")
    assert response.status_code == 204
    assert not Member.objects.filter(id=icu.id).exists()
    assert AuditEvent.objects.filter(action="member.remove", object_id=str(icu.id)).exists()
    assert admin_client.delete(f"{API}/members/{icu.id}").status_code == 404
