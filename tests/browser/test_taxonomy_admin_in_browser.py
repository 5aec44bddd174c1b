from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.models import AuditEvent, Group, Member
from tests.browser.conftest import settled

pytestmark = pytest.mark.browser

BARISTAS, NURSES = "35-3023", "29-1141"


def log_in_at(page, live_server, path: str, username: str, password: str) -> None:
    page.goto(f"{live_server.url}{path}")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next={path}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{live_server.url}{path}")
    # htmx is a deferred script: act only once it has wired up the page's forms.
    page.wait_for_load_state("load")


def test_an_admin_adds_a_string_moves_it_with_the_type_ahead_and_merges_two_groups(
    page, live_server, admin_user, tiny_taxonomy
):
    baristas_url = f"/taxonomies/jobs/groups/{BARISTAS}/"
    log_in_at(page, live_server, baristas_url, "ada", "ada-pass-123")
    expect(page.get_by_test_id("group-title")).to_contain_text("Baristas")

    page.get_by_test_id("add-text").fill("Latte Artist")
    page.get_by_test_id("add").click()
    expect(page.get_by_test_id("notice")).to_have_text("Added “Latte Artist”.")
    row = page.locator('[data-testid="member-row"][data-text="Latte Artist"]')
    expect(row).to_contain_text("ada")
    assert Member.objects.get(text="Latte Artist").group.code == BARISTAS

    row.get_by_test_id("move").click()
    expect(page.get_by_test_id("move-panel")).to_contain_text("Move “Latte Artist”")
    settled(page)
    page.get_by_test_id("move-search").fill("nurse")
    page.get_by_test_id("target-results").get_by_role("button", name="Registered Nurses").click()
    expect(page.get_by_test_id("notice")).to_have_text(
        "Moved “Latte Artist” to 29-1141 Registered Nurses."
    )
    expect(page.locator('[data-testid="member-row"][data-text="Latte Artist"]')).to_have_count(0)
    assert Member.objects.get(text="Latte Artist").group.code == NURSES

    settled(page)
    page.get_by_test_id("merge-search").fill("regist")
    page.get_by_test_id("target-results").get_by_role("button", name="Registered Nurses").click()
    expect(page.get_by_test_id("merge-panel")).to_contain_text(
        "Merge 35-3023 Baristas into 29-1141 Registered Nurses?"
    )
    assert Group.objects.filter(code=BARISTAS).exists()
    page.get_by_test_id("confirm-merge").click()

    expect(page).to_have_url(f"{live_server.url}/taxonomies/jobs/groups/{NURSES}/")
    expect(page.get_by_test_id("group-title")).to_contain_text("Registered Nurses")
    expect(page.locator('[data-testid="member-row"][data-text="Coffee Maker"]')).to_have_count(1)
    expect(page.locator('[data-testid="member-row"][data-text="Latte Artist"]')).to_have_count(1)
    assert not Group.objects.filter(code=BARISTAS).exists()
    assert list(
        AuditEvent.objects.exclude(action="taxonomy.import")
        .order_by("id")
        .values_list("action", flat=True)
    ) == ["member.add", "member.move", "group.merge"]


def test_an_admin_sets_auto_coding_in_percent_and_a_refusal_shows_where_the_form_is(
    page, live_server, admin_user, tiny_taxonomy
):
    from annotations.models import AutoCodingPolicy

    # A short window, as a taxonomy of many groups is: the form is below the fold.
    page.set_viewport_size({"width": 1000, "height": 360})
    log_in_at(page, live_server, "/taxonomies/jobs/", "ada", "ada-pass-123")
    expect(page.get_by_test_id("auto-coding-jump")).to_have_text("auto-coding off")
    expect(page.get_by_test_id("auto-coding-target")).not_to_be_in_viewport()
    page.get_by_test_id("auto-coding-jump").click()
    expect(page.get_by_role("heading", name="Answers it can vouch for")).to_be_in_viewport()
    page.get_by_test_id("auto-coding-target").fill("30")
    page.get_by_test_id("auto-coding-save").click()
    # The refusal is beside the form, below the groups: the page opens there, not at its top.
    error = page.get_by_test_id("auto-coding-error")
    expect(error).to_contain_text("the target precision is from 50% to 99.9%")
    expect(error).to_be_in_viewport()
    expect(page.get_by_test_id("auto-coding-target")).to_have_value("30")
    assert not AutoCodingPolicy.objects.exists()

    page.get_by_test_id("auto-coding-target").fill("99.5")
    page.get_by_test_id("auto-coding-save").click()
    # On, and coding nothing for now: the starter's evidence shows no threshold for 99.5%.
    expect(page.get_by_test_id("auto-coding-jump")).to_have_text(
        "auto-coding on, coding nothing for now"
    )
    expect(page.get_by_test_id("auto-coding-target")).to_have_value("99.5")
    assert AutoCodingPolicy.objects.get().target_precision == 0.995
