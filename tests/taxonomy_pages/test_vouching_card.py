"""The taxonomy page says what the product can vouch for: per suggested target, the probability
from which its answers meet it, the bound shown, and the recent inputs answered that surely."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from annotations.models import AutoCodingPolicy
from annotations.services.review.inputs import inputs_submit
from annotations.services.taxonomy import taxonomy_import
from tests.conftest import TINY_CSV
from tests.test_match_probability import RIGHT, WRONG


def test_the_page_shows_the_api_figures_for_each_suggested_target(
    client, tiny_taxonomy, admin_user
):
    inputs_submit(taxonomy=tiny_taxonomy, texts=RIGHT + list(WRONG), source="api")
    client.force_login(admin_user)
    page = client.get("/taxonomies/jobs/").content.decode()
    rows = re.findall(r'data-testid="vouching-row">(.*?)</tr>', page, re.S)
    assert len(rows) == 2
    assert "starter ranker" in page and "Off: every answer waits for review." in page
    # The section sits below the groups: the top of the page says its state and links to it.
    assert '<a href="#auto-coding" data-testid="auto-coding-jump">auto-coding off</a>' in page
    assert 'id="auto-coding" data-testid="vouching-card"' in page
    for row, target in zip(rows, (0.95, 0.9), strict=True):
        found = client.get("/api/v1/taxonomies/jobs/vouching", {"target": target}).json()
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


def test_an_admin_sets_auto_coding_on_the_page_and_bad_values_are_refused(
    client, tiny_taxonomy, admin_user
):
    """The page shows targets in percent, so its form takes percent: "95" is 95%."""
    client.force_login(admin_user)
    for typed, said in [
        ("30", "the target precision is from 50% to 99.9% (empty turns it off), got 30%"),
        ("0.95", "got 0.95%"),  # a fraction in a percent field: refused, not guessed
        ("ninety", "the target precision is a percentage such as 95 or 95%, got ninety"),
        # Past what decimal's exponents hold: refused by its range, not a server error.
        ("1e9999999", "got 1e9999999%"),
        ("-1e9999999", "got -1e9999999%"),
    ]:
        refused = client.post("/taxonomies/jobs/auto-coding", {"target_precision": typed})
        page = refused.content.decode()
        assert refused.status_code == 400 and said in page and "nothing changed" in page
        # What was typed stays in the box, to be mended.
        assert f'value="{typed}" data-testid="auto-coding-target"' in page
    refused = client.post(
        "/taxonomies/jobs/auto-coding", {"target_precision": "95", "audit_share": "150"}
    )
    assert refused.status_code == 400
    assert "the audit share is from 0% to 100%, got 150%" in refused.content.decode()
    assert not AutoCodingPolicy.objects.exists()

    wanted = {"target_precision": "99.5%", "audit_share": "10"}
    saved = client.post("/taxonomies/jobs/auto-coding", wanted, follow=True)
    page = saved.content.decode()
    assert "Auto-coding set (version 1)" in page
    assert "On (version 1)" in page and "10% of them go to review blind" in page
    # The starter's 523 answers cannot show 99.5% (a Wilson bound that high needs more): the
    # policy is on but codes nothing, and the page says so.
    vouching = client.get("/api/v1/taxonomies/jobs/vouching", {"target": 0.995}).json()
    assert vouching["threshold"] is None
    jump = "auto-coding on, coding nothing for now"
    assert "coding nothing for now" in page
    policy = AutoCodingPolicy.objects.get()
    assert (policy.target_precision, policy.audit_share) == (0.995, 0.1)
    # The form shows the policy as it takes it.
    assert 'value="99.5" data-testid="auto-coding-target"' in page
    assert 'value="10" data-testid="auto-coding-audit"' in page
    assert f'data-testid="auto-coding-jump">{jump}</a>' in page
    client.post("/taxonomies/jobs/auto-coding", {"target_precision": "95", "audit_share": ""})
    policy = AutoCodingPolicy.objects.get()
    assert (policy.target_precision, policy.audit_share) == (0.95, 0.05)
    page = client.get("/taxonomies/jobs/").content.decode()
    assert 'value="95" data-testid="auto-coding-target"' in page
    off = client.post("/taxonomies/jobs/auto-coding", {"target_precision": ""}, follow=True)
    assert "Auto-coding is off" in off.content.decode()
    assert AutoCodingPolicy.objects.get().target_precision is None


@pytest.mark.parametrize(
    ("target", "share", "stored"),
    [
        ("99.9", "5", (0.999, 0.05)),  # 99.9 / 100 in floats is 0.9990000000000001: refused
        ("99.9%", "5%", (0.999, 0.05)),
        ("99.90", "100", (0.999, 1.0)),
        ("50", "0", (0.5, 0.0)),
        ("57.7", "0.3", (0.577, 0.003)),
    ],
)
def test_the_form_takes_every_value_its_help_text_allows(
    client, tiny_taxonomy, admin_user, target, share, stored
):
    client.force_login(admin_user)
    wanted = {"target_precision": target, "audit_share": share}
    response = client.post("/taxonomies/jobs/auto-coding", wanted)
    assert response.status_code == 302, response.content.decode()
    policy = AutoCodingPolicy.objects.get()
    assert (policy.target_precision, policy.audit_share) == stored


def test_a_refusal_from_the_service_is_said_in_percent_as_the_form_takes_it(
    client, tiny_taxonomy, admin_user, monkeypatch
):
    """The service words its range in fractions, for the API; the page says it in percent."""
    from annotations.services.review import auto_coding

    monkeypatch.setattr(auto_coding, "TARGET_RANGE", (0.5, 0.99))
    client.force_login(admin_user)
    wanted = {"target_precision": "99.5", "audit_share": "5"}
    refused = client.post("/taxonomies/jobs/auto-coding", wanted)
    page = refused.content.decode()
    assert refused.status_code == 400
    said = "the target precision is from 50% to 99% (empty turns it off), got 99.5%"
    assert f"{said}; nothing changed" in page and "0.995" not in page
    assert 'value="99.5" data-testid="auto-coding-target"' in page
    assert not AutoCodingPolicy.objects.exists()


def test_targets_and_audit_shares_are_shown_with_the_digits_they_were_set_with(
    client, tiny_taxonomy, admin_user
):
    """Whole percentages said a 99.8% target was "100%" and a 0.4% audit share "0%"."""
    client.force_login(admin_user)
    wanted = {"target_precision": "99.8", "audit_share": "0.4"}
    saved = client.post("/taxonomies/jobs/auto-coding", wanted, follow=True)
    policy = AutoCodingPolicy.objects.get()
    assert (policy.target_precision, policy.audit_share) == (0.998, 0.004)
    page = saved.content.decode()
    flash = re.search(r"Auto-coding set \(version 1\)[^<]*", page).group(0)
    assert "right 99.8% of the time" in flash and "0.4% of them audited blind" in flash
    state = re.search(r'data-testid="auto-coding-state">(.*?)</p>', page, re.S).group(1)
    assert "right 99.8% of the time" in state and "0.4% of them go to review blind" in state
    assert "100%" not in state and " 0% " not in state
    assert 'value="99.8" data-testid="auto-coding-target"' in page
    assert 'value="0.4" data-testid="auto-coding-audit"' in page


def test_a_paused_policy_is_shown_with_its_reason(client, tiny_taxonomy, admin_user):
    AutoCodingPolicy.objects.create(
        taxonomy=tiny_taxonomy, target_precision=0.95, version=3,
        paused_at=timezone.now(), paused_reason="the audit found 1 of 9 audited answers right",
    )  # fmt: skip
    client.force_login(admin_user)
    page = client.get("/taxonomies/jobs/").content.decode()
    assert 'data-testid="auto-coding-paused"' in page
    assert "the audit found 1 of 9 audited answers right" in page and "Paused (version 3)" in page
    assert 'data-testid="auto-coding-jump">auto-coding paused</a>' in page


def test_a_live_model_that_cannot_load_is_named_not_a_500(client, tiny_taxonomy, admin_user):
    from models_app.serving.engines import forget_loaded_engines
    from tests.test_serving_broken_files import DAMAGES, new_build_folder, one_file

    pattern, damage, said = DAMAGES[0]
    damaged = one_file(new_build_folder(tiny_taxonomy), pattern)
    forget_loaded_engines()
    damage(damaged)
    client.force_login(admin_user)
    response = client.get("/taxonomies/jobs/")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-testid="vouching-error"' in page and said in page
