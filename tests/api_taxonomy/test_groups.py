"""Groups in the API: listed and searched, one with its counts; created, renamed and merged by an
admin, each bad request a 400 naming the field."""

from __future__ import annotations

import pytest

from annotations.models import AuditEvent, Group
from annotations.services.review.inputs import inputs_submit
from tests.api_taxonomy.conftest import API, db_state, group, member


def test_groups_are_listed_by_code_in_pages_of_fifty(api_client, tiny_taxonomy):
    Group.objects.bulk_create(
        Group(taxonomy=tiny_taxonomy, code=f"99-{n:04d}", name=f"Extra {n}") for n in range(55)
    )
    first = api_client.get(f"{API}/taxonomies/jobs/groups").json()
    assert first["count"] == 60
    assert first["previous"] is None
    assert len(first["results"]) == 50
    assert first["results"][0]["code"] == "13-2011"
    assert first["results"][0]["member_count"] == 4
    second = api_client.get(first["next"]).json()
    assert second["next"] is None
    assert len(second["results"]) == 10
    codes = [g["code"] for g in first["results"] + second["results"]]
    assert codes == sorted(codes)


@pytest.mark.parametrize(
    ("query", "codes"),
    [("nurse", ["29-1141"]), ("15-12", ["15-1252"]), ("truck drivers", ["53-3032"]), ("zz", [])],
)
def test_groups_can_be_searched_by_name_words_or_code(api_client, tiny_taxonomy, query, codes):
    response = api_client.get(f"{API}/taxonomies/jobs/groups", {"q": query})
    assert response.status_code == 200
    assert [g["code"] for g in response.json()["results"]] == codes


def test_a_group_shows_its_member_count_and_pending_items(api_client, tiny_taxonomy):
    inputs_submit(taxonomy=tiny_taxonomy, texts=["icu nurse practitioner"], source="api")
    response = api_client.get(f"{API}/groups/{group('29-1141').id}")
    assert response.status_code == 200
    body = response.json()
    assert (body["code"], body["name"], body["taxonomy"]) == (
        "29-1141",
        "Registered Nurses",
        "jobs",
    )
    assert (body["member_count"], body["pending_items"]) == (4, 1)


@pytest.mark.parametrize("path", ["/groups/999999", "/groups/99999999999999999999"])
def test_an_unknown_group_is_a_404(api_client, tiny_taxonomy, path):
    response = api_client.get(API + path)
    assert response.status_code == 404


def test_an_admin_creates_a_group(admin_client, tiny_taxonomy):
    response = admin_client.post(
        f"{API}/taxonomies/jobs/groups", {"code": "99-0001", "name": " Astronauts "}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert (body["code"], body["name"], body["member_count"]) == ("99-0001", "Astronauts", 0)
    created = group("99-0001")
    assert (created.id, created.name) == (body["id"], "Astronauts")
    assert AuditEvent.objects.filter(action="group.create", object_id=str(created.id)).exists()


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"name": "Astronauts"}, "code", "This field is required."),
        ({"code": "99-0001"}, "name", "This field is required."),
        ({"code": "a/b", "name": "Slash"}, "code", "may not contain '/'"),
        ({"code": ".", "name": "Dot"}, "code", "code '.' may not be '.' or '..'"),
        ({"code": "..", "name": "Dots"}, "code", "code '..' may not be '.' or '..'"),
        ({"code": "   ", "name": "Blank"}, "code", "is empty"),
        ({"code": "99-1", "name": "x" * 301}, "name", "longer than 300 characters"),
        ({"code": "99-1", "name": ["a list"]}, "name", "must be a string"),
        ({"code": "99-1", "name": "nul\x00"}, "name", "contains control characters"),
    ],
)
def test_a_bad_new_group_is_a_400_naming_the_field(
    admin_client, tiny_taxonomy, body, field, message
):
    before = db_state()
    response = admin_client.post(f"{API}/taxonomies/jobs/groups", body, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert message in response.json()[field][0]
    assert db_state() == before


def test_a_taken_code_is_a_409_naming_the_field(admin_client, tiny_taxonomy):
    """The request is well formed; it collides with a group that exists."""
    before = db_state()
    body = {"code": "15-1252", "name": "Again"}
    response = admin_client.post(f"{API}/taxonomies/jobs/groups", body, format="json")
    assert response.status_code == 409
    assert response.json() == {"code": ["code 15-1252 is already taken in jobs"]}
    assert db_state() == before


def test_malformed_or_non_json_bodies_are_refused(admin_client, tiny_taxonomy):
    url = f"{API}/taxonomies/jobs/groups"
    before = db_state()
    response = admin_client.post(url, data="{not json", content_type="application/json")
    assert response.status_code == 400
    assert "JSON parse error" in response.json()["detail"]
    response = admin_client.post(url, {"code": "99-1", "name": "Form"})  # multipart form
    assert response.status_code == 415
    assert "Unsupported media type" in response.json()["detail"]
    response = admin_client.post(url, ["99-1", "List"], format="json")
    assert response.status_code == 400
    assert "Expected a dictionary" in response.json()["non_field_errors"][0]
    assert db_state() == before


def test_an_admin_renames_a_group(admin_client, tiny_taxonomy):
    nurses = group("29-1141")
    response = admin_client.patch(f"{API}/groups/{nurses.id}", {"name": "Nurses"}, format="json")
    assert response.status_code == 200
    assert response.json()["name"] == "Nurses"
    nurses.refresh_from_db()
    assert nurses.name == "Nurses"
    assert AuditEvent.objects.filter(action="group.rename").count() == 1


def test_a_rename_without_a_name_is_a_400(admin_client, tiny_taxonomy):
    response = admin_client.patch(f"{API}/groups/{group('29-1141').id}", {}, format="json")
    assert response.status_code == 400
    assert response.json() == {"name": ["This field is required."]}
    assert group("29-1141").name == "Registered Nurses"


def test_a_rename_takes_a_whole_body_as_a_get_gave_it(admin_client, tiny_taxonomy):
    nurses = group("29-1141")
    body = admin_client.get(f"{API}/groups/{nurses.id}").json()
    response = admin_client.patch(
        f"{API}/groups/{nurses.id}", {**body, "name": "Nurses"}, format="json"
    )
    assert response.status_code == 200
    nurses.refresh_from_db()
    assert (nurses.code, nurses.name) == ("29-1141", "Nurses")


@pytest.mark.parametrize(
    ("body", "refused"),
    [
        ({"code": "29-9999"}, {"code"}),
        ({"name": "Nurses", "code": "29-9999"}, {"code"}),
        ({"name": "Nurses", "description": "Care"}, {"description"}),
    ],
)
def test_a_rename_names_the_fields_it_cannot_change_and_changes_nothing(
    admin_client, tiny_taxonomy, body, refused
):
    nurses = group("29-1141")
    before = db_state()
    response = admin_client.patch(f"{API}/groups/{nurses.id}", body, format="json")
    assert response.status_code == 400
    errors = response.json()
    assert set(errors) == refused
    if "code" in errors:
        assert errors["code"][0].startswith("a group's code cannot be changed")
        assert "merge this one into it" in errors["code"][0]
    else:
        assert "changes nothing else" in errors["description"][0]
    assert db_state() == before


def test_renaming_an_unknown_group_is_a_404(admin_client, tiny_taxonomy):
    response = admin_client.patch(f"{API}/groups/999999", {"name": "X"}, format="json")
    assert response.status_code == 404
    assert response.json() == {"detail": "no group 999999"}


def test_an_admin_merges_a_group_into_another(admin_client, tiny_taxonomy):
    source, target = group("35-3023"), group("29-1141")
    response = admin_client.post(
        f"{API}/groups/{source.id}/merge", {"into": target.id}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["code"], body["member_count"]) == (target.id, "29-1141", 8)
    assert not Group.objects.filter(id=source.id).exists()
    assert member("Coffee Maker").group_id == target.id


@pytest.mark.parametrize(
    ("into", "message"),
    [
        ("self", "cannot be merged into itself"),
        ("other", "another taxonomy"),
        (999999, 'Invalid pk "999999" - object does not exist.'),
        ("text", "A valid integer is required."),
        (None, "This field may not be null."),
    ],
)
def test_a_bad_merge_is_a_400_naming_into(
    admin_client, tiny_taxonomy, other_taxonomy, into, message
):
    source = group("35-3023")
    into = {
        "self": source.id,
        "other": Group.objects.get(taxonomy=other_taxonomy).id,
        "text": "baristas",
    }.get(into, into)
    before = db_state()
    response = admin_client.post(f"{API}/groups/{source.id}/merge", {"into": into}, format="json")
    assert response.status_code == 400
    assert list(response.json()) == ["into"]
    assert message in response.json()["into"][0]
    assert db_state() == before
