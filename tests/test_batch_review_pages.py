from __future__ import annotations

import re

import pytest
from django.test import Client

from annotations.models import FeedbackPair, Group, Judgement, Member, Prediction, ReviewItem
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from annotations.services.taxonomy import taxonomy_import
from tests.conftest import build_live_model

HTMX = {"HTTP_HX_REQUEST": "true"}
URL = "/review/batch/jobs/15-1252/"


@pytest.fixture
def developers(tiny_taxonomy):
    """Fifty items predicted as Software Developers, and a few for other groups."""
    texts = [f"Java Developer {n}" for n in range(50)] + ["Java Barista", "icu staff nurse"]
    inputs_submit(taxonomy=tiny_taxonomy, texts=texts, source="api")
    return list(ReviewItem.objects.filter(top_group__code="15-1252").order_by("-priority", "id"))


def tile_ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'data-testid="tile" data-item-id="(\d+)"', html)]


def group(code: str) -> Group:
    return Group.objects.get(taxonomy__slug="jobs", code=code)


def test_the_groups_page_lists_groups_with_the_most_pending_items(client, curator, developers):
    client.force_login(curator)
    response = client.get("/review/batch/jobs/")
    assert response.status_code == 200
    page = response.content.decode()
    rows = re.findall(r'<span class="code">([^<]+)</span>[^<]*</td>\s*<td class="num">(\d+)<', page)
    assert rows[0] == ("15-1252", "50")
    assert {code for code, _ in rows} == {"15-1252", "35-3023", "29-1141"}
    assert 'href="/review/batch/jobs/15-1252/"' in page


def test_the_groups_page_of_an_unknown_taxonomy_is_a_404(client, curator, developers):
    client.force_login(curator)
    assert client.get("/review/batch/nope/").status_code == 404
    assert client.get("/review/batch/jobs/99-9999/").status_code == 404


def test_a_batch_leases_up_to_48_items_of_the_group_and_shows_their_evidence(
    client, curator, developers
):
    client.force_login(curator)
    response = client.get(URL)
    assert response.status_code == 200
    page = response.content.decode()
    shown = tile_ids(page)
    assert shown == [item.id for item in developers[:48]]
    assert set(ReviewItem.objects.filter(leased_by=curator).values_list("id", flat=True)) == set(
        shown
    )
    assert "matched “Python Developer”" in page
    # The probability heads a tile (the starter ranker's, before any verdict); the similarity
    # is evidence beside it.
    probability = developers[0].prediction.ranked_groups[0]["probability"]
    tile = page.split(f'data-item-id="{developers[0].id}"')[1].split("</label>")[0]
    assert f"{probability:.2f} likely right" in tile
    assert f'data-testid="tile-similarity">similarity {developers[0].top_score:.3f}<' in tile
    assert 'data-testid="confirm-rest"' in page
    assert "Confirm the rest <kbd>Enter</kbd>" in page


def test_a_reload_shows_the_same_batch(client, curator, developers):
    client.force_login(curator)
    first = tile_ids(client.get(URL).content.decode())
    assert tile_ids(client.get(URL).content.decode()) == first


def test_two_curators_get_different_items_of_the_same_group(curator, other_curator, developers):
    carla, oscar = Client(), Client()
    carla.force_login(curator)
    oscar.force_login(other_curator)
    carla_tiles = tile_ids(carla.get(URL).content.decode())
    oscar_tiles = tile_ids(oscar.get(URL).content.decode())
    assert len(carla_tiles) == 48
    assert len(oscar_tiles) == 2
    assert not set(carla_tiles) & set(oscar_tiles)


def test_blind_mode_shows_no_scores_in_the_batch(client, curator, developers):
    client.force_login(curator)
    page = client.get(f"{URL}?blind=1").content.decode()
    assert len(tile_ids(page)) == 48
    assert 'class="score"' not in page
    assert f"{developers[0].top_score:.3f}" not in page
    assert f'action="{URL}?blind=1"' in page


def test_a_bad_blind_flag_is_a_400_naming_it(client, curator, developers):
    client.force_login(curator)
    response = client.get(f"{URL}?blind=maybe")
    assert response.status_code == 400
    assert "blind: Select a valid choice" in response.content.decode()
    assert not ReviewItem.objects.filter(leased_by__isnull=False).exists()


def test_confirm_the_rest_confirms_all_but_the_marked_false_matches(client, curator, developers):
    client.force_login(curator)
    shown = tile_ids(client.get(URL).content.decode())
    wrong = shown[:2]
    response = client.post(URL, {"item": shown, "reject": wrong}, **HTMX)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Just done: 46 confirmed · 2 false matches." in page
    assert b"<html" not in response.content
    verdicts = dict(Judgement.objects.values_list("review_item_id", "verdict"))
    assert verdicts == {
        item_id: "false_match" if item_id in wrong else "confirm" for item_id in shown
    }
    assert set(Judgement.objects.values_list("user__username", flat=True)) == {"carla"}
    statuses = dict(ReviewItem.objects.filter(id__in=shown).values_list("id", "status"))
    assert {statuses[i] for i in wrong} == {"awaiting_group"}
    assert {statuses[i] for i in shown[2:]} == {"done"}
    assert Member.objects.filter(source="curator", group=group("15-1252")).count() == 46
    pairs = FeedbackPair.objects.values_list("text_b", "label", "origin")
    assert sorted(set(pairs)) == [
        ("Python Developer", False, "false_match"),
        ("Python Developer", True, "confirm"),
    ]
    assert FeedbackPair.objects.filter(label=False).count() == 2
    # The next batch is already leased and shown: the two items left in the group.
    assert tile_ids(page) == [item.id for item in developers[48:]]


def test_a_plain_form_post_redirects_to_the_next_batch(client, curator, developers):
    client.force_login(curator)
    shown = tile_ids(client.get(URL).content.decode())
    response = client.post(URL, {"item": shown})
    assert response.status_code == 302
    assert response["Location"] == URL
    assert Judgement.objects.filter(verdict="confirm").count() == 48
    # The reloaded page says what was done, as the htmx panel does.
    assert "Just done: 48 confirmed · 0 false matches." in client.get(URL).content.decode()


def test_a_batch_with_an_item_predicted_elsewhere_since_is_refused_whole(
    client, curator, developers
):
    client.force_login(curator)
    shown = tile_ids(client.get(URL).content.decode())
    # A new model re-predicted one item meanwhile: it is no longer a Software Developer.
    moved = ReviewItem.objects.select_related("prediction").get(id=shown[5])
    prediction = Prediction.objects.create(
        input_id=moved.input_id,
        model_version_id=moved.prediction.model_version_id,
        ranked_groups=[],
        top_group=group("35-3023"),
        top_score=0.9,
    )
    ReviewItem.objects.filter(id=moved.id).update(prediction=prediction, top_group=group("35-3023"))
    response = client.post(URL, {"item": shown, "reject": shown[:1]}, **HTMX)
    assert response.status_code == 409
    page = response.content.decode()
    assert f"item {moved.id} is no longer predicted as Software Developers" in page
    assert not Judgement.objects.exists()
    assert not Member.objects.filter(source="curator").exists()
    assert not FeedbackPair.objects.exists()
    # The batch stays, less the moved item, and the marked tile is still marked.
    again = tile_ids(page)
    assert moved.id not in again and shown[0] in again
    assert re.search(rf'name="reject" value="{shown[0]}" data-tile checked', page)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "item: This field is required."),
        ({"item": ["x"]}, "item: expected review item ids"),
        ({"item": ["1"], "reject": ["2"]}, "reject: items [2] are not in this batch"),
    ],
)
def test_a_malformed_batch_is_a_400_naming_the_field(client, curator, developers, data, message):
    client.force_login(curator)
    response = client.post(URL, data, **HTMX)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Judgement.objects.exists()


def test_items_of_another_curator_in_a_batch_refuse_it_whole(
    client, curator, other_curator, developers
):
    oscar = Client()
    oscar.force_login(other_curator)
    oscars = tile_ids(oscar.get(URL).content.decode())
    client.force_login(curator)
    carlas = tile_ids(client.get(URL).content.decode())
    response = client.post(URL, {"item": [*carlas, oscars[0]]}, **HTMX)
    assert response.status_code == 409
    assert "another curator is reviewing this item" in response.content.decode()
    assert not Judgement.objects.exists()


def test_a_second_curator_batch_reviews_an_item_the_first_one_said_none_to(
    client, settings, tiny_taxonomy, curator, other_curator
):
    settings.SIAMWEB_DOUBLE_REVIEW_PERCENT = 100
    items = inputs_submit(
        taxonomy=tiny_taxonomy, texts=["Java Developer 1", "Java Developer 2"], source="api"
    )
    # Oscar said "none of these": the item waits for a second, independent curator.
    judgement_create(review_item=items[0], user=other_curator, verdict="none")
    items[0].refresh_from_db()
    assert items[0].status == ReviewItem.Status.PENDING
    client.force_login(curator)
    assert sorted(tile_ids(client.get(URL).content.decode())) == sorted(i.id for i in items)
    response = client.post(URL, {"item": [i.id for i in items]}, **HTMX)
    assert response.status_code == 200
    assert Judgement.objects.filter(user=curator, verdict="confirm").count() == 2
    items[0].refresh_from_db()
    assert (items[0].status, items[0].conflict) == (ReviewItem.Status.DONE, True)


def test_an_item_whose_group_was_rejected_for_good_stays_out_of_the_batch(
    client, tiny_taxonomy, curator, other_curator
):
    items = inputs_submit(
        taxonomy=tiny_taxonomy, texts=["Java Developer 1", "Java Developer 2"], source="api"
    )
    # A single-review item left pending with its predicted group rejected (no verdict can
    # confirm or reject that group again) would refuse every batch it was in.
    judgement_create(review_item=items[0], user=other_curator, verdict="false_match")
    ReviewItem.objects.filter(id=items[0].id).update(status=ReviewItem.Status.PENDING)
    client.force_login(curator)
    assert tile_ids(client.get(URL).content.decode()) == [items[1].id]


def test_an_empty_group_says_so(client, curator, developers):
    client.force_login(curator)
    response = client.get("/review/batch/jobs/13-2011/")
    assert response.status_code == 200
    assert 'data-testid="batch-empty"' in response.content.decode()


def test_group_codes_with_dots_work(client, curator, tmp_path):
    csv = tmp_path / "onet.csv"
    csv.write_text(
        "group_code,group_name,text,description\n"
        "15-1252.00,Software Developers,Software Developers,\n"
        "15-1252.00,Software Developers,Java Software Engineer,\n"
        "35-3023.01,Baristas,Baristas,\n"
        "35-3023.01,Baristas,Coffee Maker,\n"
    )
    taxonomy = taxonomy_import(slug="onet", path=csv, fmt="csv", name="O*NET").taxonomy
    build_live_model(taxonomy)
    inputs_submit(taxonomy=taxonomy, texts=["Senior Java Engineer", "Java Engineer"], source="api")
    client.force_login(curator)
    groups_page = client.get("/review/batch/onet/").content.decode()
    assert 'href="/review/batch/onet/15-1252.00/"' in groups_page
    url = "/review/batch/onet/15-1252.00/"
    shown = tile_ids(client.get(url).content.decode())
    assert len(shown) == 2
    response = client.post(url, {"item": shown}, **HTMX)
    assert response.status_code == 200
    assert set(Judgement.objects.values_list("group__code", flat=True)) == {"15-1252.00"}


def test_the_batch_page_costs_the_same_few_queries_with_sixty_items(
    client, curator, developers, tiny_taxonomy, django_assert_max_num_queries
):
    inputs_submit(
        taxonomy=tiny_taxonomy, texts=[f"Python Developer {n}" for n in range(10)], source="api"
    )
    client.force_login(curator)
    with django_assert_max_num_queries(14):  # two to rank the 48 tiles live, not one a tile
        response = client.get(URL)
    assert len(tile_ids(response.content.decode())) == 48
    with django_assert_max_num_queries(7):  # the groups, and the curator's recent batches
        response = client.get("/review/batch/jobs/")
    assert response.status_code == 200


def test_confirming_a_full_batch_costs_a_bounded_number_of_queries(
    client, curator, developers, tiny_taxonomy, django_assert_max_num_queries
):
    inputs_submit(
        taxonomy=tiny_taxonomy, texts=[f"Python Developer {n}" for n in range(10)], source="api"
    )
    client.force_login(curator)
    shown = tile_ids(client.get(URL).content.decode())
    assert len(shown) == 48
    # The reads are shared by the grid (and the next batch's are counted too); each verdict is
    # written by the single card's writer: judgement, pairs, member, item and audit event, at most
    # ten queries with their savepoints.
    with django_assert_max_num_queries(40 + 10 * len(shown)):
        response = client.post(URL, {"item": shown, "reject": shown[:3]}, **HTMX)
    assert response.status_code == 200
    verdicts = dict(Judgement.objects.values_list("review_item_id", "verdict"))
    assert len(verdicts) == 48
    assert [verdicts[int(i)] for i in shown[:3]] == ["false_match"] * 3
    assert {verdicts[int(i)] for i in shown[3:]} == {"confirm"}


def submitted_batch(client) -> list[int]:
    """A grid confirmed whole; the ids of the items it held."""
    ids = tile_ids(client.get(URL).content.decode())
    assert client.post(URL, {"item": ids}, **HTMX).status_code == 200
    return ids


def test_a_batch_stays_undoable_from_the_groups_page_after_its_result_page_is_left(
    client, curator, developers
):
    client.force_login(curator)
    ids = submitted_batch(client)
    page = client.get("/review/batch/jobs/").content.decode()
    (row,) = re.findall(r'data-testid="recent-batch">(.*?)</tr>', page, re.S)
    assert "15-1252</span> Software Developers" in row
    assert f'<td class="num">{len(ids)}</td><td class="num">0</td>' in row
    posted = re.findall(r'name="judgement" value="(\d+)"', row)
    response = client.post("/review/batch/jobs/15-1252/undo", {"judgement": posted}, follow=True)
    assert f"Batch undone: {len(ids)} verdicts taken back." in response.content.decode()
    assert not Judgement.objects.live().exists()
    assert 'data-testid="recent-batch"' not in client.get("/review/batch/jobs/").content.decode()


def test_undoing_a_batch_one_of_whose_items_was_judged_again_changes_nothing_and_says_why(
    client, curator, other_curator, developers
):
    client.force_login(curator)
    ids = submitted_batch(client)
    posted = list(Judgement.objects.filter(review_item_id__in=ids).values_list("id", flat=True))
    # One item is double-reviewed meanwhile: a later verdict by someone else stands on it.
    item = ReviewItem.objects.get(id=ids[0])
    ReviewItem.objects.filter(id=item.id).update(reviews_required=2, status="pending")
    judgement_create(review_item=item, user=other_curator, verdict="none")
    before = sorted(Judgement.objects.live().values_list("id", flat=True))
    response = client.post("/review/batch/jobs/15-1252/undo", {"judgement": posted}, follow=True)
    assert "a later verdict on this item must be undone first: oscar judged it later" in (
        response.content.decode()
    )
    assert sorted(Judgement.objects.live().values_list("id", flat=True)) == before
