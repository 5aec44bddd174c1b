"""The Models page in Chromium: a candidate the gate rejected offers no rollback and shows the
figures its gate measured, labelled as the gate's; a run's progress never goes back."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from models_app.models import ModelVersion, TrainingRun
from models_app.training.services.runs import training_run_progress_writer
from tests.browser.test_models_page_in_browser import log_in_at
from tests.test_models_versions_table import rejected_candidate

pytestmark = pytest.mark.browser


@pytest.fixture
def rejected(tiny_taxonomy) -> ModelVersion:
    return rejected_candidate(ModelVersion.objects.get(taxonomy=tiny_taxonomy, number=1))


def test_a_rejected_candidate_is_not_offered_a_rollback_and_shows_the_gates_figures(
    page, live_server, admin_user, rejected
):
    log_in_at(page, live_server, "/models/", "ada", "ada-pass-123")
    row = page.locator('[data-testid="version-row"][data-label="jobs/v2"]')
    expect(row.get_by_test_id("never-live")).to_have_text("never live")
    expect(row.get_by_test_id("rejected-because")).to_contain_text("typos fell by 0.050")
    expect(row.get_by_test_id("rollback")).to_have_count(0)
    expect(row.get_by_test_id("version-typos")).to_have_text("0.850")
    expect(row.get_by_test_id("version-mean")).to_have_text("0.835")
    expect(row.get_by_test_id("measured-by-gate")).to_be_visible()
    expect(page.get_by_test_id("versions-figures-note")).to_contain_text(
        "The gate measures the live version the same way"
    )
    live = page.locator('[data-testid="version-row"][data-label="jobs/v1"]')
    expect(live.get_by_test_id("measured-by-gate")).to_have_count(0)


def test_the_progress_of_a_run_never_goes_back_on_the_page(
    page, live_server, admin_user, tiny_taxonomy
):
    run = TrainingRun.objects.create(
        taxonomy=tiny_taxonomy,
        kind=TrainingRun.Kind.FINETUNE,
        status=TrainingRun.Status.RUNNING,
        stage="start",
        requested_by=admin_user,
    )
    progress = training_run_progress_writer(run_id=run.id)
    log_in_at(page, live_server, "/models/", "ada", "ada-pass-123")
    row = page.locator(f'[data-testid="run-row"][data-run-id="{run.id}"]')

    # Training stopped by its time budget at 2 % of its steps ...
    progress("train", 0.02, 1.0)
    expect(row.get_by_test_id("run-progress")).to_contain_text("4%")
    # ... then the held-out check and the second training phase start at 0 % of theirs.
    progress("evaluate", 0.0, None)
    expect(row).to_contain_text("evaluate")
    expect(row.get_by_test_id("run-progress")).to_contain_text("4%")
    progress("train", 0.0, None)
    expect(row.locator("td").nth(4)).to_have_text("train")
    expect(row.get_by_test_id("run-progress")).to_contain_text("4%")
    progress("index", 0.5, None)
    expect(row.get_by_test_id("run-progress")).to_contain_text("90%")
    progress("evaluate", 0.5, None)
    expect(row).to_contain_text("evaluate")
    expect(row.get_by_test_id("run-progress")).to_contain_text("90%")
