"""A taxonomy import leaves one audit event, with the report's counts."""

from __future__ import annotations

from annotations.services.taxonomy import taxonomy_import
from tests.conftest import TINY_CSV
from tests.taxonomy_edit.conftest import events


def test_an_import_is_one_audit_event_with_the_reports_counts(db, admin_user):
    report = taxonomy_import(slug="jobs", path=TINY_CSV, fmt="csv", user=admin_user)
    (event,) = events("taxonomy.import")
    assert (event.actor, event.taxonomy, event.object_type) == (
        admin_user,
        report.taxonomy,
        "taxonomy",
    )
    assert event.after["file"] == "tiny_taxonomy.csv"
    assert (event.after["rows_read"], event.after["groups_created"]) == (21, 5)
    assert (event.after["members_created"], event.after["unchanged"]) == (21, False)
