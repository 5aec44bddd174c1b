from __future__ import annotations

import re

import pytest
from django.test import Client

from annotations.models import Judgement, Member, ReviewItem
from annotations.services.review import inputs_submit, judgement_create, review_item_claim

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def items(tiny_taxonomy):
    return inputs_submit(
        taxonomy=tiny_taxonomy, texts=["Java Barista", "icu staff nurse"], source="api"
    )


@pytest.fixture
def many_items(tiny_taxonomy):
    """Sixty pending items over several groups: enough to catch a query per item."""
    texts = [f"Java Developer {n}" for n in range(30)]
    texts += [f"Staff Nurse {n}" for n in range(15)]
    texts += [f"Coffee Maker {n}" for n in range(15)]
    return inputs_submit(taxonomy=tiny_taxonomy, texts=texts, source="api")


def head() -> ReviewItem:
    return ReviewItem.objects.order_by("-priority", "id").first()


def card_item_id(html: str) -> int:
    return int(re.search(r'data-testid="review-card" data-item-id="(\d+)"', html).group(1))


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# --- the card -------------------------------------------------------------------------------


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
        assert f'<span class="score">{ranked["score"]:.3f}</span>' in page
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


# --- verdicts -------------------------------------------------------------------------------


def test_an_htmx_verdict_is_stored_and_the_next_card_comes_back(client, curator, items):
    client.force_login(curator)
    first = head()
    client.get("/review/")
    response = client.post(f"/review/items/{first.id}/judge", {"verdict": "confirm"}, **HTMX)
    assert response.status_code == 200
    assert b"<html" not in response.content  # just the panel
    judgement = Judgement.objects.get()
    assert (judgement.review_item_id, judgement.verdict, judgement.user) == (
        first.id,
        "confirm",
        curator,
    )
    remaining = ReviewItem.objects.exclude(id=first.id).get()
    page = response.content.decode()
    assert card_item_id(page) == remaining.id
    # The counter comes in its own request, so the next card needn't wait for the count.
    assert 'hx-get="/review/progress/" hx-trigger="load"' in page
    progress = client.get("/review/progress/", **HTMX)
    assert progress.status_code == 200
    assert "1 open · 1 done · 1 yours today" in progress.content.decode()


def test_the_progress_counts_within_the_filters_and_only_live_verdicts_of_today(
    client, curator, other_curator, items
):
    nurse = ReviewItem.objects.get(input__text="icu staff nurse")
    judgement_create(review_item=nurse, user=other_curator, verdict="confirm")
    barista = ReviewItem.objects.get(input__text="Java Barista")
    judgement_create(review_item=barista, user=curator, verdict="skip")
    undone = judgement_create(review_item=barista, user=curator, verdict="none")
    client.force_login(curator)
    client.post(f"/review/judgements/{undone.id}/undo", **HTMX)
    page = client.get("/review/progress/?taxonomy=jobs&group=29-1141").content.decode()
    assert "0 open · 1 done · 1 yours today" in page
    page = client.get("/review/progress/").content.decode()
    assert "0 open · 1 done · 1 yours today" in page  # the skipped item is neither
    response = client.get("/review/progress/?score_min=x")
    assert response.status_code == 400
    assert "score_min: Enter a number." in response.content.decode()


def test_a_double_submitted_verdict_is_stored_once(client, curator, items):
    client.force_login(curator)
    first = head()
    data = {"verdict": "confirm", "idempotency_key": "card-1", "prediction_id": first.prediction_id}
    assert client.post(f"/review/items/{first.id}/judge", data, **HTMX).status_code == 200
    assert client.post(f"/review/items/{first.id}/judge", data, **HTMX).status_code == 200
    assert Judgement.objects.count() == 1


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"verdict": "reassign", "group_code": "99-9999"}, "no group &#x27;99-9999&#x27;"),
        ({"verdict": "reassign"}, "reassign needs the group"),
        ({"verdict": "obliterate"}, "Select a valid choice"),
    ],
)
def test_a_bad_verdict_is_a_400_with_the_reason_and_stores_nothing(
    client, curator, items, data, message
):
    client.force_login(curator)
    first = items[0]
    response = client.post(f"/review/items/{first.id}/judge", data, **HTMX)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Judgement.objects.exists()
    first.refresh_from_db()
    assert first.status == ReviewItem.Status.PENDING


def test_a_refused_verdict_keeps_the_curator_on_the_same_card(client, curator, items):
    client.force_login(curator)
    shown = card_item_id(client.get("/review/").content.decode())
    item = ReviewItem.objects.get(id=shown)
    rejected = item.prediction.ranked_groups[0]["code"]
    client.post(f"/review/items/{shown}/judge", {"verdict": "false_match"}, **HTMX)
    response = client.post(
        f"/review/items/{shown}/judge", {"verdict": "reassign", "group_code": rejected}, **HTMX
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "was rejected for this input" in page
    assert card_item_id(page) == shown
    assert Judgement.objects.get().verdict == "false_match"


def test_a_verdict_on_an_item_another_curator_holds_is_a_409(client, curator, other_curator, items):
    held = review_item_claim(user=other_curator)
    client.force_login(curator)
    response = client.post(f"/review/items/{held.id}/judge", {"verdict": "confirm"}, **HTMX)
    assert response.status_code == 409
    page = response.content.decode()
    assert "another curator is reviewing this item" in page
    assert card_item_id(page) != held.id  # the curator gets a card of their own meanwhile
    assert not Judgement.objects.exists()


def test_group_search_finds_groups_by_name_words(client, curator, items):
    client.force_login(curator)
    response = client.get(f"/review/items/{items[0].id}/groups", {"q": "truck driv"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "Heavy Truck Drivers" in page
    assert "Baristas" not in page
    assert "data-result" in page


def test_group_search_results_keep_the_filters(client, curator, items):
    client.force_login(curator)
    response = client.get(
        f"/review/items/{items[0].id}/groups", {"q": "nurse", "taxonomy": "jobs", "blind": "1"}
    )
    assert response.status_code == 200
    assert (
        f"/review/items/{items[0].id}/judge?taxonomy=jobs&amp;blind=1" in response.content.decode()
    )


def test_judging_an_unknown_item_is_a_404(client, curator, items):
    client.force_login(curator)
    assert client.post("/review/items/999999/judge", {"verdict": "skip"}).status_code == 404


def test_the_health_check_needs_no_login(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_only_curators_and_admins_may_review(client, user_model, items):
    outsider = user_model.objects.create_user("otto", password="otto-pass-123")
    client.force_login(outsider)
    for url in ["/review/", "/review/queue/", "/review/batch/jobs/", "/review/batch/jobs/15-1252/"]:
        assert client.get(url).status_code == 403, url
    response = client.post(f"/review/items/{items[0].id}/judge", {"verdict": "skip"})
    assert response.status_code == 403
    assert not Judgement.objects.exists()


def test_an_anonymous_verdict_is_refused_and_stores_nothing(client, items):
    response = client.post(f"/review/items/{items[0].id}/judge", {"verdict": "confirm"})
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    assert not Judgement.objects.exists()


def test_a_verdict_without_the_csrf_token_is_refused(curator, items):
    client = Client(enforce_csrf_checks=True)
    client.force_login(curator)
    response = client.post(f"/review/items/{items[0].id}/judge", {"verdict": "skip"})
    assert response.status_code == 403
    assert not Judgement.objects.exists()


def test_a_verdict_on_a_stale_card_is_a_409_and_shows_the_current_one(
    client, curator, tiny_taxonomy, items
):
    client.force_login(curator)
    shown = card_item_id(client.get("/review/").content.decode())
    item = ReviewItem.objects.get(id=shown)
    shown_prediction = item.prediction_id
    inputs_submit(taxonomy=tiny_taxonomy, texts=[item.input.text], source="api")
    response = client.post(
        f"/review/items/{shown}/judge",
        {"verdict": "confirm", "prediction_id": shown_prediction},
        **HTMX,
    )
    assert response.status_code == 409
    page = response.content.decode()
    assert "prediction changed" in page
    assert card_item_id(page) == shown
    item.refresh_from_db()
    assert f'name="prediction_id" value="{item.prediction_id}"' in page
    assert item.prediction_id != shown_prediction
    assert not Judgement.objects.exists()


def test_control_characters_in_the_group_search_are_ignored(client, curator, items):
    client.force_login(curator)
    response = client.get(f"/review/items/{items[0].id}/groups", {"q": "nur\x00se"})
    assert response.status_code == 200
    assert "Registered Nurses" in response.content.decode()


def test_after_a_false_match_the_card_offers_only_the_other_groups(client, curator, items):
    client.force_login(curator)
    first = head()
    rejected = first.prediction.ranked_groups[0]
    client.post(
        f"/review/items/{first.id}/judge",
        {"verdict": "false_match", "group_code": rejected["code"]},
        **HTMX,
    )
    page = client.get("/review/").content.decode()
    assert card_item_id(page) == first.id  # half done: it comes first
    assert "false match: pick the right group" in page
    assert f'value="{rejected["code"]}"' not in page
    assert 'data-testid="confirm"' not in page


def test_a_second_curator_sees_every_group_the_first_one_rejected(
    client, settings, tiny_taxonomy, curator, other_curator
):
    settings.SIAMWEB_DOUBLE_REVIEW_PERCENT = 100
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")
    judgement_create(review_item=item, user=other_curator, verdict="none")
    client.force_login(curator)
    page = client.get("/review/").content.decode()
    assert card_item_id(page) == item.id
    assert page.count('data-testid="group-option"') == len(item.prediction.ranked_groups)
    assert 'data-testid="confirm"' in page


# --- the last verdicts and undo -------------------------------------------------------------


def test_the_last_ten_verdicts_are_listed_beside_the_card_each_undoable(
    client, curator, many_items
):
    for item in many_items[:12]:
        judgement_create(review_item=item, user=curator, verdict="skip")
    client.force_login(curator)
    page = client.get("/review/").content.decode()
    listed = [
        int(i) for i in re.findall(r'data-testid="recent-verdict" data-judgement-id="(\d+)"', page)
    ]
    latest = list(Judgement.objects.order_by("-created_at").values_list("id", flat=True)[:10])
    assert listed == latest
    assert page.count('data-testid="undo"') == 10
    assert page.count('data-shortcut="u"') == 1


def test_undo_brings_the_card_back_to_judge_again(client, curator, items):
    client.force_login(curator)
    first = card_item_id(client.get("/review/").content.decode())
    client.post(f"/review/items/{first}/judge", {"verdict": "confirm"}, **HTMX)
    judgement = Judgement.objects.get()
    response = client.post(f"/review/judgements/{judgement.id}/undo", **HTMX)
    assert response.status_code == 200
    page = response.content.decode()
    assert card_item_id(page) == first
    assert "Verdict undone" in page
    judgement.refresh_from_db()
    assert judgement.undone_at is not None
    item = ReviewItem.objects.get(id=first)
    assert (item.status, item.leased_by) == (ReviewItem.Status.PENDING, curator)
    assert not Member.objects.filter(source="curator").exists()
    # Judged again, the card the curator was on before the undo comes next.
    response = client.post(f"/review/items/{first}/judge", {"verdict": "skip"}, **HTMX)
    assert card_item_id(response.content.decode()) != first


def test_undo_of_someone_elses_verdict_is_a_409(client, curator, other_curator, items):
    judgement = judgement_create(review_item=items[0], user=other_curator, verdict="confirm")
    client.force_login(curator)
    response = client.post(f"/review/judgements/{judgement.id}/undo", **HTMX)
    assert response.status_code == 409
    assert "only its curator or an admin can undo" in response.content.decode()
    judgement.refresh_from_db()
    assert judgement.undone_at is None


def test_undo_of_a_verdict_that_is_not_the_latest_on_its_item_is_a_409(client, curator, items):
    item = items[0]
    false_match = judgement_create(review_item=item, user=curator, verdict="false_match")
    reassign = judgement_create(
        review_item=item,
        user=curator,
        verdict="reassign",
        group=item.taxonomy.groups.get(code="53-3032"),
    )
    client.force_login(curator)
    response = client.post(f"/review/judgements/{false_match.id}/undo", **HTMX)
    assert response.status_code == 409
    assert "a later verdict on this item must be undone first" in response.content.decode()
    assert Judgement.objects.live().count() == 2
    assert reassign.id in [j.id for j in Judgement.objects.live()]


def test_undo_of_an_unknown_verdict_is_a_404(client, curator, items):
    client.force_login(curator)
    assert client.post("/review/judgements/999999/undo", **HTMX).status_code == 404


def test_undo_needs_a_post(client, curator, items):
    judgement = judgement_create(review_item=items[0], user=curator, verdict="skip")
    client.force_login(curator)
    assert client.get(f"/review/judgements/{judgement.id}/undo").status_code == 405
    judgement.refresh_from_db()
    assert judgement.undone_at is None


# --- the queue table ------------------------------------------------------------------------


def test_the_queue_lists_fifty_items_and_links_the_next_page(client, curator, many_items):
    client.force_login(curator)
    response = client.get("/review/queue/")
    assert response.status_code == 200
    page = response.content.decode()
    first_page = [int(i) for i in re.findall(r'data-testid="queue-row" data-item-id="(\d+)"', page)]
    in_order = list(ReviewItem.objects.order_by("-priority", "id").values_list("id", flat=True))
    assert first_page == in_order[:50]
    next_url = re.search(r'href="([^"]+)" rel="next"', page).group(1).replace("&amp;", "&")
    second = client.get(next_url)
    assert second.status_code == 200
    second_page = [
        int(i)
        for i in re.findall(
            r'data-testid="queue-row" data-item-id="(\d+)"', second.content.decode()
        )
    ]
    assert second_page == in_order[50:]
    assert 'rel="next"' not in second.content.decode()


def test_the_queue_shows_who_holds_an_item_and_its_score(client, curator, other_curator, items):
    held = review_item_claim(user=other_curator)
    client.force_login(curator)
    page = client.get("/review/queue/").content.decode()
    row = re.search(rf'data-item-id="{held.id}">(.*?)</tr>', page, re.S).group(1)
    assert "oscar" in row
    assert f"{held.top_score:.3f}" in row
    assert held.top_group.name in row


def test_the_queue_keeps_the_filters_on_the_next_page_link(client, curator, many_items):
    client.force_login(curator)
    page = client.get("/review/queue/?taxonomy=jobs&group=15-1252&blind=1").content.decode()
    rows = re.findall(r'data-testid="queue-row" data-item-id="(\d+)"', page)
    assert len(rows) == 30
    assert 'class="num score"' not in page
    assert 'rel="next"' not in page
    page = client.get("/review/queue/?taxonomy=jobs").content.decode()
    assert re.search(
        r'href="/review/queue/\?taxonomy=jobs&amp;after=[0-9.e-]+:\d+" rel="next"', page
    )


@pytest.mark.parametrize("after", ["x", "1.5", "nan:3", "1.5:x", "1.5:-2"])
def test_a_bad_queue_cursor_is_a_400_naming_it(client, curator, items, after):
    client.force_login(curator)
    response = client.get("/review/queue/", {"after": after})
    assert response.status_code == 400
    assert "after: expected &lt;priority&gt;:&lt;id&gt;" in response.content.decode()


def test_bad_queue_filters_are_a_400_naming_the_field(client, curator, items):
    client.force_login(curator)
    response = client.get("/review/queue/?status=done")
    assert response.status_code == 400
    assert "status: Select a valid choice" in response.content.decode()


# --- bounded queries ------------------------------------------------------------------------


def test_the_card_page_costs_the_same_few_queries_with_sixty_items(
    client, curator, many_items, django_assert_max_num_queries
):
    for item in many_items[-10:]:
        judgement_create(review_item=item, user=curator, verdict="skip")
    client.force_login(curator)
    with django_assert_max_num_queries(17):  # one for whether the verdicts changed (probability)
        response = client.get("/review/")
    assert response.status_code == 200
    shown = card_item_id(response.content.decode())
    with django_assert_max_num_queries(33):  # the next card's probability check included
        response = client.post(f"/review/items/{shown}/judge", {"verdict": "confirm"}, **HTMX)
    assert response.status_code == 200


def test_the_queue_page_costs_the_same_few_queries_with_sixty_items(
    client, curator, other_curator, many_items, django_assert_max_num_queries
):
    for _ in range(3):
        review_item_claim(user=other_curator)
        review_item_claim(user=curator)
    client.force_login(curator)
    with django_assert_max_num_queries(6):
        response = client.get("/review/queue/")
    assert response.status_code == 200
    assert response.content.decode().count('data-testid="queue-row"') == 50
