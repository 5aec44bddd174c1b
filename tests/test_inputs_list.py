from __future__ import annotations

import re

import pytest

from annotations.models import Group, Input
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from annotations.services.taxonomy import taxonomy_import
from tests.conftest import TINY_CSV
from tests.test_match_probability import judge_all


def row_texts(response) -> list[str]:
    return re.findall(r'<td class="text"><a [^>]*>([^<]*)</a></td>', response.content.decode())


@pytest.fixture
def other_taxonomy(db):
    return taxonomy_import(slug="other", path=TINY_CSV, fmt="csv", name="Other").taxonomy


def many_inputs(taxonomy, count: int, prefix: str = "title") -> list[Input]:
    return Input.objects.bulk_create(
        Input(taxonomy=taxonomy, text=f"{prefix} {n}", normalized_text=f"{prefix} {n}")
        for n in range(count)
    )


def test_the_inputs_list_requires_a_curator(client, tiny_taxonomy, user_model):
    response = client.get("/inputs/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/inputs/"
    client.force_login(user_model.objects.create_user(username="olga", password="olga-pass-1"))
    assert client.get("/inputs/").status_code == 403


def test_it_shows_occurrences_source_review_status_and_predicted_group(
    client, curator, tiny_taxonomy
):
    inputs_submit(taxonomy=tiny_taxonomy, texts=["Long haul trucker driver"], source="upload")
    inputs_submit(taxonomy=tiny_taxonomy, texts=["long haul trucker driver"], source="api")
    client.force_login(curator)
    response = client.get("/inputs/", {"taxonomy": "jobs"})
    assert response.status_code == 200
    page = response.content.decode()
    row = page[page.index('data-testid="input-row"') :]
    row = row[: row.index("</tr>")]
    assert "Long haul trucker driver" in row
    assert '<td class="num">2</td>' in row
    assert "CSV upload" in row
    assert "Pending" in row
    assert "53-3032" in row
    assert "Heavy Truck Drivers" in row


def test_the_predicted_group_carries_the_chance_the_card_words_not_a_bare_similarity(
    client, curator, tiny_taxonomy
):
    judge_all(tiny_taxonomy, curator)  # a calibrated ranker: predictions carry a probability
    [item] = inputs_submit(
        taxonomy=tiny_taxonomy, texts=["Senior Tax Accountant Remote"], source="api"
    )
    item.refresh_from_db()
    probability = item.prediction.ranked_groups[0]["probability"]
    assert probability is not None
    client.force_login(curator)
    page = client.get("/inputs/", {"q": "senior tax accountant remote"}).content.decode()
    [shown] = re.findall(r'data-testid="input-chance"[^>]*>([0-9.]+) likely right</span>', page)
    assert abs(float(shown) - probability) <= 0.005  # as the card rounds it
    # The similarity stays as evidence in the title, never as the figure shown.
    [similarity] = re.findall(r"nearest member: ([0-9.]+)\)", page)
    assert abs(float(similarity) - item.top_score) <= 0.0005


def test_a_group_the_curators_chose_instead_carries_no_chance_said_of_another(
    client, curator, tiny_taxonomy
):
    """The prediction's chance was said of the model's group: beside the curators' group it
    would read as theirs."""
    judge_all(tiny_taxonomy, curator)
    [item] = inputs_submit(
        taxonomy=tiny_taxonomy, texts=["Senior Tax Accountant Remote"], source="api"
    )
    item.refresh_from_db()
    assert item.prediction.ranked_groups[0]["probability"] is not None
    other = Group.objects.filter(taxonomy=tiny_taxonomy).exclude(id=item.top_group_id).first()
    judgement_create(review_item=item, user=curator, verdict="reassign", group=other)
    client.force_login(curator)
    page = client.get("/inputs/", {"q": "senior tax accountant remote"}).content.decode()
    row = page[page.index('data-testid="input-row"') :]
    row = row[: row.index("</tr>")]
    assert other.name in row
    assert 'data-testid="input-chance"' not in row


def test_it_filters_by_taxonomy_and_by_text(client, curator, tiny_taxonomy, other_taxonomy):
    many_inputs(tiny_taxonomy, 3, prefix="java dev")
    many_inputs(other_taxonomy, 2, prefix="java dev")
    many_inputs(tiny_taxonomy, 2, prefix="nurse")
    client.force_login(curator)
    response = client.get("/inputs/", {"taxonomy": "jobs", "q": "JAVA"})
    assert response.status_code == 200
    assert row_texts(response) == ["java dev 2", "java dev 1", "java dev 0"]
    assert len(row_texts(client.get("/inputs/"))) == 7
    assert row_texts(client.get("/inputs/", {"taxonomy": "other"})) == ["java dev 1", "java dev 0"]


def test_it_pages_back_in_time_fifty_at_a_time(client, curator, tiny_taxonomy):
    created = many_inputs(tiny_taxonomy, 120)
    client.force_login(curator)
    first = client.get("/inputs/", {"taxonomy": "jobs"})
    assert first.status_code == 200
    assert row_texts(first) == [f"title {n}" for n in range(119, 69, -1)]
    older = re.search(r'href="\?([^"]+)" data-testid="older-page"', first.content.decode())
    assert older.group(1) == f"taxonomy=jobs&amp;before={created[70].id}"

    second = client.get("/inputs/", {"taxonomy": "jobs", "before": created[70].id})
    assert row_texts(second) == [f"title {n}" for n in range(69, 19, -1)]
    last = client.get("/inputs/", {"taxonomy": "jobs", "before": created[20].id})
    assert row_texts(last) == [f"title {n}" for n in range(19, -1, -1)]
    assert 'data-testid="older-page"' not in last.content.decode()
    assert 'data-testid="newest-page"' in last.content.decode()


def test_the_number_of_queries_does_not_grow_with_the_inputs_shown(
    client, curator, tiny_taxonomy, django_assert_max_num_queries
):
    inputs_submit(
        taxonomy=tiny_taxonomy, texts=[f"java developer {n}" for n in range(60)], source="upload"
    )
    many_inputs(tiny_taxonomy, 60)
    client.force_login(curator)
    # session, user, role, the taxonomies for the filter, one page of inputs with their items
    with django_assert_max_num_queries(6):
        response = client.get("/inputs/", {"taxonomy": "jobs"})
    assert response.status_code == 200
    with django_assert_max_num_queries(6):
        response = client.get("/inputs/", {"q": "java", "before": 10**9})
    assert response.status_code == 200
    assert len(row_texts(response)) == 50


def test_bad_filters_get_a_400_naming_the_field(client, curator, tiny_taxonomy):
    client.force_login(curator)
    response = client.get("/inputs/", {"before": "soon"})
    assert response.status_code == 400
    assert "before: Enter a whole number." in response.content.decode()
    response = client.get("/inputs/", {"taxonomy": "nope"})
    assert response.status_code == 400
    assert "taxonomy: no taxonomy &#x27;nope&#x27;" in response.content.decode()
    # A field the page labels is named as the page names it, not by its query parameter.
    response = client.get("/inputs/", {"q": "x" * 101})
    assert response.status_code == 400
    page = response.content.decode()
    assert "Text contains: Ensure this value has at most 100 characters (it has 101)." in page
    assert "q:" not in page
