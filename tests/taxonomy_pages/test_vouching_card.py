"""The taxonomy page says what the product can vouch for: per suggested target, the probability
from which its answers meet it, the bound shown, and the recent inputs answered that surely."""

from __future__ import annotations

import re

from annotations.services.review.inputs import inputs_submit
from annotations.services.taxonomy import taxonomy_import
from tests.conftest import TINY_CSV
from tests.test_match_probability import RIGHT, WRONG


def test_the_page_shows_the_api_figures_for_each_suggested_target(
    client, tiny_taxonomy, admin_user, api_client
):
    inputs_submit(taxonomy=tiny_taxonomy, texts=RIGHT + list(WRONG), source="api")
    client.force_login(admin_user)
    page = client.get("/taxonomies/jobs/").content.decode()
    rows = re.findall(r'data-testid="vouching-row">(.*?)</tr>', page, re.S)
    assert len(rows) == 2
    assert "starter ranker" in page and "every answer still goes to review" in page
    for row, target in zip(rows, (0.95, 0.9), strict=True):
        found = api_client.get("/api/v1/taxonomies/jobs/vouching", {"target": target}).json()
        assert f"{round(target * 100)}%" in row
        if found["threshold"] is None:
            assert "Not shown by the evidence" in row
        else:
            assert f"{found['threshold']:.2f}" in row
            assert f"{found['recent_vouched']} of {found['recent_inputs']} inputs" in row
            assert f"{found['evidence']['right']} of " in row


def test_without_a_live_model_the_card_says_so(client, db, admin_user):
    taxonomy_import(slug="jobs", path=TINY_CSV, fmt="csv", name="Tiny jobs")
    client.force_login(admin_user)
    page = client.get("/taxonomies/jobs/").content.decode()
    assert "No live model yet: nothing answers to vouch for." in page
