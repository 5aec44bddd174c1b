from __future__ import annotations

import re

import pytest

from annotations.models import Group, Judgement, Member, ReviewItem
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create

HTMX = {"HTTP_HX_REQUEST": "true"}


def group(code: str) -> Group:
    return Group.objects.get(taxonomy__slug="jobs", code=code)


@pytest.fixture
def conflict(settings, tiny_taxonomy, curator, other_curator) -> ReviewItem:
    """Carla says "Java Barista" is a barista, Oscar says a software developer."""
    settings.SIAMWEB_DOUBLE_REVIEW_PERCENT = 100
    item, agreed = inputs_submit(
        taxonomy=tiny_taxonomy, texts=["Java Barista", "icu staff nurse"], source="api"
    )
    judgement_create(review_item=item, user=curator, verdict="confirm")
    judgement_create(
        review_item=item, user=other_curator, verdict="reassign", group=group("15-1252")
    )
    judgement_create(review_item=agreed, user=curator, verdict="confirm")
    judgement_create(review_item=agreed, user=other_curator, verdict="confirm")
    item.refresh_from_db()
    assert (item.conflict, item.status) == (True, ReviewItem.Status.DONE)
    return item


def test_curators_may_not_see_or_settle_conflicts(client, curator, conflict):
    client.force_login(curator)
    assert client.get("/review/conflicts/").status_code == 403
    response = client.post(f"/review/conflicts/{conflict.id}/resolve", {"group_code": "35-3023"})
    assert response.status_code == 403
    conflict.refresh_from_db()
    assert conflict.conflict is True


def test_the_conflicts_page_needs_a_login(client, conflict):
    response = client.get("/review/conflicts/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_an_admin_sees_each_curators_verdict_and_their_agreement(client, admin_user, conflict):
    client.force_login(admin_user)
    response = client.get("/review/conflicts/")
    assert response.status_code == 200
    page = response.content.decode()
    articles = re.findall(r'data-testid="conflict" data-item-id="(\d+)"', page)
    assert articles == [str(conflict.id)]
    verdicts = re.findall(r'data-testid="conflict-verdict">(.*?)</li>', page)
    text = [re.sub(r"<[^>]+>", "", v) for v in verdicts]
    assert sorted(text) == [
        "carla: Confirm → 35-3023 Baristas",
        "oscar: Reassign → 15-1252 Software Developers",
    ]
    assert "Settle: Baristas" in page and "Settle: Software Developers" in page
    rows = re.findall(r'data-testid="curator-row">(.*?)</tr>', page, re.S)
    cells = [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in rows]
    # curator, verdicts, today, last 7 days, a day, seen twice, agreement, reversed, overruled
    assert cells == [
        ["carla", "2", "2", "2", "2.0", "2", "50%", "0%", "0"],
        ["oscar", "2", "2", "2", "2.0", "2", "50%", "0%", "0"],
    ]


def test_settling_with_a_curators_group_undoes_the_other_verdict(client, admin_user, conflict):
    client.force_login(admin_user)
    response = client.post(
        f"/review/conflicts/{conflict.id}/resolve", {"group_code": "35-3023"}, **HTMX
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "Settled “Java Barista”: 35-3023 Baristas." in page
    assert 'data-testid="no-conflicts"' in page
    # The disagreement stays in the figures: oscar's verdict was overruled, not taken back.
    rows = re.findall(r'data-testid="curator-row">(.*?)</tr>', page, re.S)
    cells = [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in rows]
    assert cells == [
        ["carla", "2", "2", "2", "2.0", "2", "50%", "0%", "0"],
        ["oscar", "1", "1", "1", "1.0", "2", "50%", "0%", "1"],
    ]
    conflict.refresh_from_db()
    assert (conflict.conflict, conflict.status) == (False, ReviewItem.Status.DONE)
    live = Judgement.objects.live().filter(review_item=conflict)
    assert [(j.user.username, j.group.code) for j in live] == [("carla", "35-3023")]
    assert not Member.objects.filter(source="curator", group__code="15-1252").exists()


def test_settling_with_none_of_the_groups(client, admin_user, conflict):
    client.force_login(admin_user)
    response = client.post(f"/review/conflicts/{conflict.id}/resolve", {"none": "1"}, **HTMX)
    assert response.status_code == 200
    conflict.refresh_from_db()
    assert conflict.conflict is False
    live = Judgement.objects.live().filter(review_item=conflict)
    assert [(j.user.username, j.verdict) for j in live] == [("ada", "none")]
    assert not Member.objects.filter(source="curator", text="Java Barista").exists()


def test_settling_with_another_group_found_by_search(client, admin_user, conflict):
    client.force_login(admin_user)
    response = client.get(
        f"/review/items/{conflict.id}/groups", {"q": "truck", "purpose": "resolve"}
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert f'hx-post="/review/conflicts/{conflict.id}/resolve"' in page
    assert 'hx-target="#conflicts-panel"' in page
    assert 'name="group_code" value="53-3032"' in page
    response = client.post(
        f"/review/conflicts/{conflict.id}/resolve", {"group_code": "53-3032"}, **HTMX
    )
    assert response.status_code == 200
    live = Judgement.objects.live().filter(review_item=conflict)
    assert [(j.user.username, j.verdict, j.group.code) for j in live] == [
        ("ada", "reassign", "53-3032")
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"group_code": "99-9999"}, "group_code: no group &#x27;99-9999&#x27; in this taxonomy"),
        ({}, "group_code: choose either a group or none of them"),
        ({"group_code": "35-3023", "none": "1"}, "group_code: choose either a group or none"),
    ],
)
def test_a_bad_settlement_is_a_400_and_changes_nothing(client, admin_user, conflict, data, message):
    client.force_login(admin_user)
    response = client.post(f"/review/conflicts/{conflict.id}/resolve", data, **HTMX)
    assert response.status_code == 400
    assert message in response.content.decode()
    conflict.refresh_from_db()
    assert conflict.conflict is True
    assert Judgement.objects.live().filter(review_item=conflict).count() == 2


def test_settling_an_item_without_a_conflict_is_a_409(client, admin_user, conflict):
    settled = ReviewItem.objects.get(input__text="icu staff nurse")
    client.force_login(admin_user)
    response = client.post(
        f"/review/conflicts/{settled.id}/resolve", {"group_code": "29-1141"}, **HTMX
    )
    assert response.status_code == 409
    assert "no conflict to settle" in response.content.decode()


def test_settling_an_unknown_item_is_a_404(client, admin_user, conflict):
    client.force_login(admin_user)
    assert client.post("/review/conflicts/999999/resolve", {"none": "1"}).status_code == 404


def test_an_unknown_taxonomy_filter_is_a_400_naming_it(client, admin_user, conflict):
    client.force_login(admin_user)
    response = client.get("/review/conflicts/?taxonomy=nope")
    assert response.status_code == 400
    assert "taxonomy: no taxonomy &#x27;nope&#x27;" in response.content.decode()


def test_the_conflicts_page_costs_a_few_queries(
    client, admin_user, conflict, django_assert_max_num_queries
):
    client.force_login(admin_user)
    with django_assert_max_num_queries(10):
        response = client.get("/review/conflicts/?taxonomy=jobs")
    assert response.status_code == 200


def test_the_curators_page_gives_each_curators_pace_agreement_and_reversals(
    client, admin_user, curator, other_curator, tiny_taxonomy
):
    from annotations.services.review.undo import judgement_undo

    items = inputs_submit(
        taxonomy=tiny_taxonomy, texts=["icu nurse", "Java Barista", "Tax Clerk"], source="api"
    )
    for item in items:
        judgement_create(review_item=item, user=curator, verdict="confirm")
    judgement_undo(judgement=Judgement.objects.filter(user=curator).last(), user=admin_user)
    client.force_login(admin_user)
    page = client.get("/review/curators/").content.decode()
    rows = re.findall(r'data-testid="curator-row">(.*?)</tr>', page, re.S)
    cells = [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in rows]
    # Two verdicts stand; one of three was taken back: a third reversed.
    assert cells == [["carla", "2", "2", "2", "2.0", "0", "—", "33%", "0"]]
    client.force_login(curator)
    assert client.get("/review/curators/").status_code == 403
    client.force_login(admin_user)
    assert client.get("/review/curators/", {"taxonomy": "nope"}).status_code == 400
