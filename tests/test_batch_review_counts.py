"""Batch review: the groups list, the batch page's count and its grid all come from one selector
(``review_batch_queue``); a submitted batch can be taken back; "accept all above p" confirms
only the tiles the match probability vouches for."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from annotations.models import FeedbackPair, Group, Judgement, Member, ReviewItem
from annotations.selectors.card import review_items_probability
from annotations.selectors.queue import review_batch_queue, review_groups_pending
from annotations.services.review.batch import judgements_create_for_group
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.undo import judgements_undo
from annotations.services.review.verdict_rules import VerdictError
from annotations.services.review.verdicts import judgement_create
from tests.test_match_probability import judge_all

HTMX = {"HTTP_HX_REQUEST": "true"}
URL = "/review/batch/jobs/15-1252/"


@pytest.fixture
def developers(tiny_taxonomy):
    inputs_submit(
        taxonomy=tiny_taxonomy, texts=[f"Java Developer {n}" for n in range(10)], source="api"
    )
    return list(ReviewItem.objects.filter(top_group__code="15-1252").order_by("-priority", "id"))


def group(code: str) -> Group:
    return Group.objects.get(taxonomy__slug="jobs", code=code)


def tile_ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'data-testid="tile" data-item-id="(\d+)"', html)]


def make_unavailable(developers, curator, other_curator) -> None:
    """Three of the ten items no batch of carla's can take: one oscar holds, one she judged
    already (it waits for a second curator), one she marked a false match on the card."""
    held, judged, rejected = developers[0], developers[1], developers[2]
    ReviewItem.objects.filter(id=held.id).update(
        leased_by=other_curator, lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    ReviewItem.objects.filter(id=judged.id).update(reviews_required=2)
    judged.refresh_from_db()
    judgement_create(review_item=judged, user=curator, verdict="confirm")
    judgement_create(review_item=rejected, user=curator, verdict="false_match")


def test_the_groups_list_counts_what_the_batch_page_can_lease(developers, curator, other_curator):
    make_unavailable(developers, curator, other_curator)
    (row,) = [
        r
        for r in review_groups_pending(taxonomy=developers[0].taxonomy, user=curator)
        if r["group"].code == "15-1252"
    ]
    queue = review_batch_queue(
        user=curator, taxonomy=developers[0].taxonomy, group=group("15-1252")
    )
    assert row["pending"] == queue.count() == 7
    # Oscar sees the item he holds, and the one carla judged (a second curator is wanted).
    (oscars,) = [
        r
        for r in review_groups_pending(taxonomy=developers[0].taxonomy, user=other_curator)
        if r["group"].code == "15-1252"
    ]
    assert oscars["pending"] == 9


def test_the_page_shows_as_many_as_the_list_promised(client, developers, curator, other_curator):
    make_unavailable(developers, curator, other_curator)
    client.force_login(curator)
    listed = client.get("/review/batch/jobs/").content.decode()
    assert re.search(r'15-1252</span>[^<]*</td>\s*<td class="num">7<', listed)
    page = client.get(URL).content.decode()
    assert len(tile_ids(page)) == 7
    assert '<span data-testid="batch-open">7</span> to review for this group' in page


def test_an_empty_batch_says_nothing_is_open(client, developers, curator, other_curator):
    make_unavailable(developers, curator, other_curator)
    client.force_login(curator)
    ids = tile_ids(client.get(URL).content.decode())
    response = client.post(URL, {"item": ids}, **HTMX)
    page = response.content.decode()
    assert 'data-testid="batch-empty"' in page
    assert "batch-open" not in page and "open for this group" not in page


def test_a_batch_is_undone_whole(client, developers, curator):
    client.force_login(curator)
    ids = tile_ids(client.get(URL).content.decode())
    page = client.post(URL, {"item": ids, "reject": ids[:2]}, **HTMX).content.decode()
    done = [int(i) for i in re.findall(r'name="judgement" value="(\d+)"', page)]
    assert sorted(done) == sorted(Judgement.objects.values_list("id", flat=True))
    assert Member.objects.filter(source=Member.Source.CURATOR).count() == 8

    response = client.post(f"{URL}undo", {"judgement": done}, **HTMX)

    assert response.status_code == 200
    page = response.content.decode()
    assert "Batch undone: 10 verdicts taken back." in page
    assert sorted(tile_ids(page)) == sorted(ids)
    assert not Judgement.objects.live().exists()
    assert not FeedbackPair.objects.exists()
    assert not Member.objects.filter(source=Member.Source.CURATOR).exists()
    assert set(ReviewItem.objects.values_list("status", flat=True)) == {"pending"}


def test_a_batch_undone_without_javascript_says_so_on_the_page_it_lands_on(
    client, developers, curator
):
    client.force_login(curator)
    ids = tile_ids(client.get(URL).content.decode())
    page = client.post(URL, {"item": ids}, **HTMX).content.decode()
    done = [int(i) for i in re.findall(r'name="judgement" value="(\d+)"', page)]

    response = client.post(f"{URL}undo", {"judgement": done}, follow=True)

    assert response.redirect_chain[0][0].endswith(URL)
    page = response.content.decode()
    assert "Batch undone: 10 verdicts taken back." in page
    assert sorted(tile_ids(page)) == sorted(ids)
    assert not Judgement.objects.live().exists()


def test_undoing_a_batch_with_one_verdict_that_cannot_go_undoes_none(
    developers, curator, other_curator
):
    result = judgements_create_for_group(
        user=curator,
        group=group("15-1252"),
        confirm_item_ids=[d.id for d in developers[:3]],
        reject_item_ids=[],
    )
    ids = [j.id for j in result.confirmed]
    with pytest.raises(VerdictError, match="only its curator or an admin"):
        judgements_undo(judgement_ids=ids, user=other_curator)
    with pytest.raises(VerdictError, match=r"no verdicts \[999999\]"):
        judgements_undo(judgement_ids=[*ids, 999999], user=curator)
    assert Judgement.objects.live().count() == 3


def test_undo_without_verdicts_is_a_400_naming_the_field(client, developers, curator):
    client.force_login(curator)
    response = client.post(f"{URL}undo", {}, **HTMX)
    assert response.status_code == 400
    assert "judgement: name the verdicts to undo" in response.content.decode()


# Titles the tiny model puts in Software Developers with quite different certainty.
VARIED = ["Developer", "Kernel Developer", "Web Dev", "Dev Ops", "Frontend Developer",
          "Mobile App Developer", "Software Developer", "Game Programmer"]  # fmt: skip


def submit_calibrated(taxonomy, user) -> dict[int, float]:
    """Verdicts to fit the probability on (``user``'s, on other items), then eight items of the
    group: their probabilities by item id."""
    judge_all(taxonomy, user)
    items = inputs_submit(taxonomy=taxonomy, texts=VARIED, source="api")
    assert {item.top_group.code for item in items} == {"15-1252"}
    probabilities = review_items_probability(
        ReviewItem.objects.filter(id__in=[i.id for i in items]).select_related("prediction")
    )
    assert len(probabilities) == len(items)
    return probabilities


@pytest.fixture
def calibrated(tiny_taxonomy, other_curator) -> dict[int, float]:
    return submit_calibrated(tiny_taxonomy, other_curator)


def test_accept_above_p_confirms_only_the_unmarked_tiles_at_or_above_p(client, curator, calibrated):
    ranked = sorted(calibrated, key=calibrated.get, reverse=True)
    assert calibrated[ranked[0]] > calibrated[ranked[-1]]
    p = calibrated[ranked[3]]
    above = [i for i in ranked if calibrated[i] >= p]
    marked = above[0]
    client.force_login(curator)
    ids = tile_ids(client.get(URL).content.decode())

    response = client.post(
        URL,
        {"item": ids, "reject": [marked], "action": "accept_above", "accept_min": f"{p!r}"},
        **HTMX,
    )

    assert response.status_code == 200
    verdicts = dict(Judgement.objects.filter(user=curator).values_list("review_item_id", "verdict"))
    assert verdicts == {i: "false_match" if i == marked else "confirm" for i in above}
    # The rest stay open, and come back in the next batch.
    assert sorted(tile_ids(response.content.decode())) == sorted(set(ids) - set(above))


def test_accept_above_p_refuses_a_bad_p_and_records_nothing(client, curator, calibrated):
    client.force_login(curator)
    ids = tile_ids(client.get(URL).content.decode())
    for bad in ["", "1.5", "high"]:
        response = client.post(
            URL, {"item": ids, "action": "accept_above", "accept_min": bad}, **HTMX
        )
        assert response.status_code == 400
        assert "accept_min:" in response.content.decode()
    response = client.post(URL, {"item": ids, "action": "accept_above", "accept_min": "1"}, **HTMX)
    assert response.status_code == 400
    assert "accept_min: no unmarked tile is at least 1.00 likely right" in response.content.decode()
    assert not Judgement.objects.filter(user=curator).exists()


def test_confirm_the_rest_ignores_the_threshold_box(client, curator, calibrated):
    client.force_login(curator)
    ids = tile_ids(client.get(URL).content.decode())
    response = client.post(URL, {"item": ids, "accept_min": "nonsense"}, **HTMX)
    assert response.status_code == 200
    assert Judgement.objects.filter(user=curator, verdict="confirm").count() == len(ids)


def test_without_a_calibration_accept_above_p_is_refused_and_not_offered(
    client, without_starter, developers, curator
):
    client.force_login(curator)
    page = client.get(URL).content.decode()
    assert 'data-testid="accept-above"' not in page
    ids = tile_ids(page)
    response = client.post(
        URL, {"item": ids, "action": "accept_above", "accept_min": "0.5"}, **HTMX
    )
    assert response.status_code == 400
    assert "accept_min: these tiles have no match probability yet" in response.content.decode()
    assert not Judgement.objects.exists()


def test_blind_mode_hides_the_probability_and_the_threshold(client, curator, calibrated):
    client.force_login(curator)
    seen = client.get(URL).content.decode()
    assert 'data-testid="tile-probability"' in seen and 'data-testid="accept-above"' in seen
    blind = client.get(URL, {"blind": "1"}).content.decode()
    assert 'data-testid="tile-probability"' not in blind
    assert 'data-testid="accept-above"' not in blind
