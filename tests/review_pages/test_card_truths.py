"""Small truths a first session trips over: a tie left behind by a rejected partner, ties that
disagree with the figures shown, and an input that waits for a second curator while it is
answered with the first one's verdict."""

from __future__ import annotations

import numpy as np

from annotations.models import Group
from annotations.selectors.card import review_card_groups
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.serving.normalize import probability_as_shown, tied_as_shown


def test_a_tie_goes_with_the_partner_a_curator_rejected(tiny_taxonomy, curator):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Coffee Person"], source="api")
    groups = list(Group.objects.filter(taxonomy=tiny_taxonomy).order_by("code")[:3])
    shown = [(groups[0], 0.301, True), (groups[1], 0.295, True), (groups[2], 0.12, False)]
    item.prediction.ranked_groups = [
        {**item.prediction.ranked_groups[0], "group_id": g.id, "code": g.code, "name": g.name,
         "probability": p, "tied": tied}
        for g, p, tied in shown
    ]  # fmt: skip
    item.prediction.save()
    item.top_group = groups[0]
    item.save()
    assert [g["tied"] for g in review_card_groups(item)] == [True, True, False]
    judgement_create(review_item=item, user=curator, verdict="false_match", group=groups[0])
    item.refresh_from_db()
    left = review_card_groups(item, user=curator)
    assert [(g["code"], g["tied"]) for g in left] == [(groups[1].code, False),
                                                      (groups[2].code, False)]  # fmt: skip


def test_an_input_waiting_for_a_second_curator_says_so(client, tiny_taxonomy, curator, settings):
    settings.SIAMWEB_DOUBLE_REVIEW_PERCENT = 100
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Senior Java Developer"], source="api")
    judgement_create(review_item=item, user=curator, verdict="confirm")
    item.refresh_from_db()
    assert (item.status, item.reviews_required) == ("pending", 2)
    client.force_login(curator)
    page = client.get(f"/inputs/{item.input_id}/").content.decode()
    assert "waits for a second curator (one in 1 is judged twice)" in page
    assert f"meanwhile it is answered with the first verdict: {item.top_group.name}" in page


def test_ties_are_decided_on_the_probabilities_as_the_card_shows_them():
    # Shown 0.15 and 0.14: tied; 0.16 and 0.14: not, however close the digits behind them.
    assert tied_as_shown(0.1549, 0.1351) and not tied_as_shown(0.156, 0.144)
    # Two answers that both show 0.06 against 0.07 are both tied, or neither.
    assert tied_as_shown(0.0651, 0.0551) and tied_as_shown(0.0749, 0.0649)
    # A stored half is shown rounded up (Django's floatformat), and decided the same way.
    assert probability_as_shown(0.145) == 0.15 and probability_as_shown(0.1449) == 0.14
    assert not tied_as_shown(0.165, 0.145)  # shown 0.17 and 0.15
    shown = probability_as_shown(np.array([0.005, 0.995, 0.12345]))
    assert shown.tolist() == [0.01, 1.0, 0.12]
