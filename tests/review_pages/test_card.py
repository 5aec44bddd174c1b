"""The review card: the next input with its groups and evidence, one card a curator, the
shortcuts; and the filters that narrow the queue it comes from."""

from __future__ import annotations

import re

import pytest

from annotations.models import Group, Judgement, Member, ReviewItem
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from tests.review_pages.conftest import HTMX, card_item_id, head, login


def test_the_review_page_requires_login(client, items):
    response = client.get("/review/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/review/"


def test_the_review_page_shows_the_next_input_with_its_groups_and_evidence(client, curator, items):
    client.force_login(curator)
    response = client.get("/review/")
    assert response.status_code == 200
    page = response.content.decode()
    assert head().input.text in page
    for ranked in head().prediction.ranked_groups:
        assert ranked["name"] in page
        # The input's words in the evidence are marked; the string itself is whole.
        assert f"matched “{ranked['member']}”" in page.replace("<mark>", "").replace("</mark>", "")
        # Before the taxonomy's ranker is fitted the starter ranker's probability heads each
        # group; the similarity is the evidence's, labelled as such.
        assert 'data-testid="option-probability"' in page
        assert f"{ranked['probability']:.2f}</span>" in page
        assert f"(similarity {ranked['score']:.2f})" in page
        # What each group means, without leaving the card.
        description = Group.objects.get(id=ranked["group_id"]).description
        assert f'data-testid="group-description">{description}</span>' in page
    assert "2 open · 0 done · 0 yours today" in page
    assert head().leased_by == curator


def test_the_card_shows_occurrences_model_version_and_other_members_of_each_group(
    client, curator, tiny_taxonomy, items
):
    inputs_submit(taxonomy=tiny_taxonomy, texts=[head().input.text], source="api")
    client.force_login(curator)
    page = client.get("/review/").content.decode()
    assert 'data-testid="occurrences">2<' in page
    assert 'data-testid="model-version">jobs/v1<' in page
    shown = re.findall(r'data-testid="group-members">also: ([^<]*)<', page)
    assert len(shown) == len(head().prediction.ranked_groups)
    for ranked, others in zip(head().prediction.ranked_groups, shown, strict=True):
        members = others.split(" · ")
        assert 1 <= len(members) <= 3
        assert ranked["member"] not in members
        group_texts = set(
            Member.objects.filter(group_id=ranked["group_id"]).values_list("text", flat=True)
        )
        assert set(members) <= group_texts


def test_a_reload_shows_the_same_card(client, curator, items):
    client.force_login(curator)
    first = card_item_id(client.get("/review/").content.decode())
    again = card_item_id(client.get("/review/").content.decode())
    assert first == again
    assert ReviewItem.objects.filter(leased_by=curator).count() == 1


def test_the_card_and_the_batch_grid_are_never_kept_by_the_browser(client, curator, items):
    """Kept, Back then Forward showed a card already judged, with stale counts: each is fetched
    again instead."""
    client.force_login(curator)
    code = items[0].top_group.code
    for url, extra in [("/review/", {}), ("/review/", HTMX), (f"/review/batch/jobs/{code}/", {})]:
        response = client.get(url, **extra)
        assert response.status_code == 200
        cache_control = {part.strip() for part in response["Cache-Control"].split(",")}
        assert {"no-store", "no-cache", "must-revalidate", "private"} <= cache_control, url


def test_two_curators_get_different_cards(curator, other_curator, items):
    carla, oscar = login(curator), login(other_curator)
    carla_card = card_item_id(carla.get("/review/").content.decode())
    oscar_card = card_item_id(oscar.get("/review/").content.decode())
    assert carla_card != oscar_card
    leases = dict(ReviewItem.objects.values_list("id", "leased_by__username"))
    assert leases == {carla_card: "carla", oscar_card: "oscar"}


def test_every_shortcut_is_shown_next_to_its_button(client, curator, items):
    client.force_login(curator)
    judgement_create(review_item=items[1], user=curator, verdict="skip")
    page = client.get("/review/").content.decode()
    for key in ["a", "x", "n", "space", "u", "1", "2", "3", "4", "5"]:
        assert re.search(
            rf'data-shortcut="{key}"[^>]*>[^<]*(<[^>]+>[^<]*)*?<kbd>{key}</kbd>', page
        ), key
    assert "Reassign to another group <kbd>r</kbd>" in page
    assert '<script src="/static/js/review.js" defer></script>' in page


def test_digit_one_confirms_the_top_group_and_the_others_reassign(client, curator, items):
    client.force_login(curator)
    page = client.get("/review/").content.decode()
    verdicts = re.findall(
        r'name="verdict" value="(\w+)">\s*<input type="hidden" name="group_code"', page
    )
    assert verdicts == ["confirm", "reassign", "reassign", "reassign", "reassign"]


# --- filters --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("score_min=2", "score_min"),
        ("score_max=abc", "score_max"),
        ("score_min=nan", "score_min"),
        ("score_min=0.9&score_max=0.1", "score_max"),
        ("status=done", "status"),
        ("taxonomy=nope", "taxonomy"),
        ("taxonomy=Not A Slug", "taxonomy"),
        ("group=15-1252", "group"),
        ("taxonomy=jobs&group=99-9999", "group"),
        ("blind=yes", "blind"),
    ],
)
def test_bad_filters_are_a_400_naming_the_field_and_lease_nothing(
    client, curator, items, query, field
):
    client.force_login(curator)
    response = client.get(f"/review/?{query}")
    assert response.status_code == 400
    page = response.content.decode()
    assert re.search(rf'data-testid="error">{field}: ', page)
    assert 'data-testid="filters"' in page  # the filter bar is there to fix it
    assert 'data-testid="review-card"' not in page
    assert not ReviewItem.objects.filter(leased_by__isnull=False).exists()


def test_a_verdict_with_bad_filters_is_a_400_and_stores_nothing(client, curator, items):
    client.force_login(curator)
    response = client.post(
        f"/review/items/{items[0].id}/judge?score_min=-1", {"verdict": "skip"}, **HTMX
    )
    assert response.status_code == 400
    assert "score_min: " in response.content.decode()
    assert not Judgement.objects.exists()


def test_filters_narrow_the_card_to_one_group(client, curator, items):
    client.force_login(curator)
    response = client.get("/review/?taxonomy=jobs&group=29-1141")
    assert response.status_code == 200
    assert (
        card_item_id(response.content.decode())
        == ReviewItem.objects.get(input__text="icu staff nurse").id
    )


def test_a_score_range_with_nothing_in_it_shows_an_empty_queue(client, curator, items):
    client.force_login(curator)
    response = client.get("/review/?score_max=0.1")
    assert response.status_code == 200
    assert 'data-testid="queue-empty"' in response.content.decode()
    assert not ReviewItem.objects.filter(leased_by__isnull=False).exists()


def test_the_filters_survive_a_verdict(client, curator, tiny_taxonomy):
    inputs_submit(
        taxonomy=tiny_taxonomy,
        texts=["Java Barista", "Coffee Java", "icu staff nurse", "truck driver"],
        source="api",
    )
    client.force_login(curator)
    query = "taxonomy=jobs&group=35-3023&blind=1"
    first = card_item_id(client.get(f"/review/?{query}").content.decode())
    response = client.post(f"/review/items/{first}/judge?{query}", {"verdict": "confirm"}, **HTMX)
    assert response.status_code == 200
    page = response.content.decode()
    second = ReviewItem.objects.get(id=card_item_id(page))
    assert second.id != first
    assert second.top_group.code == "35-3023"
    assert f'action="/review/items/{second.id}/judge?{query.replace("&", "&amp;")}"' in page
    assert 'class="score"' not in page


def test_a_plain_form_post_redirects_back_with_the_filters(client, curator, items):
    client.force_login(curator)
    response = client.post(
        f"/review/items/{items[0].id}/judge?taxonomy=jobs",
        {"verdict": "reassign", "group_code": "35-3023"},
    )
    assert response.status_code == 302
    assert response["Location"] == "/review/?taxonomy=jobs"
    assert Member.objects.get(source="curator").group.code == "35-3023"


def test_blind_mode_sends_no_scores(client, curator, items):
    client.force_login(curator)
    response = client.get("/review/?blind=1")
    assert response.status_code == 200
    page = response.content.decode()
    item = ReviewItem.objects.get(id=card_item_id(page))
    assert item.prediction.ranked_groups[0]["name"] in page
    for ranked in item.prediction.ranked_groups:
        assert f"{ranked['score']:.3f}" not in page
        assert f"{ranked['score']:.2f}" not in page
    assert 'class="score"' not in page
