"""A curator uploads a file on the Bulk page, watches its job move without reloading, and
downloads the result once it is whole."""

from __future__ import annotations

import csv
import io

import pytest
from playwright.sync_api import expect

from models_app.bulk.run import bulk_job_execute
from models_app.models import BulkJob
from tests.browser.test_models_page_in_browser import log_in_at

pytestmark = pytest.mark.browser

TITLES = ["icu nurse", "Senior Java Engineer", "Head Barista", "CDL Truck Driver", "=1+1"]


def test_upload_follow_the_progress_and_download_the_result(
    page, live_server, curator, tiny_taxonomy, tmp_path
):
    source = tmp_path / "ads.csv"
    source.write_text('ref,"job, title"\n' + "".join(f"{i},{t}\n" for i, t in enumerate(TITLES)))
    log_in_at(page, live_server, "/bulk/", "carla", "carla-pass-123")
    page.get_by_role("link", name="Bulk").click()  # linked from the nav
    page.get_by_label("Taxonomy").select_option("jobs")
    column = page.get_by_label("CSV column to normalize")
    expect(column).to_have_value("text")
    page.get_by_label("File", exact=True).set_input_files(str(source))
    # The file's header, read in the browser: its columns are offered, "text" is not one.
    hint = page.get_by_test_id("bulk-columns")
    expect(hint).to_have_text("Columns in ads.csv: 'ref', 'job, title'")
    assert page.locator("#bulk-columns option").evaluate_all("o => o.map(x => x.value)") == [
        "ref", "job, title",
    ]  # fmt: skip
    expect(column).to_have_value("")
    column.fill("job, title")
    page.get_by_role("button", name="Start the job").click()

    job = BulkJob.objects.get()
    expect(page).to_have_url(f"{live_server.url}/bulk/{job.id}/")
    page.wait_for_load_state("load")
    expect(page.get_by_test_id("job-status")).to_have_text("Queued")
    panel = page.get_by_test_id("bulk-job-panel")
    expect(panel).to_have_attribute("hx-trigger", "every 2s")
    page.evaluate("window.notReloaded = true")

    seen = []

    def watch(current: BulkJob) -> None:
        # Between two chunks (the worker's checkpoint): the open page shows it by itself.
        if current.rows_done == 2:
            expect(page.get_by_test_id("job-status")).to_have_text("Running")
            expect(page.get_by_test_id("job-rows")).to_have_text("2")
            expect(page.get_by_test_id("job-progress")).not_to_contain_text(" 0%")
            expect(page.get_by_test_id("job-version")).to_have_text("jobs/v1")
            expect(page.get_by_test_id("job-eta")).to_contain_text("about")
            expect(page.get_by_test_id("download-csv")).to_have_count(0)  # not while half-written
            seen.append(current.rows_done)

    bulk_job_execute(job_id=job.id, chunk_rows=2, after_chunk=watch)
    assert seen == [2]
    expect(page.get_by_test_id("job-status")).to_have_text("Succeeded")
    expect(page.get_by_test_id("job-rows")).to_have_text("5")
    assert page.evaluate("window.notReloaded") is True
    expect(panel).not_to_have_attribute("hx-trigger", "every 2s")

    with page.expect_download() as download:
        page.get_by_test_id("download-csv").click()
    assert download.value.suggested_filename == "ads-normalized.csv"
    rows = list(csv.DictReader(io.StringIO(download.value.path().read_text())))
    assert [r["job, title"] for r in rows] == [*TITLES[:4], "'=1+1"]
    assert rows[0]["group_code"] == "29-1141" and rows[0]["model_version"] == "jobs/v1"


def test_a_file_without_the_column_is_refused_on_the_form(
    page, live_server, curator, tiny_taxonomy, tmp_path
):
    source = tmp_path / "ads.csv"
    source.write_text("ref,title\n1,icu nurse\n")
    text_file = tmp_path / "ads.txt"
    text_file.write_text("icu nurse\n")
    log_in_at(page, live_server, "/bulk/", "carla", "carla-pass-123")
    page.get_by_label("Taxonomy").select_option("jobs")
    file_field, hint = page.get_by_label("File", exact=True), page.get_by_test_id("bulk-columns")
    file_field.set_input_files(str(source))
    expect(hint).to_have_text("Columns in ads.csv: 'ref', 'title'")
    file_field.set_input_files(str(text_file))  # a text file has no columns to offer
    expect(hint).to_be_hidden()
    expect(page.locator("#bulk-columns option")).to_have_count(0)
    file_field.set_input_files(str(source))
    expect(hint).to_be_visible()
    page.get_by_label("CSV column to normalize").fill("job title")
    page.get_by_role("button", name="Start the job").click()
    expect(page.get_by_test_id("field-error")).to_have_text(
        "file: ads.csv has no column 'job title'; its columns are 'ref', 'title'"
    )
    assert not BulkJob.objects.exists()
