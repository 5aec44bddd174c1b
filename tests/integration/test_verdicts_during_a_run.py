"""Verdicts given while a worker fine-tunes: stored at once, not trained on by that run, counted
as new afterwards, and learned by the next fine-tune. Nothing is lost."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.models import FeedbackPair, Group, Judgement, Member
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.training.retraining import finetune_run_request, live_version, new_verdict_count
from tests.integration.conftest import wait_for, wait_until_finished, wait_until_idle
from tests.retraining.conftest import CORRECTIONS

pytestmark = pytest.mark.integration

# Corrections that arrive while the first fine-tune trains.
LATE = {"Barista Trainee": "35-3023", "Payroll Bookkeeper": "13-2011"}


@pytest.fixture
def worker(start_worker):
    # The tiny frozen suite makes one case several points; see test_retraining_cycle.py.
    return start_worker(SIAMWEB_GATE_ALPHA=1e-6)


def give_verdicts(taxonomy, user, corrections: dict[str, str]) -> list[Judgement]:
    judgements = []
    for item in inputs_submit(taxonomy=taxonomy, texts=list(corrections), source="api"):
        gold = Group.objects.get(taxonomy=taxonomy, code=corrections[item.input.text])
        verdict = "confirm" if item.top_group_id == gold.id else "reassign"
        judgements.append(
            judgement_create(review_item=item, user=user, verdict=verdict, group=gold)
        )
    return judgements


def give_verdicts_over_the_api(taxonomy, user, corrections: dict[str, str]) -> list[Judgement]:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    judgements = []
    for item in inputs_submit(taxonomy=taxonomy, texts=list(corrections), source="api"):
        gold = Group.objects.get(taxonomy=taxonomy, code=corrections[item.input.text])
        verdict = "confirm" if item.top_group_id == gold.id else "reassign"
        response = client.post(
            "/api/v1/judgements",
            {"review_item": item.id, "verdict": verdict, "group": gold.id},
            format="json",
        )
        assert response.status_code == 201, response.content
        judgements.append(Judgement.objects.get(id=response.json()["id"]))
    return judgements


def test_verdicts_given_during_a_finetune_wait_for_the_next_one_and_none_are_lost(
    worker, trainable_taxonomy, curator, other_curator
):
    taxonomy = trainable_taxonomy
    early = give_verdicts(taxonomy, curator, CORRECTIONS)
    wait_until_idle(taxonomy, worker.log)

    # Slow enough (some 10 seconds on one core) to give verdicts while it trains.
    run = finetune_run_request(
        taxonomy=taxonomy, trigger="manual", config={"training": {"max_steps": 2000}}
    )

    def training():
        run.refresh_from_db()
        return run.status == "running" and run.stage == "train"

    wait_for(training, "the fine-tune to train", worker.log)
    late = give_verdicts_over_the_api(taxonomy, other_curator, LATE)
    run.refresh_from_db()
    assert run.status == "running", "the run finished before the late verdicts were given"

    run = wait_until_finished(run, worker.log)
    assert run.status == "promoted", (run.error, run.gate_report)
    assert run.gate_report["new_verdicts"] == len(CORRECTIONS)

    # The late verdicts were not trained on, and count as new against the live version.
    early_pairs = FeedbackPair.objects.filter(judgement__in=early)
    late_pairs = FeedbackPair.objects.filter(judgement__in=late)
    assert early_pairs.exists() and late_pairs.exists()
    assert max(pair.id for pair in early_pairs) <= run.feedback_until
    assert min(pair.id for pair in late_pairs) > run.feedback_until
    live = live_version(taxonomy)
    assert live == run.model_version and live.feedback_until == run.feedback_until
    assert new_verdict_count(taxonomy, after=live.feedback_until) == len(LATE)

    # Nothing lost: every verdict, its pairs and its curator member are there.
    assert Judgement.objects.live().filter(review_item__taxonomy=taxonomy).count() == len(
        CORRECTIONS
    ) + len(LATE)
    for judgement in early + late:
        assert FeedbackPair.objects.filter(judgement=judgement).exists()
        member = Member.objects.get(judgement=judgement, source="curator")
        assert member.text == judgement.review_item.input.text

    # The next fine-tune trains on them.
    wait_until_idle(taxonomy, worker.log)
    following = finetune_run_request(
        taxonomy=taxonomy, trigger="manual", config={"training": {"max_steps": 100}}
    )
    following = wait_until_finished(following, worker.log)
    assert following.status in ("promoted", "rejected"), following.error
    assert following.parent_version == live
    assert following.feedback_until >= max(pair.id for pair in late_pairs)
    assert following.model_version.feedback_until == following.feedback_until
    assert following.gate_report["new_verdicts"] == len(LATE)
