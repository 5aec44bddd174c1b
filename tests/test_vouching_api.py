"""What the product can vouch for, per taxonomy: the probability above which its answers meet a
target precision, from evidence with a lower bound, and the share of recent inputs it would code
by itself (GET /api/v1/taxonomies/<slug>/vouching)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from annotations.models import ReviewItem
from annotations.services.review.inputs import inputs_submit
from annotations.services.taxonomy import taxonomy_import
from models_app.serving import vouching
from models_app.siamese.ranker.files import cold_start_ranker
from models_app.siamese.vouching import vouching_threshold
from tests.conftest import TINY_CSV
from tests.test_match_probability import RIGHT, WRONG, judge_all


def live_ranker_evidence(taxonomy) -> dict:
    """The evidence stored in the live ranker's file."""
    from models_app.models import Deployment
    from models_app.serving.engines import artifact_path
    from models_app.siamese.ranker.files import load_ranker

    version = Deployment.objects.get(taxonomy=taxonomy).ranker
    ranker, _ = load_ranker(artifact_path(version.artifact_path))
    return ranker.metrics["evidence"]


URL = "/api/v1/taxonomies/jobs/vouching"


@pytest.fixture
def admin_api(admin_user) -> APIClient:
    client = APIClient()
    client.force_authenticate(admin_user)
    return client


def stored_top_probabilities(taxonomy) -> list[float]:
    tops = [item.prediction.ranked_groups[0] for item in
            ReviewItem.objects.filter(taxonomy=taxonomy).select_related("prediction")]  # fmt: skip
    return [top["probability"] for top in tops if top["source"] == "model"]


def test_before_any_verdict_the_starters_evidence_on_real_titles_decides(tiny_taxonomy, admin_api):
    inputs_submit(taxonomy=tiny_taxonomy, texts=RIGHT + list(WRONG), source="api")
    response = admin_api.get(URL, {"target": 0.9})
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
    stricter = admin_api.get(URL, {"target": 0.99}).json()
    if stricter["threshold"] is None:
        assert stricter["recent_vouched"] == 0 and stricter["verdicts_needed"] > 0
    else:
        assert stricter["threshold"] >= found["threshold"]


def test_once_its_own_ranker_serves_only_its_own_verdicts_vouch(
    tiny_taxonomy, curator, admin_api, monkeypatch
):
    judge_all(tiny_taxonomy, curator)  # the taxonomy's own ranker goes live
    verdicts = len(RIGHT) + len(WRONG)
    monkeypatch.setattr(vouching, "MIN_OWN_EVIDENCE", verdicts + 1)
    # Too few of its own: the starter's evidence measured another ranker, so no threshold.
    few = admin_api.get(URL, {"target": 0.6}).json()
    assert few["evidence"]["source"] == "none" and few["evidence"]["answers"] == 0
    assert (few["threshold"], few["verdicts_needed"]) == (None, 1)
    monkeypatch.setattr(vouching, "MIN_OWN_EVIDENCE", verdicts)
    own = admin_api.get(URL, {"target": 0.6}).json()
    # Each verdict's top answer, by weights fitted without it.
    assert own["evidence"]["source"] == "verdicts"
    assert own["evidence"]["answers"] == verdicts
    evidence = live_ranker_evidence(tiny_taxonomy)
    expected = vouching_threshold(evidence["probabilities"], evidence["right"], target=0.6)
    assert own["threshold"] == expected.threshold
    assert own["verdicts_needed"] == (expected.more_needed if expected.threshold is None else None)


def test_curators_may_not_read_it(tiny_taxonomy, api_client):
    # The threshold would tell them which cards are audits.
    assert api_client.get(URL).status_code == 403


@pytest.mark.parametrize("target", ["0.3", "1", "1.5", "-1", "high", "nan"])
def test_a_target_outside_half_to_0_999_is_refused_naming_it(tiny_taxonomy, admin_api, target):
    response = admin_api.get(URL, {"target": target})
    assert response.status_code == 400
    assert list(response.json()) == ["target"]


def test_no_live_model_is_a_conflict_and_no_taxonomy_a_404(db, admin_api):
    taxonomy_import(slug="jobs", path=TINY_CSV, fmt="csv", name="Tiny jobs")
    response = admin_api.get(URL)
    assert response.status_code == 409
    assert "has no live model yet" in response.json()["taxonomy"][0]
    assert admin_api.get("/api/v1/taxonomies/nope/vouching").status_code == 404


def test_anonymous_callers_are_refused(tiny_taxonomy, client):
    assert client.get(URL).status_code == 401
