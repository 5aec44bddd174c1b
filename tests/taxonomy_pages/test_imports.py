"""The taxonomy list and imports: a CSV or an O*NET zip imported from the page, every bad row
reported by file and line, a file over the limit refused."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotations.models import AuditEvent, Member, Taxonomy
from annotations.services import taxonomy_upload
from models_app.models import TrainingRun
from models_app.siamese.specs import PRETRAINED_SPEC
from tests.taxonomy_pages.conftest import GOOD_CSV, csv_upload


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


def test_a_taxonomy_with_strings_in_one_group_is_imported_but_not_promised_to_serve(
    client, db, admin_user
):
    # Its build would fail ("at least two groups") however often it was retried.
    client.force_login(admin_user)
    one_group = "group_code,group_name,text\nA,Alpha,alpha one\nA,Alpha,alpha two\n"
    response = client.post(
        "/taxonomies/", {"slug": "solo", "format": "csv", "file": csv_upload(one_group)}
    )
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert "solo: 2 rows read" in page
    assert (
        "solo cannot serve yet: its strings are in 1 group, and a model needs at least two to "
        "tell apart; import it again from a file that holds strings of two groups or more."
    ) in page
    assert "will serve" not in page
    assert not TrainingRun.objects.exists()


def test_an_import_into_a_taxonomy_with_a_live_model_queues_a_reindex(
    client, tiny_taxonomy, admin_user
):
    client.force_login(admin_user)
    # One group's strings: a live model is reindexed over whatever groups there are.
    extra = "group_code,group_name,text\n15-1252,Software Developers,Rust Developer\n"
    fields = {"slug": "jobs", "name": "Tiny jobs", "format": "csv", "replace": "1"}
    response = client.post("/taxonomies/", {**fields, "file": csv_upload(extra)})
    assert response.status_code == 302
    run = TrainingRun.objects.filter(taxonomy=tiny_taxonomy).latest("id")
    assert (run.kind, run.status, run.trigger) == ("reindex", "queued", "import")


def test_an_existing_slug_is_replaced_only_when_the_box_says_so(client, tiny_taxonomy, admin_user):
    # One form creates and updates: a slug typed by mistake must not empty a live taxonomy.
    client.force_login(admin_user)
    one_row = "group_code,group_name,text\n15-1252,Software Developers,Rust Developer\n"
    members = sorted(Member.objects.filter(taxonomy=tiny_taxonomy).values_list("id", "text"))
    runs = TrainingRun.objects.count()
    response = client.post(
        "/taxonomies/", {"slug": "jobs", "format": "csv", "file": csv_upload(one_row)}
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert (
        "slug: jobs is taken by Tiny jobs (5 groups, 21 strings); tick &quot;Replace&quot; to "
        "update it from this file, which removes its taxonomy strings the file does not hold, "
        "or choose a new slug"
    ) in page
    assert sorted(Member.objects.filter(taxonomy=tiny_taxonomy).values_list("id", "text")) == (
        members
    )
    assert TrainingRun.objects.count() == runs
    # The page keeps what was typed, the box unticked.
    assert 'value="jobs"' in page and 'name="replace" value="1" data-testid' in page


def test_a_csv_with_bad_rows_stores_nothing_and_lists_each_bad_row_by_file_and_line(
    client, db, admin_user
):
    client.force_login(admin_user)
    bad = GOOD_CSV + "B-2,Beta,\nA-1,Alpha,bad\x07bell\n"
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
    # Refused by the form, whatever its size (far over, the middleware refuses it unread).
    monkeypatch.setattr(taxonomy_upload, "MAX_IMPORT_BYTES", 50)
    client.force_login(admin_user)
    body = GOOD_CSV + "".join(f"A-1,Alpha,alpha {i}\n" for i in range(rows))
    response = client.post("/taxonomies/", {"slug": "t", "format": "csv", "file": csv_upload(body)})
    assert response.status_code == 400
    assert "file: the file is" in response.content.decode()
    assert "uploads take up to 50" in response.content.decode()
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


def test_an_onet_zip_that_unpacks_past_the_limit_is_refused(client, db, admin_user, monkeypatch):
    # The limit counts what the zip unpacks to: its alternate titles alone are 2 MB.
    monkeypatch.setattr(taxonomy_upload, "MAX_UNZIPPED_BYTES", 2**20)
    client.force_login(admin_user)
    alternates = "O*NET-SOC Code\tAlternate Title\n" + "11-1011.00\tCEO\n" * 2**17
    response = client.post(
        "/taxonomies/", {"slug": "onet", "format": "onet", "file": onet_zip(alternates)}
    )
    assert response.status_code == 400
    assert "the zip unpacks to more than 1 MB; use the import_taxonomy command" in (
        response.content.decode()
    )
    assert not Taxonomy.objects.exists()
