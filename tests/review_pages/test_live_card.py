"""The card shows what the live model and ranker answer now: after a ranker refit its groups,
order and probabilities are the API's for that text, stored as a new prediction the verdict
names; the earlier prediction stays as history. A card the live model cannot rank shows the
stored ranking with a note, never an error page."""

from __future__ import annotations

import re

from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotations.models import Prediction, ReviewItem
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.leases import review_item_claim
from annotations.services.review.verdicts import judgement_create
from models_app.models import RankerVersion
from tests.review_pages.test_queue import card_item_id
from tests.test_match_probability import judge_all
from tests.test_serving_broken_files import DAMAGES, new_build_folder, one_file

CARD_TEXT = "Senior Tax Accountant Remote"


def card_groups(page: str) -> list[tuple[str, str]]:
    """(code, probability) of each group on the card, in order."""
    found = []
    for option in page.split('data-testid="group-option"')[1:]:
        probability = re.search(r'data-testid="option-probability"[^>]*>([0-9.]+)<', option)
        code = re.search(r'name="group_code" value="([^"]+)"', option)
        found.append((code.group(1), probability.group(1)))
    return found


def test_after_a_refit_the_card_shows_the_apis_answer_and_the_verdict_names_it(
    client, tiny_taxonomy, curator, api_client
):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=[CARD_TEXT], source="api")
    first = item.prediction
    judge_all(tiny_taxonomy, curator)  # verdicts, then a ranker fitted on them goes live
    assert RankerVersion.objects.filter(status="live").exists()
    live = api_client.post("/api/v1/taxonomies/jobs/normalize", {"texts": [CARD_TEXT]},
                           format="json").json()["results"][0]  # fmt: skip
    assert [g["probability"] for g in live["groups"]] != [
        g["probability"] for g in first.ranked_groups
    ]  # the refit moved the answer: the stored ranking is stale

    client.force_login(curator)
    page = client.get("/review/").content.decode()
    assert card_item_id(page) == item.id
    shown = card_groups(page)
    assert shown == [(g["code"], f"{g['probability']:.2f}") for g in live["groups"]]
    item.refresh_from_db()
    assert item.prediction_id != first.id
    assert item.prediction.ranked_groups == live["groups"]
    assert item.top_group_id == live["groups"][0]["group_id"]
    assert Prediction.objects.filter(id=first.id).exists()  # the earlier one stays as history
    # The verdict names the ranking the curator saw.
    judgement = judgement_create(review_item=item, user=curator, verdict="confirm",
                                 prediction_id=item.prediction_id)  # fmt: skip
    assert judgement.prediction_id == item.prediction_id != first.id


def test_an_unchanged_answer_stores_nothing_new(client, tiny_taxonomy, curator):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=[CARD_TEXT], source="api")
    client.force_login(curator)
    client.get("/review/")
    client.get("/review/")
    assert Prediction.objects.filter(input_id=item.input_id).count() == 1


def test_a_card_the_live_model_cannot_rank_shows_the_stored_ranking_with_a_note(
    client, tiny_taxonomy, curator
):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=[CARD_TEXT], source="api")
    pattern, damage, said = DAMAGES[0]
    damaged = one_file(new_build_folder(tiny_taxonomy), pattern)
    from models_app.serving.engines import forget_loaded_engines

    forget_loaded_engines()  # a web process that never loaded the new build
    damage(damaged)
    client.force_login(curator)
    response = client.get("/review/")
    assert response.status_code == 200
    page = response.content.decode()
    assert card_item_id(page) == item.id
    assert 'data-testid="ranking-note"' in page and said in page
    assert "shows the answer stored when the input arrived" in page
    assert card_groups(page) == [
        (g["code"], f"{g['probability']:.2f}") for g in item.prediction.ranked_groups
    ]
    assert ReviewItem.objects.get(id=item.id).prediction_id == item.prediction_id
    # The input's page says the same, above the stored groups.
    input_page = client.get(f"/inputs/{item.input_id}/")
    assert input_page.status_code == 200
    assert 'data-testid="ranking-note"' in input_page.content.decode()


def test_the_queue_the_batch_grid_and_the_input_page_show_the_live_answer(
    client, tiny_taxonomy, curator, api_client
):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=[CARD_TEXT], source="api")
    judge_all(tiny_taxonomy, curator)
    live = api_client.post("/api/v1/taxonomies/jobs/normalize", {"texts": [CARD_TEXT]},
                           format="json").json()["results"][0]  # fmt: skip
    top = live["groups"][0]
    client.force_login(curator)

    queue = client.get("/review/queue/").content.decode()
    row = re.search(rf'data-item-id="{item.id}">(.*?)</tr>', queue, re.S).group(1)
    assert top["code"] in row and f">{top['probability']:.2f}<" in row

    page = client.get(f"/inputs/{item.input_id}/").content.decode()
    answer = re.search(r'data-testid="item-top">(.*?)</dd>', page, re.S).group(1)
    assert top["code"] in answer and top["name"] in answer
    # Every group the API offers, in its order, with the chance the card words.
    offered = re.findall(
        r'data-testid="offered-group" data-group-code="([^"]+)">.*?'
        r'data-testid="offered-probability">([0-9.]+) likely right<',
        page,
    )
    assert [code for code, _ in offered] == [g["code"] for g in live["groups"]]
    for (_, shown), group in zip(offered, live["groups"], strict=True):
        assert abs(float(shown) - group["probability"]) <= 0.005

    grid = client.get(f"/review/batch/jobs/{top['code']}/").content.decode()
    tile = re.search(rf'data-testid="tile" data-item-id="{item.id}" data-probability="([0-9.]+)"',
                     grid)  # fmt: skip
    assert tile and abs(float(tile.group(1)) - top["probability"]) < 1e-6


def test_a_look_at_the_queue_leaves_the_card_another_curator_holds_as_they_see_it(
    client, tiny_taxonomy, curator, other_curator
):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=[CARD_TEXT], source="api")
    held = review_item_claim(user=other_curator)
    assert held.id == item.id
    judge_all(tiny_taxonomy, curator)  # the answer moves under them
    client.force_login(curator)
    client.get("/review/queue/")
    client.get(f"/inputs/{item.input_id}/")
    item.refresh_from_db()
    assert item.prediction_id == held.prediction_id  # their verdict is not made stale


def test_a_queue_page_of_moved_answers_reads_nothing_a_row(client, tiny_taxonomy, curator):
    texts = [f"Senior Tax Accountant Remote {n}" for n in range(12)]
    inputs_submit(taxonomy=tiny_taxonomy, texts=texts, source="api")
    judge_all(tiny_taxonomy, curator)  # every open answer moves
    client.force_login(curator)
    with CaptureQueriesContext(connection) as queries:
        page = client.get("/review/queue/").content.decode()
    assert page.count('data-testid="queue-row"') == len(texts)
    # (PostgreSQL's driver records some statements, savepoints, without their text.)
    statements = [query["sql"].split()[0] for query in queries.captured_queries if query["sql"]]
    # Each moved item is pointed at its new prediction only while it still shows the old one
    # (one conditional update each); everything read, and the new predictions, go in bulk.
    assert statements.count("UPDATE") == len(texts)
    assert statements.count("INSERT") == 1
    assert statements.count("SELECT") <= 12
