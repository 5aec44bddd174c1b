from __future__ import annotations

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from models_app.models import TrainingRun
from tests.models_pages.conftest import first_version, rejected_finetune  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser

POLL_SECONDS = 2


def log_in_at(page, live_server, path: str, username: str, password: str) -> None:
    page.goto(f"{live_server.url}{path}")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next={path}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{live_server.url}{path}")
    # htmx is a deferred script: it starts polling only once it has loaded.
    page.wait_for_load_state("load")


def test_the_models_page_follows_an_active_run_without_reloading_and_stops_when_it_ends(
    page, live_server, admin_user, tiny_taxonomy
):
    run = TrainingRun.objects.create(
        taxonomy=tiny_taxonomy,
        kind=TrainingRun.Kind.FINETUNE,
        status=TrainingRun.Status.RUNNING,
        stage="train",
        progress=0.25,
        eta_seconds=120,
        requested_by=admin_user,
    )
    log_in_at(page, live_server, "/models/", "ada", "ada-pass-123")
    row = page.locator(f'[data-testid="run-row"][data-run-id="{run.id}"]')
    expect(row.get_by_test_id("run-progress")).to_contain_text("25%")
    expect(row.get_by_test_id("run-eta")).to_have_text("2 min")
    expect(page.get_by_test_id("runs")).to_have_attribute("hx-trigger", "every 2s")
    # A marker on the document: a full reload would drop it, a swap of the region keeps it.
    page.evaluate("window.notReloaded = true")

    TrainingRun.objects.filter(id=run.id).update(stage="encode", progress=0.6, eta_seconds=30)
    expect(row.get_by_test_id("run-progress")).to_contain_text("60%")
    expect(row).to_contain_text("encode")
    expect(row.get_by_test_id("run-eta")).to_have_text("30 s")
    assert page.evaluate("window.notReloaded") is True

    TrainingRun.objects.filter(id=run.id).update(
        status=TrainingRun.Status.REJECTED, stage="done", progress=1.0, finished_at=timezone.now()
    )
    # The poll that finds no active run reloads the page once: the live version and the
    # versions table may have changed with the run. The reloaded page does not poll.
    expect(row.get_by_test_id("run-status")).to_have_text("Rejected by the gate")
    page.wait_for_load_state("load")
    assert page.evaluate("window.notReloaded") is None
    expect(page.get_by_test_id("runs")).not_to_have_attribute("hx-trigger", "every 2s")
    # Nothing asks for the region any more: a change to the row is not fetched.
    polls: list[str] = []
    page.on(
        "request", lambda request: polls.append(request.url) if "/models/" in request.url else None
    )
    TrainingRun.objects.filter(id=run.id).update(stage="changed after the end")
    page.wait_for_timeout(POLL_SECONDS * 2.5 * 1000)
    assert polls == []
    expect(row).not_to_contain_text("changed after the end")


@pytest.mark.usefixtures("rejected_finetune")
def test_the_models_page_shows_the_loop_as_a_chart(page, live_server, curator):
    log_in_at(page, live_server, "/models/", "carla", "carla-pass-123")
    chart = page.get_by_test_id("history").get_by_test_id("chart")
    expect(chart).to_be_visible()
    box = chart.bounding_box()
    assert box["width"] > 300 and box["height"] > 100  # drawn at a readable size
    # One point a version: jobs/v1 and the rejected candidate jobs/v2.
    expect(chart.locator('[data-series="frozen suite, mean accuracy"] circle')).to_have_count(2)
    expect(chart.locator('[data-marker="reject"]')).to_have_count(1)
    # Each point names its series and value where the pointer rests.
    expect(chart.locator('[data-series="held-out verdicts"] circle title')).to_have_text(
        "held-out verdicts: 0.750"
    )
