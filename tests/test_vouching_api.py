"""What the product can vouch for, per taxonomy: the probability above which its answers meet a
target precision, from evidence with a lower bound, and the share of recent inputs it would code
by itself (GET /api/v1/taxonomies/<slug>/vouching)."""

from __future__ import annotations

import pytest

from annotations.models import ReviewItem
from annotations.services.review.inputs import inputs_submit
from annotations.services.taxonomy import taxonomy_import
from models_app.serving import vouching
from models_app.siamese.ranker.files import cold_start_ranker
from models_app.siamese.vouching import vouching_threshold
from tests.conftest import TINY_CSV
from tests.test_match_probability import RIGHT, WRONG, judge_all

URL = "/api/v1/taxonomies/jobs/vouching"


def stored_top_probabilities(taxonomy) -> list[float]:
    tops = [item.prediction.ranked_groups[0] for item in
            ReviewItem.objects.filter(taxonomy=taxonomy).select_related("prediction")]  # fmt: skip
    return [top["probability"] for top in tops if top["source"] == "model"]


def test_before_any_verdict_the_starters_evidence_on_real_titles_decides(tiny_taxonomy, api_client):
    inputs_submit(taxonomy=tiny_taxonomy, texts=RIGHT + list(WRONG), source="api")
    response = api_client.get(URL, {"target": 0.9})
    assert response.status_code == 200, response.content
    found = response.json()
    evidence = cold_start_ranker().metrics["evidence"]
    # The starter's answers on real titles whose labels agree: hundreds, with a threshold.
    assert found["evidence"]["source"] == "starter"
    assert found["evidence"]["answers"] == len(evidence["right"]) >= 500
    expected = vouching_threshold(evidence["probabilities"], evidence["right"], target=0.9)
    assert found["threshold"] == expected.threshold is not None
    assert found["lower_bound"] >= 0.9
    right, taken = found["evidence"]["right"], found["evidence"]["at_or_above_threshold"]
    assert right / taken >= found["lower_bound"]
    # Every input of the last 30 days counted, those whose stored answer reaches it vouched.
    tops = stored_top_probabilities(tiny_taxonomy)
    assert found["recent_inputs"] == len(tops) == len(RIGHT) + len(WRONG)
    assert found["recent_vouched"] == sum(p >= found["threshold"] for p in tops)
    assert found["verdicts_needed"] is None
    # A stricter target never takes in more answers.
    stricter = api_client.get(URL, {"target": 0.99}).json()
    if stricter["threshold"] is None:
        assert stricter["recent_vouched"] == 0 and stricter["verdicts_needed"] > 0
    else:
        assert stricter["threshold"] >= found["threshold"]


def test_the_taxonomys_own_verdicts_take_over_once_there_are_enough(
    tiny_taxonomy, curator, api_client, monkeypatch
):
    judge_all(tiny_taxonomy, curator)
    verdicts = len(RIGHT) + len(WRONG)
    monkeypatch.setattr(vouching, "MIN_OWN_EVIDENCE", verdicts + 1)
    before = api_client.get(URL).json()
    assert before["evidence"]["source"] == "starter"
    monkeypatch.setattr(vouching, "MIN_OWN_EVIDENCE", verdicts)
    own = api_client.get(URL, {"target": 0.6}).json()
    # Each verdict's top answer, by weights fitted without it.
    assert own["evidence"]["source"] == "verdicts"
    assert own["evidence"]["answers"] == verdicts
    if own["threshold"] is None:
        assert own["verdicts_needed"] is None or own["verdicts_needed"] > 0
    else:
        assert own["lower_bound"] >= 0.6


@pytest.mark.parametrize("target", ["0.3", "1", "1.5", "-1", "high", "nan"])
def test_a_target_outside_half_to_0_999_is_refused_naming_it(tiny_taxonomy, api_client, target):
    response = api_client.get(URL, {"target": target})
    assert response.status_code == 400
    assert list(response.json()) == ["target"]


def test_no_live_model_is_a_conflict_and_no_taxonomy_a_404(db, api_client):
    taxonomy_import(slug="jobs", path=TINY_CSV, fmt="csv", name="Tiny jobs")
    response = api_client.get(URL)
    assert response.status_code == 409
    assert "has no live model yet" in response.json()["taxonomy"][0]
    assert api_client.get("/api/v1/taxonomies/nope/vouching").status_code == 404


def test_anonymous_callers_are_refused(tiny_taxonomy, client):
    assert client.get(URL).status_code == 401
