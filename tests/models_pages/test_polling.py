"""The Models pages keep up with runs: the runs region and a run's page poll only while a run is
active, and the page costs the same queries however many runs and versions exist."""

from __future__ import annotations

import re
from datetime import timedelta

from django.utils import timezone

from models_app.models import ModelVersion, TrainingRun
from tests.models_pages.conftest import make_run

HTMX = {"HTTP_HX_REQUEST": "true"}

POLLING = 'hx-trigger="every 2s"'


def test_the_runs_region_polls_while_a_run_is_active(client, curator, tiny_taxonomy):
    make_run(tiny_taxonomy, stage="train", progress=0.25, eta_seconds=40)
    client.force_login(curator)
    page = client.get("/models/").content.decode()
    region = re.search(r'<section id="runs"[^>]*>', page).group(0)
    assert POLLING in region
    assert 'hx-get="/models/?taxonomy=jobs"' in region
    partial = client.get("/models/", {"taxonomy": "jobs"}, **HTMX)
    assert partial.status_code == 200
    body = partial.content.decode()
    assert '<section id="runs"' in body
    assert POLLING in body and "<html" not in body
    assert "25%" in body and "40 s" in body
    assert "HX-Refresh" not in partial


def test_the_time_left_counts_down_from_the_last_report_and_says_when_it_is_past(
    client, curator, tiny_taxonomy
):
    """A stage that reports rarely (the gate's measuring) must not show one figure for half a
    minute: the time left is the last report's, less the time since it was written."""
    reported = timezone.now() - timedelta(seconds=25)
    run = make_run(
        tiny_taxonomy, stage="evaluate", progress=0.7, eta_seconds=40, heartbeat_at=reported
    )
    client.force_login(curator)
    for page in (
        client.get("/models/", {"taxonomy": "jobs"}, **HTMX).content.decode(),
        client.get(f"/models/runs/{run.id}/", **HTMX).content.decode(),
    ):
        cell = re.search(r'data-testid="run-eta">(?:about )?(\d+) s<', page)
        assert cell, page
        # 15 s when the page is read at once; less however slowly this machine reads it.
        assert 1 <= int(cell.group(1)) <= 15

    TrainingRun.objects.filter(id=run.id).update(heartbeat_at=reported - timedelta(seconds=60))
    for page in (
        client.get("/models/", {"taxonomy": "jobs"}, **HTMX).content.decode(),
        client.get(f"/models/runs/{run.id}/", **HTMX).content.decode(),
    ):
        assert 'data-testid="run-eta">longer than its estimate<' in page


def test_the_runs_region_stops_polling_and_reloads_the_page_once_no_run_is_active(
    client, curator, tiny_taxonomy
):
    client.force_login(curator)
    page = client.get("/models/").content.decode()
    assert POLLING not in page
    partial = client.get("/models/", {"taxonomy": "jobs"}, **HTMX)
    assert partial.status_code == 200
    assert POLLING not in partial.content.decode()
    assert partial["HX-Refresh"] == "true"


def test_a_run_page_polls_only_while_the_run_is_active(client, curator, tiny_taxonomy):
    run = make_run(tiny_taxonomy, stage="train", progress=0.5)
    client.force_login(curator)
    assert POLLING in client.get(f"/models/runs/{run.id}/").content.decode()
    partial = client.get(f"/models/runs/{run.id}/", **HTMX).content.decode()
    assert '<div id="run-panel"' in partial
    assert POLLING in partial and "<html" not in partial
    TrainingRun.objects.filter(id=run.id).update(status=TrainingRun.Status.FAILED, error="boom")
    partial = client.get(f"/models/runs/{run.id}/", **HTMX).content.decode()
    assert POLLING not in partial and "boom" in partial


def test_the_page_costs_the_same_queries_however_many_runs_and_versions_exist(
    client, curator, tiny_taxonomy, django_assert_max_num_queries
):
    client.force_login(curator)
    # One of them counts the verdicts the first ranker fit waits for, while the starter ranks;
    # one asks whether the taxonomy has an auto-coding policy (its audits are shown if so).
    with django_assert_max_num_queries(14) as few:
        client.get("/models/")
    for number in range(2, 30):
        ModelVersion.objects.create(
            taxonomy=tiny_taxonomy,
            number=number,
            encoder_kind="char_ngram_tfidf",
            artifact_path="x",
            parent=ModelVersion.objects.get(taxonomy=tiny_taxonomy, number=number - 1),
        )
        make_run(tiny_taxonomy, status=TrainingRun.Status.REJECTED, requested_by=curator)
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = client.get("/models/")
    assert len(response.context["runs"]) == 20
