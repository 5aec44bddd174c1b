"""The taxonomy administration pages: admins only; imports, group search, a group's strings and
the edits on them, each error shown in place and naming the field."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotations import views_taxonomy
from annotations.models import AuditEvent, FeedbackPair, Group, Member, Taxonomy
from annotations.services.taxonomy_edit import group_create
from models_app.models import TrainingRun
from models_app.siamese.specs import PRETRAINED_SPEC

DEVS, NURSES, BARISTAS = "15-1252", "29-1141", "35-3023"
HTMX = {"HTTP_HX_REQUEST": "true"}


def group(code: str) -> Group:
    return Group.objects.get(taxonomy__slug="jobs", code=code)


def member(text: str) -> Member:
    return Member.objects.get(taxonomy__slug="jobs", text=text)


def texts_of(code: str) -> list[str]:
    return sorted(group(code).members.values_list("text", flat=True))


def snapshot() -> tuple:
    return (
        sorted(Taxonomy.objects.values_list("slug", "name")),
        sorted(Group.objects.values_list("id", "code", "name")),
        sorted(Member.objects.values_list("id", "group_id", "text")),
        FeedbackPair.objects.count(),
        AuditEvent.objects.count(),
    )


def csv_upload(content: str, name: str = "jobs.csv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content.encode("utf-8"), content_type="text/csv")


GOOD_CSV = (
    "group_code,group_name,text\nA-1,Alpha,alpha one\nA-1,Alpha,alpha two\nB-2,Beta,beta one\n"
)


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


# --- who may see what -----------------------------------------------------------------------


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


# --- the list and imports -------------------------------------------------------------------


def test_the_list_shows_each_taxonomy_with_its_counts(client, tiny_taxonomy, admin_user):
    client.force_login(admin_user)
    response = client.get("/taxonomies/")
    assert response.status_code == 200
    rows = response.context["taxonomies"]
    assert [(t.slug, t.group_count, t.member_count) for t in rows] == [("jobs", 5, 21)]
    assert "Tiny jobs" in response.content.decode()


def test_an_admin_imports_a_csv_and_lands_on_the_new_taxonomy(client, db, admin_user):
    client.force_login(admin_user)
    response = client.post(
        "/taxonomies/",
        {"slug": "greek", "name": "Greek", "format": "csv", "file": csv_upload(GOOD_CSV)},
    )
    assert response.status_code == 302
    assert response["Location"] == "/taxonomies/greek/"
    taxonomy = Taxonomy.objects.get(slug="greek")
    assert taxonomy.name == "Greek"
    assert sorted(Member.objects.filter(taxonomy=taxonomy).values_list("text", flat=True)) == [
        "alpha one",
        "alpha two",
        "beta one",
    ]
    event = AuditEvent.objects.get(action="taxonomy.import")
    assert (event.actor, event.after["file"], event.after["members_created"]) == (
        admin_user,
        "jobs.csv",
        3,
    )
    page = client.get(response["Location"]).content.decode()
    assert "greek: 3 rows read" in page
    # A new taxonomy has no model yet: the pretrained tower serves it first, as it comes.
    run = TrainingRun.objects.get(taxonomy=taxonomy)
    assert (run.kind, run.trigger, run.requested_by) == ("build", "import", admin_user)
    assert run.config == PRETRAINED_SPEC
    assert "greek will serve with the pretrained model as soon as its members are" in page


def test_an_import_into_a_taxonomy_with_a_live_model_queues_a_reindex(
    client, tiny_taxonomy, admin_user
):
    client.force_login(admin_user)
    extra = "group_code,group_name,text\n15-1252,Software Developers,Rust Developer\n"
    response = client.post(
        "/taxonomies/",
        {"slug": "jobs", "name": "Tiny jobs", "format": "csv", "file": csv_upload(extra)},
    )
    assert response.status_code == 302
    run = TrainingRun.objects.filter(taxonomy=tiny_taxonomy).latest("id")
    assert (run.kind, run.status, run.trigger) == ("reindex", "queued", "import")


def test_a_csv_with_bad_rows_stores_nothing_and_lists_each_bad_row_by_file_and_line(
    client, db, admin_user
):
    client.force_login(admin_user)
    bad = GOOD_CSV + "C-3,Gamma,\nA-1,Alpha,bad\x07bell\n"
    response = client.post(
        "/taxonomies/", {"slug": "greek", "format": "csv", "file": csv_upload(bad, "greek.csv")}
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "file: 2 of 5 rows are bad; nothing was imported" in page
    assert "greek.csv:5: text is empty" in page
    assert "greek.csv:6: text contains control characters" in page
    assert not Taxonomy.objects.exists()
    assert not AuditEvent.objects.exists()
    # The form keeps what was typed.
    assert 'value="greek"' in page


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"slug": "no spaces", "format": "csv"}, "slug: may hold only letters"),
        ({"slug": "t", "format": "xml"}, "format: Select a valid choice"),
        ({"slug": "t", "format": "csv", "file": None}, "file: This field is required"),
        (
            {"slug": "t", "format": "csv", "file": csv_upload("code,name\nA,B\n")},
            "lacks the column(s) group_code",
        ),
        (
            {"slug": "t", "format": "onet", "file": csv_upload(GOOD_CSV)},
            "file: jobs.csv is not a zip archive",
        ),
    ],
)
def test_a_bad_import_form_is_a_400_naming_the_field(client, db, admin_user, data, message):
    client.force_login(admin_user)
    data = {"file": csv_upload(GOOD_CSV), **data}
    if data["file"] is None:
        del data["file"]
    response = client.post("/taxonomies/", data)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Taxonomy.objects.exists()


@pytest.mark.parametrize("rows", [3, 2000])
def test_a_file_over_the_size_limit_is_refused(client, db, admin_user, monkeypatch, rows):
    # Small: refused by the form; big: refused by its declared length, before it is read.
    monkeypatch.setattr(views_taxonomy, "MAX_IMPORT_BYTES", 50)
    client.force_login(admin_user)
    body = GOOD_CSV + "".join(f"A-1,Alpha,alpha {i}\n" for i in range(rows))
    response = client.post("/taxonomies/", {"slug": "t", "format": "csv", "file": csv_upload(body)})
    assert response.status_code == 400
    assert "file: the file is" in response.content.decode()
    assert "the page takes up to 50" in response.content.decode()
    assert not Taxonomy.objects.exists()


def onet_zip(alternates: str) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            "db_29_0_text/Occupation Data.txt",
            "O*NET-SOC Code\tTitle\tDescription\n"
            "11-1011.00\tChief Executives\tRun things\n"
            "11-1021.00\tGeneral Managers\tManage things\n",
        )
        archive.writestr("db_29_0_text/Alternate Titles.txt", alternates)
        archive.writestr("db_29_0_text/Skills.txt", "not read\n")
    return SimpleUploadedFile("onet.zip", buffer.getvalue(), content_type="application/zip")


def test_onet_is_imported_from_one_zip_of_its_text_files(client, db, admin_user):
    client.force_login(admin_user)
    alternates = "O*NET-SOC Code\tAlternate Title\n11-1011.00\tCEO\n11-1021.00\tGM\n"
    response = client.post(
        "/taxonomies/", {"slug": "onet", "format": "onet", "file": onet_zip(alternates)}
    )
    assert response.status_code == 302
    assert sorted(Member.objects.values_list("group__code", "text")) == [
        ("11-1011.00", "CEO"),
        ("11-1011.00", "Chief Executives"),
        ("11-1021.00", "GM"),
        ("11-1021.00", "General Managers"),
    ]


def test_a_bad_onet_row_is_reported_with_the_file_inside_the_zip(client, db, admin_user):
    client.force_login(admin_user)
    alternates = "O*NET-SOC Code\tAlternate Title\n11-1011.00\tCEO\n99-9999.00\tNobody\n"
    response = client.post(
        "/taxonomies/", {"slug": "onet", "format": "onet", "file": onet_zip(alternates)}
    )
    assert response.status_code == 400
    assert "Alternate Titles.txt:3: unknown occupation code 99-9999.00" in (
        response.content.decode()
    )
    assert not Taxonomy.objects.exists()


# --- one taxonomy: search and create --------------------------------------------------------


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


def test_unknown_taxonomies_and_groups_are_404(client, tiny_taxonomy, admin_user):
    client.force_login(admin_user)
    assert client.get("/taxonomies/nope/").status_code == 404
    assert client.get("/taxonomies/jobs/groups/99-9999/").status_code == 404
    other = member("Coffee Maker").id
    assert client.get(f"/taxonomies/jobs/groups/{DEVS}/members/{other}/move").status_code == 404


# --- one group: its strings and edits -------------------------------------------------------


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
