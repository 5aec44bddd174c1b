"""The export is the csv importer's format: export, then import under a new slug, gives the same
groups and strings."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from annotations.models import Group, Member
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from annotations.services.taxonomy import taxonomy_import
from annotations.services.taxonomy_edit.groups import group_create, group_rename
from annotations.services.taxonomy_edit.members import member_add, member_move


def group(code: str, slug: str = "jobs") -> Group:
    return Group.objects.get(taxonomy__slug=slug, code=code)


def groups_and_members(slug: str) -> tuple:
    return (
        sorted(
            Group.objects.filter(taxonomy__slug=slug).values_list("code", "name", "description")
        ),
        sorted(Member.objects.filter(taxonomy__slug=slug).values_list("group__code", "text")),
    )


def export(client, slug: str) -> bytes:
    response = client.get(f"/taxonomies/{slug}/export.csv")
    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="{slug}.csv"'
    return b"".join(response.streaming_content)


def test_export_then_import_round_trips_groups_and_strings_exactly(
    client, tiny_taxonomy, admin_user, curator, tmp_path: Path
):
    # Strings of every source, and the characters CSV has to quote.
    member_add(group=group("35-3023"), text='Barista, "Head"', user=admin_user)
    member_add(group=group("35-3023"), text="Kaffeeröster — Café", user=admin_user)
    member_move(member=Member.objects.get(text="ICU Nurse"), group=group("15-1252"), user=None)
    testers = group_create(taxonomy=tiny_taxonomy, code="15-1253.00", name="Testers", user=None)
    member_add(group=testers, text="QA Engineer", user=admin_user)
    group_rename(group=group("13-2011"), name="Accountants; Auditors", user=admin_user)
    Group.objects.filter(id=group("29-1141").id).update(
        description='Care for patients,\nin "hospitals"'
    )
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")
    judgement_create(review_item=item, user=curator, verdict="reassign", group=group("15-1252"))
    client.force_login(admin_user)

    exported = export(client, "jobs")
    path = tmp_path / "jobs.csv"
    path.write_bytes(exported)
    report = taxonomy_import(slug="jobs-copy", path=path, fmt="csv")

    assert report.skipped_rows == []
    assert groups_and_members("jobs-copy") == groups_and_members("jobs")
    assert Member.objects.filter(taxonomy__slug="jobs").count() == 25
    # And the copy exports to the very same bytes.
    assert export(client, "jobs-copy") == exported


def test_the_export_is_the_importers_columns_with_a_description_once_per_group(
    client, tiny_taxonomy, admin_user
):
    client.force_login(admin_user)
    lines = export(client, "jobs").decode("utf-8").splitlines()
    assert lines[0] == "group_code,group_name,text,description"
    accountants = [line for line in lines if line.startswith("13-2011,")]
    assert accountants == [
        "13-2011,Accountants,Accountants,Examine financial records",
        "13-2011,Accountants,Certified Public Accountant,",
        "13-2011,Accountants,Staff Accountant,",
        "13-2011,Accountants,Tax Accountant,",
    ]
    assert len(lines) == 1 + 21


def test_a_group_without_strings_is_a_row_with_no_text_and_imports_back(
    client, tiny_taxonomy, admin_user, tmp_path: Path
):
    empty = group_create(taxonomy=tiny_taxonomy, code="99-0001", name="Empty", user=admin_user)
    Group.objects.filter(id=empty.id).update(description="Nothing, yet")
    client.force_login(admin_user)
    exported = export(client, "jobs")
    assert exported.decode("utf-8").splitlines()[-1] == '99-0001,Empty,,"Nothing, yet"'
    path = tmp_path / "jobs.csv"
    path.write_bytes(exported)
    taxonomy_import(slug="jobs-copy", path=path, fmt="csv")
    assert groups_and_members("jobs-copy") == groups_and_members("jobs")
    assert not Member.objects.filter(group__taxonomy__slug="jobs-copy", group__code="99-0001")


FORMULAS = ["=cmd|' /C calc'!A0", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)", "'=already quoted"]


def test_cells_that_start_like_a_formula_are_escaped_and_import_back_unchanged(
    client, tiny_taxonomy, admin_user, tmp_path: Path
):
    target = group("35-3023")
    for text in FORMULAS:
        member_add(group=target, text=text, user=admin_user)
    group_rename(group=target, name='=HYPERLINK("http://x","Baristas")', user=admin_user)
    Group.objects.filter(id=target.id).update(description="@cmd description")
    client.force_login(admin_user)

    exported = export(client, "jobs")
    cells = [cell for row in csv.reader(io.StringIO(exported.decode())) for cell in row]
    assert not [cell for cell in cells if cell.startswith(("=", "+", "-", "@"))]
    for text in FORMULAS:
        assert "'" + text in cells
    assert '\'=HYPERLINK("http://x","Baristas")' in cells
    assert "'@cmd description" in cells

    path = tmp_path / "jobs.csv"
    path.write_bytes(exported)
    report = taxonomy_import(slug="jobs-copy", path=path, fmt="csv")
    assert report.skipped_rows == []
    assert groups_and_members("jobs-copy") == groups_and_members("jobs")
