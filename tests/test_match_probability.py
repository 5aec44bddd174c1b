"""Every model answer carries a match probability, in the API, the playground and on the review
card, with a low-confidence signal: from the starter ranker before the taxonomy has verdicts,
then from the ranker fitted and calibrated on them."""

from __future__ import annotations

import re

from annotations.models import Group
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.models import RankerVersion
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.siamese.ranker import files
from models_app.training.ranker_training import ranker_fit

RIGHT = ["Java Developer", "Senior Python Developer", "Night ICU Nurse", "Head Barista",
         "Long Haul Truck Driver", "Tax Accountant II", "Backend Developer Remote",
         "Registered Nurse Nights", "Espresso Bar Attendant PT", "CDL Truck Driver Local",
         "Charge Nurse Days", "Staff Accountant Remote", "Coffee Maker Weekend",
         "Python Developer Junior", "Tractor Trailer Driver OTR",
         "Certified Public Accountant Senior"]  # fmt: skip
WRONG = {"Java Coffee Roaster": "35-3023", "Nurse Shark Keeper": "53-3032",
         "Truck Accountant": "13-2011", "Python Snake Handler": "53-3032",
         "Bar Bookkeeper": "13-2011", "Driver Developer Kernel": "15-1252"}  # fmt: skip


def judge_all(taxonomy, user) -> None:
    """Confirm what the model got right, reassign what it got wrong: both outcomes to fit on;
    then the ranker is fitted on them, as the worker does once enough verdicts are new."""
    items = inputs_submit(taxonomy=taxonomy, texts=RIGHT + list(WRONG), source="api")
    for item in items:
        code = WRONG.get(item.input.text)
        if code is None or item.top_group.code == code:
            judgement_create(review_item=item, user=user, verdict="confirm")
        else:
            group = Group.objects.get(taxonomy=taxonomy, code=code)
            judgement_create(review_item=item, user=user, verdict="reassign", group=group)
    ranker = ranker_fit(taxonomy=taxonomy)
    assert ranker is not None and ranker.status == RankerVersion.Status.LIVE


def test_a_probability_from_the_first_answer_before_any_verdict(tiny_taxonomy, api_client):
    """The starter ranker, fitted on real labelled titles, is calibrated: a taxonomy with no
    verdict answers with a probability, and no ranker of its own is fitted yet."""
    assert ranker_fit(taxonomy=tiny_taxonomy) is None
    response = api_client.post(
        "/api/v1/taxonomies/jobs/normalize",
        {"texts": ["Java Developer", "zzqx unknown words"]},
        format="json",
    )
    known, junk = response.json()["results"]
    assert not RankerVersion.objects.exists()
    assert 0 < junk["probability"] < known["probability"] < 1
    assert junk["low_confidence"] is True
    assert known["low_confidence"] is (known["probability"] < 0.5)
    probabilities = [group["probability"] for group in known["groups"]]
    assert probabilities == sorted(probabilities, reverse=True) and sum(probabilities) <= 1


def test_without_the_starter_the_hand_prior_ranks_with_no_probability_and_logs_once(
    tiny_taxonomy, api_client, tmp_path, monkeypatch, caplog
):
    (tmp_path / "starter_ranker.json").write_text('{"kind": "linear", "features": ["best"]}')
    for starter in (tmp_path / "missing.json", tmp_path / "starter_ranker.json"):
        monkeypatch.setattr(files, "STARTER_FILE", starter)
        files.cold_start_ranker.cache_clear()
        caplog.clear()
        for _ in range(3):
            response = api_client.post(
                "/api/v1/taxonomies/jobs/normalize", {"texts": ["Java Dev"]}, format="json"
            )
            assert response.status_code == 200
            (result,) = response.json()["results"]
            assert result["groups"][0]["code"] == "15-1252"
            assert (result["probability"], result["low_confidence"]) == (None, False)
        assert caplog.text.count("the starter ranker cannot serve") == 1
    files.cold_start_ranker.cache_clear()


def test_answers_carry_a_probability_fitted_on_the_verdicts(tiny_taxonomy, curator, api_client):
    judge_all(tiny_taxonomy, curator)
    ranker = RankerVersion.objects.get(taxonomy=tiny_taxonomy, status="live")
    assert ranker.verdicts == len(RIGHT) + len(WRONG)
    assert ranker.gate_report["decision"] == "promote"
    assert ranker.gate_report["summary"].startswith("held-out verdicts: ")
    response = api_client.post(
        "/api/v1/taxonomies/jobs/normalize",
        {"texts": ["Senior Java Engineer", "zzqx unknown words", "Java Developer"]},
        format="json",
    )
    good, junk, judged = response.json()["results"]
    assert 0 <= junk["probability"] < good["probability"] <= 1
    assert junk["low_confidence"] is (junk["probability"] < 0.5)
    # A curator's own verdict on this very text is not a model answer: no probability.
    assert (judged["source"], judged["probability"]) == ("curator", None)
    (again,) = rank_taxonomy_groups(tiny_taxonomy, ["Senior Java Engineer"], k=1)
    assert again.probability == good["probability"]  # k=1 ranks every candidate all the same
    # Each group offered has its own probability; together they leave room for none of them.
    probabilities = [group["probability"] for group in good["groups"]]
    assert probabilities == sorted(probabilities, reverse=True)
    assert sum(probabilities) <= 1


def test_the_playground_and_the_review_card_show_it(client, tiny_taxonomy, curator):
    judge_all(tiny_taxonomy, curator)
    client.force_login(curator)
    page = client.get("/playground/results", {"taxonomy": "jobs", "text": "zzqx words"})
    shown = re.search(r'data-testid="probability"[^>]*>(.*?)</span>', page.content.decode())
    assert shown and "likely right" in shown.group(1)
    inputs_submit(taxonomy=tiny_taxonomy, texts=["Senior Tax Accountant Remote"], source="api")
    card = client.get("/review/").content.decode()
    assert 'data-testid="probability"' in card
    blind = client.get("/review/", {"blind": "1"}).content.decode()
    assert 'data-testid="probability"' not in blind
