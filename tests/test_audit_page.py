"""The audit page: who changed what and when, with the values before and after; newest first,
filtered, keyset-paginated; admins only."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from annotations.models import AuditEvent, Group
from annotations.selectors_taxonomy import AUDIT_PAGE_SIZE
from annotations.services.taxonomy import taxonomy_import
from annotations.services.taxonomy_edit import group_rename, member_add, member_move
from tests.conftest import TINY_CSV


def group(code: str, slug: str = "jobs") -> Group:
    return Group.objects.get(taxonomy__slug=slug, code=code)


def shown(response) -> list[str]:
    return [event.action for event in response.context["events"]]


@pytest.fixture
def edits(tiny_taxonomy, admin_user, curator):
    """Edits by two people in two taxonomies, oldest first."""
    taxonomy_import(slug="other", path=TINY_CSV, fmt="csv", user=admin_user)
    added = member_add(group=group("35-3023"), text="Latte Artist", user=admin_user)
    member_move(member=added, group=group("29-1141"), user=curator)
    group_rename(group=group("35-3023", "other"), name="Coffee people", user=curator)


def test_anonymous_visitors_are_sent_to_log_in(client, db):
    response = client.get("/audit/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/audit/"


def test_curators_may_not_read_the_audit_log(client, curator, edits):
    client.force_login(curator)
    assert client.get("/audit/").status_code == 403


def test_events_are_shown_newest_first_with_who_what_and_before_and_after(
    client, admin_user, edits
):
    client.force_login(admin_user)
    response = client.get("/audit/")
    assert response.status_code == 200
    assert shown(response) == [
        "group.rename",
        "member.move",
        "member.add",
        "taxonomy.import",
        "taxonomy.import",
    ]
    page = response.content.decode()
    assert "carla" in page and "ada" in page
    assert "&quot;name&quot;: &quot;Baristas&quot;" in page
    assert "&quot;name&quot;: &quot;Coffee people&quot;" in page
    assert "group.rename" in page


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"taxonomy": "other"}, ["group.rename", "taxonomy.import"]),
        ({"actor": "carla"}, ["group.rename", "member.move"]),
        ({"actor": "nobody"}, []),
        ({"action": "member.move"}, ["member.move"]),
        ({"action": "member"}, ["member.move", "member.add"]),
        ({"taxonomy": "jobs", "actor": "ada"}, ["member.add"]),
    ],
)
def test_events_can_be_filtered_by_taxonomy_actor_and_action(
    client, admin_user, edits, query, expected
):
    client.force_login(admin_user)
    response = client.get("/audit/", query)
    assert response.status_code == 200
    assert shown(response) == expected


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"taxonomy": "nope"}, "taxonomy: Select a valid choice"),
        ({"before": "abc"}, "before: Enter a whole number"),
        ({"before": "0"}, "before: Ensure this value is greater than or equal to 1"),
    ],
)
def test_a_bad_filter_is_a_400_naming_it(client, admin_user, db, query, message):
    client.force_login(admin_user)
    response = client.get("/audit/", query)
    assert response.status_code == 400
    assert message in response.content.decode()


@pytest.mark.parametrize(
    "filters", [{"action": "group.rename"}, {"action": "group.rename", "taxonomy": "jobs"}]
)
def test_older_events_are_reached_by_keyset_pages_that_keep_the_filters(
    client, admin_user, tiny_taxonomy, filters
):
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(
                actor=admin_user,
                taxonomy=tiny_taxonomy,
                action="group.rename",
                object_type="group",
                object_id=str(i),
                after={"n": i},
            )
            for i in range(AUDIT_PAGE_SIZE + 7)
        ]
    )
    client.force_login(admin_user)
    first = client.get("/audit/", filters)
    events = first.context["events"]
    assert len(events) == AUDIT_PAGE_SIZE
    assert events[0].after == {"n": AUDIT_PAGE_SIZE + 6}
    next_before = first.context["next_before"]
    assert next_before == events[-1].id
    older = f"?{urlencode(filters)}&before={next_before}".replace("&", "&amp;")
    assert older in first.content.decode()

    second = client.get("/audit/", {**filters, "before": next_before})
    assert [e.after["n"] for e in second.context["events"]] == list(range(6, -1, -1))
    assert second.context["next_before"] is None
