"""Taxonomies in the API: the list, naming each one's live model, and one taxonomy's counts."""

from __future__ import annotations

import pytest

from annotations.services.review.inputs import inputs_submit
from tests.api_taxonomy.conftest import API


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


# --- importing a taxonomy file ---------------------------------------------------------------

CSV = (
    b"group_code,group_name,text,description\n"
    b"A-1,Alpha,alpha one,The first\nA-1,Alpha,alpha two,\nB-2,Beta,beta one,\n"
)


def upload(body: bytes = CSV, name: str = "skills.csv"):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, body, content_type="text/csv")


def test_an_admin_imports_a_taxonomy_file_and_it_is_queued_to_serve(db, admin_user):
    from models_app.models import TrainingRun
    from models_app.siamese.specs import PRETRAINED_SPEC
    from tests.api_taxonomy.conftest import client_for

    response = client_for(admin_user).post(
        f"{API}/taxonomies",
        {"slug": "skills", "format": "csv", "name": "Skills", "file": upload()},
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["taxonomy"]["slug"], body["taxonomy"]["name"], body["created"]) == (
        "skills",
        "Skills",
        True,
    )
    assert (body["rows_read"], body["members_created"], body["skipped_rows"]) == (3, 3, [])
    run = TrainingRun.objects.get(id=body["queued_run"])
    assert (run.kind, run.status, run.config) == ("build", "queued", PRETRAINED_SPEC)
    assert body["not_serving_reason"] is None


def test_a_file_with_strings_of_one_group_is_imported_and_says_why_nothing_serves(db, admin_user):
    from models_app.models import TrainingRun
    from tests.api_taxonomy.conftest import client_for

    one_group = b"group_code,group_name,text\nA,Alpha,alpha one\n"
    response = client_for(admin_user).post(
        f"{API}/taxonomies", {"slug": "solo", "format": "csv", "file": upload(one_group)},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["created"], body["members_created"], body["queued_run"]) == (True, 1, None)
    assert body["not_serving_reason"].startswith(
        "solo cannot serve yet: its strings are in 1 group, and a model needs at least two"
    )
    assert not TrainingRun.objects.exists()


def test_a_file_with_bad_rows_is_refused_whole_naming_them(db, admin_user):
    from annotations.models import Taxonomy
    from tests.api_taxonomy.conftest import client_for

    bad = CSV + b"B-2,Beta,,\n"  # an empty text in a group that has strings
    response = client_for(admin_user).post(
        f"{API}/taxonomies", {"slug": "skills", "format": "csv", "file": upload(bad)},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 400
    body = response.json()
    assert body["file"] == ["1 of 4 rows are bad; nothing was imported"]
    assert body["rows"] == [
        "skills.csv:5: text is empty, but group B-2 has strings on other rows (an empty text "
        "stands for a group without strings, alone on its row)"
    ]
    assert not Taxonomy.objects.exists()


def test_a_bad_request_or_a_curator_imports_nothing(db, admin_user, curator):
    from annotations.models import Taxonomy
    from tests.api_taxonomy.conftest import client_for

    admin = client_for(admin_user)
    missing = admin.post(
        f"{API}/taxonomies", {"slug": "skills", "format": "csv"}, format="multipart"
    )
    assert missing.status_code == 400 and list(missing.json()) == ["file"]
    wrong = admin.post(
        f"{API}/taxonomies", {"slug": "no spaces", "format": "xml", "file": upload()},
        format="multipart",
    )  # fmt: skip
    assert wrong.status_code == 400 and set(wrong.json()) == {"slug", "format"}
    zipped = admin.post(
        f"{API}/taxonomies", {"slug": "o", "format": "onet", "file": upload(name="o.zip")},
        format="multipart",
    )  # fmt: skip
    assert zipped.status_code == 400
    assert zipped.json()["file"][0].startswith("o.zip is not a zip archive")
    forbidden = client_for(curator).post(
        f"{API}/taxonomies", {"slug": "skills", "format": "csv", "file": upload()},
        format="multipart",
    )  # fmt: skip
    assert forbidden.status_code == 403
    assert not Taxonomy.objects.exists()


def damaged_onet_zip(damage: str) -> bytes:
    """O*NET's two files deflated, the first then damaged: its compressed bytes changed, or
    marked as encrypted (as a zip made with a password is)."""
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        rows = "".join(f"11-{1000 + i}.00\tOccupation {i}\tDoes thing {i}\n" for i in range(200))
        archive.writestr("Occupation Data.txt", "O*NET-SOC Code\tTitle\tDescription\n" + rows)
        archive.writestr("Alternate Titles.txt", "O*NET-SOC Code\tAlternate Title\n")
    body = bytearray(buffer.getvalue())
    if damage == "bytes":
        start = 30 + len("Occupation Data.txt")  # the first file's data, after its header
        body[start + 20 : start + 60] = bytes(40)
    else:
        central = body.index(b"PK\x01\x02")  # the first file's entry in the central directory
        body[central + 8] |= 1
        body[6] |= 1  # and in its own header
    return bytes(body)


@pytest.mark.parametrize(
    ("damage", "said"),
    [("bytes", "Occupation Data.txt in o.zip is damaged"),
     ("encrypted", "Occupation Data.txt in o.zip cannot be read")],
)  # fmt: skip
def test_a_damaged_onet_zip_is_a_400_naming_the_file_inside(db, admin_user, damage, said):
    from annotations.models import Taxonomy
    from tests.api_taxonomy.conftest import client_for

    response = client_for(admin_user).post(
        f"{API}/taxonomies",
        {"slug": "o", "format": "onet", "file": upload(damaged_onet_zip(damage), name="o.zip")},
        format="multipart",
    )
    assert response.status_code == 400
    assert response.json()["file"][0].startswith(said)
    assert not Taxonomy.objects.exists()


def test_a_bad_taxonomy_name_is_a_400_naming_the_name_not_the_file(db, admin_user, client):
    from annotations.models import Taxonomy
    from tests.api_taxonomy.conftest import client_for

    response = client_for(admin_user).post(
        f"{API}/taxonomies", {"slug": "skills", "format": "csv", "name": "Jobs\x01",
                              "file": upload()}, format="multipart",
    )  # fmt: skip
    assert response.status_code == 400
    assert response.json() == {"name": ["taxonomy name contains control characters"]}
    client.force_login(admin_user)
    page = client.post(
        "/taxonomies/", {"slug": "skills", "format": "csv", "name": "Jobs\x01", "file": upload()}
    )
    assert page.status_code == 400
    assert "name: taxonomy name contains control characters" in page.content.decode()
    assert not Taxonomy.objects.exists()
