"""The loop the product lives for, across real processes: curators correct the model, a worker
fine-tunes it, the gate promotes the candidate, and the correction generalises to an input
nobody judged."""

from __future__ import annotations

import pytest

from annotations.models import Group, Member, ReviewItem
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.models import ModelVersion
from models_app.serving.engines import encoder_for
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.siamese.hybrid_matcher import HybridMatcher
from models_app.siamese.specs import parse_search_config
from models_app.training.retraining import finetune_run_request, live_version
from tests.integration.conftest import wait_for, wait_until_finished, wait_until_idle
from tests.retraining.conftest import CORRECTIONS

pytestmark = pytest.mark.integration

UNSEEN = "Senior Latte Artist"  # like the corrected "Latte Artist"; nobody judges it
BARISTAS = "35-3023"


def top_by_the_model_alone(version: ModelVersion, text: str) -> str:
    """The group ``version`` puts ``text`` in when it searches only the taxonomy's own members:
    what the model learned, without the curators' strings to lean on."""
    rows = list(
        Member.objects.filter(taxonomy=version.taxonomy, source="taxonomy").values_list(
            "group_id", "text"
        )
    )
    matcher = HybridMatcher(
        encoder_for(version),
        [member for _, member in rows],
        [group_id for group_id, _ in rows],
        config=parse_search_config(version.config),
    )
    ((group_id, *_),) = matcher.rank([text], 1)
    return Group.objects.get(id=group_id).code


@pytest.fixture
def worker(start_worker):
    # The tiny taxonomy's frozen suite has a few dozen cases, so one case is several points: at
    # the default tolerance of one point the outcome would turn on noise. This test is about
    # verdicts being learned; tests/retraining/test_gate.py covers the gate's tolerance.
    return start_worker(SIAMWEB_GATE_ALPHA=1e-6)


def test_corrections_are_learned_by_a_worker_and_generalise_to_an_unseen_input(
    worker, trainable_taxonomy, curator, admin_user
):
    taxonomy = trainable_taxonomy
    first = live_version(taxonomy)
    (before,) = rank_taxonomy_groups(taxonomy, [UNSEEN], k=3)
    assert before.groups[0].code != BARISTAS
    assert top_by_the_model_alone(first, UNSEEN) != BARISTAS
    (pending,) = inputs_submit(taxonomy=taxonomy, texts=["Espresso Maker"], source="api")

    # Curators correct what the live model gets wrong.
    items = inputs_submit(taxonomy=taxonomy, texts=list(CORRECTIONS), source="api")
    wrong = 0
    for item in items:
        gold = Group.objects.get(taxonomy=taxonomy, code=CORRECTIONS[item.input.text])
        wrong += item.top_group_id != gold.id
        verdict = "confirm" if item.top_group_id == gold.id else "reassign"
        judgement_create(review_item=item, user=curator, verdict=verdict, group=gold)
    assert wrong >= 3  # the model had to be corrected
    wait_until_idle(taxonomy, worker.log)

    run = finetune_run_request(
        taxonomy=taxonomy,
        trigger="manual",
        requested_by=admin_user,
        config={"training": {"max_steps": 200}},
    )
    assert run is not None and run.status == "queued"
    run = wait_until_finished(run, worker.log)

    assert run.status == "promoted", (run.error, run.gate_report)
    assert run.stage == "done" and run.finished_at is not None
    assert run.parent_version == first
    assert live_version(taxonomy) == run.model_version != first
    assert run.model_version.parent == first
    assert run.feedback_until == run.model_version.feedback_until > 0
    gate = run.gate_report
    assert (gate["decision"], gate["reasons"], gate["new_verdicts"]) == ("promote", [], 4)
    assert gate["verdicts"]["count"] == len(CORRECTIONS)
    assert gate["verdicts"]["candidate"] > gate["verdicts"]["live"]
    flips = run.flip_report
    assert flips["compared"] == len(CORRECTIONS) + 1
    assert flips["counts"]["fixed"] >= 1 and flips["counts"]["confirmed_now_wrong"] == 0
    fixed = {row["input"]: row["after"] for row in flips["fixed"]}
    assert fixed["Latte Artist"] == {"code": BARISTAS, "name": "Baristas"}

    # Pending inputs were predicted again by the new model, in a task the worker chained.
    def predicted_again():
        pending.refresh_from_db()
        return pending.prediction.model_version == run.model_version

    wait_for(predicted_again, "the pending input predicted again", worker.log)
    assert pending.status == ReviewItem.Status.PENDING

    # The unseen input now lands with the baristas, by the model: by the new model alone, too.
    (after,) = rank_taxonomy_groups(taxonomy, [UNSEEN], k=3)
    assert (after.groups[0].code, after.source) == (BARISTAS, "model")
    assert after.model_version == run.model_version.label
    assert top_by_the_model_alone(run.model_version, UNSEEN) == BARISTAS
