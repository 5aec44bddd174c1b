"""What Prodigy and Label Studio users look for on the review card: a list of every shortcut,
flags for the admins, a daily goal, the input's words marked in the evidence, and beside each
group the members nearest the input."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from annotations.models import Member, ReviewFlag
from annotations.services.review.inputs import inputs_submit
from annotations.services.taxonomy_edit.members import member_add
from tests.browser.conftest import settled
from tests.browser.test_review_in_browser import log_in
from tests.browser.test_review_keyboard import shown_item, verdicts_today

pytestmark = pytest.mark.browser


@pytest.fixture
def queued(tiny_taxonomy):
    return inputs_submit(
        taxonomy=tiny_taxonomy, texts=["Senior Java Engineer", "Java Barista"], source="demo"
    )


def test_question_mark_lists_every_shortcut_and_escape_closes_the_list(
    page, live_server, curator, queued
):
    log_in(page, live_server, "carla", "carla-pass-123")
    help_ = page.get_by_test_id("shortcuts-help")
    expect(help_).to_be_hidden()
    page.keyboard.press("?")
    expect(help_).to_be_visible()
    for key in ["1", "a", "x", "r", "Enter", "n", "space", "u", "f", "Esc", "?"]:
        expect(help_.locator("kbd", has_text=key).first).to_be_visible()
    page.keyboard.press("a")  # behind the open list, keys judge nothing
    page.keyboard.press("Escape")
    expect(help_).to_be_hidden()
    expect(page.get_by_test_id("progress")).to_contain_text("0 yours today")
    page.keyboard.press("a")  # closed again, the keys are the card's
    verdicts_today(page, 1)
    # The button beside the filters opens it as well.
    page.get_by_test_id("shortcuts-open").click()
    expect(help_).to_be_visible()


def test_f_flags_the_card_for_the_admins_who_list_and_resolve_it(
    browser, page, live_server, curator, admin_user, queued
):
    log_in(page, live_server, "carla", "carla-pass-123")
    item = shown_item(page)
    page.keyboard.press("f")
    expect(page.get_by_test_id("flag-comment")).to_be_focused()
    page.keyboard.type("a drone <b>pilot</b> has no group")  # "a" typed, not a shortcut
    page.keyboard.press("Shift+Tab")  # the keyboard alone: unsure -> taxonomy gap
    kind = page.get_by_test_id("flag-kind")
    expect(kind).to_be_focused()
    kind.press("ArrowDown")
    expect(kind).to_have_value("taxonomy_gap")
    page.keyboard.press("Enter")  # sent from the kind list, the comment with it

    expect(page.get_by_test_id("notice")).to_have_text("Flagged for the admins: taxonomy gap.")
    expect(page.get_by_test_id("review-card")).to_have_attribute("data-item-id", str(item.id))
    flag = ReviewFlag.objects.get()
    assert (flag.review_item_id, flag.user.username, flag.kind, flag.comment) == (
        item.id,
        "carla",
        "taxonomy_gap",
        "a drone <b>pilot</b> has no group",
    )
    assert not item.judgements.exists()

    admin_context = browser.new_context()
    admin = admin_context.new_page()
    try:
        admin.goto(f"{live_server.url}/accounts/login/?next=/review/flags/")
        admin.get_by_label("Username").fill("ada")
        admin.get_by_label("Password").fill("ada-pass-123")
        admin.get_by_role("button", name="Log in").click()
        row = admin.get_by_test_id("flag")
        expect(row).to_have_count(1)
        expect(row).to_contain_text("Taxonomy gap")
        expect(row).to_contain_text("a drone <b>pilot</b> has no group")  # shown, not parsed
        expect(row.locator("b")).to_have_count(0)
        link = row.get_by_test_id("flag-input")
        expect(link).to_have_text(item.input.text)
        row.get_by_test_id("flag-resolve").click()
        expect(admin.get_by_test_id("flags-empty")).to_be_visible()
        flag.refresh_from_db()
        assert flag.resolved_by.username == "ada"
        link_target = f"/inputs/?taxonomy=jobs&q={item.input.text.replace(' ', '%20')}"
        admin.goto(f"{live_server.url}/review/flags/?status=resolved")
        expect(admin.get_by_test_id("flag-input")).to_have_attribute("href", link_target)
    finally:
        admin_context.close()


def test_the_daily_goal_bar_fills_with_the_curators_verdicts(
    page, live_server, curator, queued, settings
):
    settings.SIAMWEB_DAILY_GOAL = 2
    log_in(page, live_server, "carla", "carla-pass-123")
    goal = page.get_by_test_id("daily-goal")
    expect(goal.get_by_test_id("daily-goal-text")).to_have_text("0 of 2 today (0 %)")
    expect(goal.locator("progress")).to_have_attribute("max", "2")
    expect(goal.locator("progress")).to_have_attribute("value", "0")
    page.keyboard.press("a")
    verdicts_today(page, 1)
    expect(goal.get_by_test_id("daily-goal-text")).to_have_text("1 of 2 today (50 %)")
    expect(goal.locator("progress")).to_have_attribute("value", "1")
    page.keyboard.press("n")
    verdicts_today(page, 2)
    expect(goal.get_by_test_id("daily-goal-text")).to_have_text("Daily goal reached: 2 of 2")


def test_the_inputs_words_are_marked_in_the_evidence_and_never_read_as_html(
    page, live_server, curator, tiny_taxonomy
):
    nurses = tiny_taxonomy.groups.get(code="29-1141")
    member_add(group=nurses, text="ICU <b>Staff</b> Nurse", user=None)
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["icu staff nurse"], source="demo")
    top = item.prediction.ranked_groups[0]
    assert top["member"] == "ICU <b>Staff</b> Nurse"
    log_in(page, live_server, "carla", "carla-pass-123")
    evidence = page.get_by_test_id("evidence").first
    # The probability heads the group; the evidence names the member and its similarity.
    expect(evidence).to_have_text(re.compile(r"^matched “ICU <b>Staff</b> Nurse” \(similarity"))
    assert evidence.locator("mark").all_inner_texts() == ["ICU", "Staff", "Nurse"]
    expect(page.get_by_test_id("review-card").locator("b")).to_have_count(0)
    # The other members beside it are marked the same way.
    others = page.get_by_test_id("group-members").first
    expect(others.locator("mark", has_text="Nurse")).not_to_have_count(0)


def test_also_lists_the_members_nearest_the_input_not_the_first_ones(
    page, live_server, curator, tiny_taxonomy
):
    accountants = tiny_taxonomy.groups.get(code="13-2011")
    for text in ["Senior Auditor", "Payroll Clerk", "Senior Tax Preparer"]:
        Member.objects.create(
            taxonomy=tiny_taxonomy, group=accountants, text=text, normalized_text=text.lower()
        )
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["senior tax accountant"], source="demo")
    top = item.prediction.ranked_groups[0]
    assert (top["name"], top["member"]) == ("Accountants", "Tax Accountant")
    log_in(page, live_server, "carla", "carla-pass-123")
    settled(page)
    others = page.get_by_test_id("group-members").first
    # Nearest "senior tax accountant" by shared trigrams; first by id would have been
    # "Accountants · Certified Public Accountant · Staff Accountant".
    expect(others).to_have_text("also: Accountants · Staff Accountant · Senior Tax Preparer")


def test_guidelines_an_admin_writes_open_on_the_curators_card_and_run_nothing(
    browser, page, live_server, curator, admin_user, queued
):
    admin_context = browser.new_context()
    admin = admin_context.new_page()
    try:
        admin.goto(f"{live_server.url}/accounts/login/?next=/taxonomies/jobs/")
        admin.get_by_label("Username").fill("ada")
        admin.get_by_label("Password").fill("ada-pass-123")
        admin.get_by_role("button", name="Log in").click()
        admin.get_by_test_id("guidelines-text").fill(
            "Choose **Software Developers** for engineers.\n\n<img src=x onerror=alert(1)>"
        )
        admin.get_by_test_id("guidelines-save").click()
        expect(admin.get_by_test_id("notice").first).to_contain_text("Guidelines saved.")
    finally:
        admin_context.close()

    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, live_server, "carla", "carla-pass-123")
    guidelines = page.get_by_test_id("guidelines")
    expect(guidelines).to_be_visible()
    expect(guidelines.locator("strong")).to_be_hidden()  # folded until asked for
    guidelines.locator("summary").click()
    expect(guidelines.locator("strong")).to_have_text("Software Developers")
    expect(guidelines).to_contain_text("<img src=x onerror=alert(1)>")  # shown as text
    expect(guidelines.locator("img")).to_have_count(0)
    assert dialogs == []


def test_f_then_typing_and_enter_sends_the_comment(page, live_server, curator, queued):
    """Typed straight after f, the comment went into the kind list and Enter sent nothing."""
    log_in(page, live_server, "carla", "carla-pass-123")
    item = shown_item(page)
    page.keyboard.press("f")
    page.keyboard.type("no group for this")
    page.keyboard.press("Enter")

    expect(page.get_by_test_id("notice")).to_have_text("Flagged for the admins: unsure.")
    flag = ReviewFlag.objects.get()
    assert (flag.review_item_id, flag.kind, flag.comment) == (
        item.id,
        "unsure",
        "no group for this",
    )
    assert not item.judgements.exists()
