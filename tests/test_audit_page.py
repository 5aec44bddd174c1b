"""The audit page: who changed what and when, with the values before and after; newest first,
filtered, keyset-paginated; admins only."""

from __future__ import annotations

import ast
from pathlib import Path
from urllib.parse import urlencode

import pytest

from annotations.models import AuditEvent, Group
from annotations.selectors.taxonomy import AUDIT_PAGE_SIZE
from annotations.services.accounts import api_token_revoke, api_token_rotate
from annotations.services.audit import audit_record
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from annotations.services.taxonomy import taxonomy_import
from annotations.services.taxonomy_edit.groups import group_rename
from annotations.services.taxonomy_edit.members import member_add, member_move
from tests.conftest import TINY_CSV


def group(code: str, slug: str = "jobs") -> Group:
    return Group.objects.get(taxonomy__slug=slug, code=code)


def shown(response) -> list[str]:
    return [row.event.action for row in response.context["events"]]


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
    assert "<dt>name:</dt> <dd>Baristas</dd>" in page
    assert "<dt>name:</dt> <dd>Coffee people</dd>" in page
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
    events = [row.event for row in first.context["events"]]
    assert len(events) == AUDIT_PAGE_SIZE
    assert events[0].after == {"n": AUDIT_PAGE_SIZE + 6}
    next_before = first.context["next_before"]
    assert next_before == events[-1].id
    older = f"?{urlencode(filters)}&before={next_before}".replace("&", "&amp;")
    assert older in first.content.decode()

    second = client.get("/audit/", {**filters, "before": next_before})
    assert [r.event.after["n"] for r in second.context["events"]] == list(range(6, -1, -1))
    assert second.context["next_before"] is None


def test_values_are_named_fields_with_groups_and_items_by_name_and_objects_linked(
    client, admin_user, curator, tiny_taxonomy
):
    item = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")[0]
    baristas, developers = group("35-3023"), group("15-1252")
    reassigned_from = item.top_group
    judgement_create(review_item=item, user=curator, verdict="reassign", group=developers)
    added = member_add(group=baristas, text="Latte Artist", user=admin_user)
    member_move(member=added, group=developers, user=admin_user)
    client.force_login(admin_user)
    page = client.get("/audit/").content.decode()

    # The verdict: the item by its text, the groups by code and name, each linked.
    assert "<dt>item:</dt> <dd>“Java Barista”</dd>" in page
    assert (
        '<dt>group:</dt> <dd><a href="/taxonomies/jobs/groups/15-1252/">15-1252 Software '
        "Developers</a></dd>" in page
    )
    assert (
        f'<dt>rejected group:</dt> <dd><a href="/taxonomies/jobs/groups/{reassigned_from.code}/">'
        f"{reassigned_from.code} {reassigned_from.name}</a></dd>" in page
    )
    # The moved member: its group before and after, by name, with no numeric id left.
    assert '<dt>group:</dt> <dd><a href="/taxonomies/jobs/groups/35-3023/">35-3023 Baristas' in page
    assert "group_id" not in page and "&quot;" not in page
    # The object of a member event links to the group it is in now.
    assert '<a href="/taxonomies/jobs/groups/15-1252/">member “Latte Artist” in 15-1252</a>' in page


# --- the actions the filter offers are the actions recorded ----------------------------------

ROOT = Path(__file__).resolve().parent.parent


def recorded_actions() -> set[str]:
    """Every action the code passes to audit_record or builds an AuditEvent with, read from the
    source: the string constants in the ``action=`` argument (both arms of a conditional)."""
    found = set()
    for package in ("annotations", "models_app", "worker", "siamweb"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.Call):
                    continue
                called = getattr(node.func, "id", getattr(node.func, "attr", None))
                if called not in ("audit_record", "audit_records", "AuditEvent"):
                    continue
                for keyword in node.keywords:
                    if keyword.arg == "action":
                        found |= {
                            constant.value
                            for constant in ast.walk(keyword.value)
                            if isinstance(constant, ast.Constant)
                            and isinstance(constant.value, str)
                        }
    return found


def test_every_action_the_code_records_is_one_the_filter_offers():
    recorded = recorded_actions()
    # The walk finds them: verdicts, taxonomy edits, promotions and tokens among them.
    assert {
        "judgement.create",
        "member.move",
        "training_run.promote",
        "api_token.create",
    } <= recorded
    assert recorded <= set(AuditEvent.ACTIONS), recorded - set(AuditEvent.ACTIONS)


def test_an_action_not_in_the_list_is_refused_and_nothing_is_stored(admin_user):
    with pytest.raises(ValueError, match=r"'member\.teleport' is not an audit action"):
        audit_record(actor=admin_user, action="member.teleport", obj=admin_user)
    assert not AuditEvent.objects.exists()


def test_a_revoked_token_is_found_by_the_filter_that_offers_its_action(client, admin_user, curator):
    api_token_rotate(user=curator)
    api_token_revoke(user=curator)
    client.force_login(admin_user)
    page = client.get("/audit/")
    assert '<option value="api_token.revoke">' in page.content.decode()
    response = client.get("/audit/?" + urlencode({"action": "api_token.revoke"}))
    assert shown(response) == ["api_token.revoke"]
    assert response.context["events"][0].event.actor == curator
