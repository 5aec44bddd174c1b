"""The audit page in Chromium reads as words with links, not JSON with ids; the conflicts page
does not claim curators agree when no input was judged twice."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.models import Group
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from annotations.services.taxonomy_edit.members import member_add, member_move
from tests.browser.test_models_page_in_browser import log_in_at

pytestmark = pytest.mark.browser


def group(code: str) -> Group:
    return Group.objects.get(taxonomy__slug="jobs", code=code)


def test_the_audit_page_names_fields_groups_and_items_and_links_them(
    page, live_server, admin_user, curator, tiny_taxonomy
):
    item = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")[0]
    judgement_create(review_item=item, user=curator, verdict="reassign", group=group("15-1252"))
    added = member_add(group=group("35-3023"), text="Latte Artist", user=admin_user)
    member_move(member=added, group=group("29-1141"), user=admin_user)

    log_in_at(page, live_server, "/audit/", "ada", "ada-pass-123")

    events = page.get_by_test_id("audit-event")
    verdict = events.filter(has_text="judgement.create")
    expect(verdict.get_by_test_id("audit-after")).to_contain_text("item: “Java Barista”")
    expect(verdict.get_by_test_id("audit-after")).to_contain_text(
        "group: 15-1252 Software Developers"
    )
    moved = events.filter(has_text="member.move")
    expect(moved.get_by_test_id("audit-before")).to_contain_text("group: 35-3023 Baristas")
    expect(moved.get_by_test_id("audit-after")).to_contain_text("group: 29-1141 Registered Nurses")
    expect(page.get_by_test_id("audit-events")).not_to_contain_text('"group"')
    expect(page.get_by_test_id("audit-events")).not_to_contain_text("{")

    # The moved member's object is a link to the group it is in.
    moved.get_by_test_id("audit-object").get_by_role("link").click()
    expect(page).to_have_url(f"{live_server.url}/taxonomies/jobs/groups/29-1141/")
    expect(page.locator("body")).to_contain_text("Latte Artist")


def test_with_nothing_judged_twice_the_conflicts_page_says_so(
    page, live_server, admin_user, curator, tiny_taxonomy
):
    for item in inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Dev", "ICU RN"], source="api"):
        judgement_create(review_item=item, user=curator, verdict="confirm")

    log_in_at(page, live_server, "/review/conflicts/", "ada", "ada-pass-123")

    expect(page.get_by_test_id("no-conflicts")).to_have_text(
        "No input has been judged by two curators yet: there is nothing to compare."
    )
    expect(page.locator("#conflicts-panel")).not_to_contain_text("the curators agree")
