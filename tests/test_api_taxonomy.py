"""The API for taxonomies, their groups and member strings: curators read, admins edit."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.models import AuditEvent, Group, Member, Taxonomy
from annotations.services.review import inputs_submit

API = "/api/v1"


def client_for(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def admin_client(admin_user) -> APIClient:
    return client_for(admin_user)


@pytest.fixture
def stranger_client(user_model) -> APIClient:
    """Signed in, but neither a curator nor an admin."""
    return client_for(user_model.objects.create_user(username="sam", password="sam-pass-123"))


def group(code: str) -> Group:
    return Group.objects.get(taxonomy__slug="jobs", code=code)


def member(text: str) -> Member:
    return Member.objects.get(taxonomy__slug="jobs", text=text)


def db_state() -> tuple:
    """Everything an edit could change, to show a refused one changed nothing."""
    return (
        sorted(Group.objects.values_list("id", "code", "name")),
        sorted(Member.objects.values_list("id", "group_id", "text")),
        AuditEvent.objects.count(),
    )


@pytest.fixture
def other_taxonomy(db) -> Taxonomy:
    taxonomy = Taxonomy.objects.create(slug="skills", name="Skills")
    Group.objects.create(taxonomy=taxonomy, code="S1", name="Java")
    return taxonomy


# --- who may do what ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/taxonomies",
        "/taxonomies/jobs",
        "/taxonomies/jobs/groups",
        "/taxonomies/jobs/members",
        "/groups/1",
        "/members/1",
    ],
)
def test_anonymous_requests_are_refused_with_401(tiny_taxonomy, path):
    response = APIClient().get(API + path)
    assert response.status_code == 401
    assert response.json() == {"detail": "Authentication credentials were not provided."}


def test_a_signed_in_user_without_the_curator_role_is_forbidden(tiny_taxonomy, stranger_client):
    response = stranger_client.get(f"{API}/taxonomies")
    assert response.status_code == 403
    assert response.json() == {"detail": "curators only"}


def test_session_authentication_works_for_reads(client, curator, tiny_taxonomy):
    client.force_login(curator)
    assert client.get(f"{API}/taxonomies/jobs").status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", "/taxonomies/jobs/groups", {"code": "99-0001", "name": "Astronauts"}),
        ("patch", "/groups/{nurses}", {"name": "Nurses"}),
        ("post", "/groups/{nurses}/merge", {"into": "{baristas}"}),
        ("post", "/taxonomies/jobs/members", {"group": "{nurses}", "text": "Night Nurse"}),
        ("patch", "/members/{icu}", {"group": "{baristas}"}),
        ("delete", "/members/{icu}", None),
    ],
)
def test_a_curator_cannot_edit_the_taxonomy_and_nothing_changes(
    api_client, tiny_taxonomy, method, path, body
):
    ids = {
        "nurses": group("29-1141").id,
        "baristas": group("35-3023").id,
        "icu": member("ICU Nurse").id,
    }
    if body:
        body = {
            key: int(value.format(**ids)) if value.startswith("{") else value
            for key, value in body.items()
        }
    before = db_state()
    response = getattr(api_client, method)(API + path.format(**ids), body, format="json")
    assert response.status_code == 403
    assert response.json() == {"detail": "admins only"}
    assert db_state() == before


# --- taxonomies -----------------------------------------------------------------------------


def test_the_taxonomy_list_is_paginated_and_names_the_live_model(api_client, tiny_taxonomy):
    response = api_client.get(f"{API}/taxonomies")
    assert response.status_code == 200
    body = response.json()
    assert (body["count"], body["next"], body["previous"]) == (1, None, None)
    (jobs,) = body["results"]
    assert (jobs["slug"], jobs["name"]) == ("jobs", "Tiny jobs")
    assert jobs["live_model_version"]["label"] == "jobs/v1"


def test_a_taxonomy_counts_its_groups_members_and_pending_items(api_client, tiny_taxonomy):
    inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista", "night nurse"], source="api")
    response = api_client.get(f"{API}/taxonomies/jobs")
    assert response.status_code == 200
    body = response.json()
    assert body["counts"] == {
        "groups": 5,
        "members": 21,
        "pending_items": 2,
        "skipped_items": 0,
        "done_items": 0,
        "conflicts": 0,
    }
    assert body["live_model_version"]["number"] == 1


def test_a_taxonomy_without_a_model_says_so(api_client, other_taxonomy):
    response = api_client.get(f"{API}/taxonomies/skills")
    assert response.status_code == 200
    assert response.json()["live_model_version"] is None


def test_an_unknown_taxonomy_is_a_404_naming_it(api_client, tiny_taxonomy):
    for path in ("/taxonomies/nope", "/taxonomies/nope/groups", "/taxonomies/nope/members"):
        response = api_client.get(API + path)
        assert response.status_code == 404
        assert response.json() == {"detail": "no taxonomy 'nope'"}


# --- groups ---------------------------------------------------------------------------------


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
        ({"code": "15-1252", "name": "Again"}, "code", "already taken"),
        ({"code": "a/b", "name": "Slash"}, "code", "may not contain '/'"),
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
        ("text", "Incorrect type. Expected pk value, received str."),
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


# --- members --------------------------------------------------------------------------------


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
    ],
)
def test_a_bad_move_is_a_400_naming_group(
    admin_client, tiny_taxonomy, other_taxonomy, target, message
):
    icu = member("ICU Nurse")
    target = {
        "same": icu.group_id,
        "other": Group.objects.get(taxonomy=other_taxonomy).id,
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
