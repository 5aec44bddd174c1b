"""Flags on review items: a curator flags a card (page or API), the admins list and resolve them;
a flag is not a verdict and never changes the queue."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections, transaction
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.models import AuditEvent, Judgement, ReviewFlag, ReviewItem
from annotations.services.flags import FlagError, review_flag_create, review_flag_resolve
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.leases import review_item_claim

API = "/api/v1"
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def item(tiny_taxonomy):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["drone pilot"], source="api")
    return item


def token_client(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def test_a_flag_is_stored_with_its_audit_event_and_leaves_the_item_alone(curator, item):
    held = review_item_claim(user=curator)
    flag = review_flag_create(
        review_item=held, user=curator, kind="taxonomy_gap", comment="  no drone group  "
    )
    assert (flag.kind, flag.comment, flag.resolved_at) == ("taxonomy_gap", "no drone group", None)
    item.refresh_from_db()
    assert (item.status, item.leased_by) == (ReviewItem.Status.PENDING, curator)
    assert not Judgement.objects.exists()
    event = AuditEvent.objects.get(action="review_flag.create")
    assert event.after == {
        "review_item": item.id,
        "kind": "taxonomy_gap",
        "comment": "no drone group",
    }


@pytest.mark.parametrize(
    ("kind", "comment", "field", "message"),
    [
        ("bogus", "", "kind", "unknown kind 'bogus'"),
        ("comment", "   ", "comment", "write the comment"),
        ("unsure", "x" * 1001, "comment", "longer than 1,000 characters"),
        ("unsure", "bad\x00byte", "comment", "control characters"),
        ("unsure", "see \u202egnp.exe", "comment", "bidirectional controls"),
        ("unsure", "a\u2067b\u2069", "comment", "bidirectional controls"),
    ],
)
def test_a_bad_flag_is_refused_naming_the_field(curator, item, kind, comment, field, message):
    with pytest.raises(FlagError, match=message) as refused:
        review_flag_create(review_item=item, user=curator, kind=kind, comment=comment)
    assert refused.value.field == field
    assert not ReviewFlag.objects.exists()


def test_the_same_flag_sent_again_while_open_is_the_one_stored(
    curator, other_curator, admin_user, item
):
    first = review_flag_create(review_item=item, user=curator, kind="unsure", comment="dup test")
    again = review_flag_create(review_item=item, user=curator, kind="unsure", comment=" dup test ")
    assert (again.id, first.replayed, again.replayed) == (first.id, False, True)
    assert ReviewFlag.objects.count() == 1
    assert AuditEvent.objects.filter(action="review_flag.create").count() == 1
    # Another comment, kind or curator is another flag; so is the same one once resolved.
    review_flag_create(review_item=item, user=curator, kind="unsure", comment="other")
    review_flag_create(review_item=item, user=curator, kind="taxonomy_gap", comment="dup test")
    review_flag_create(review_item=item, user=other_curator, kind="unsure", comment="dup test")
    review_flag_resolve(flag=first, user=admin_user)
    after = review_flag_create(review_item=item, user=curator, kind="unsure", comment="dup test")
    assert not after.replayed
    assert ReviewFlag.objects.count() == 5
    open_again = ReviewFlag.objects.filter(resolved_at=None, comment="dup test", kind="unsure")
    assert open_again.count() == 2


@pytest.mark.django_db(transaction=True)
def test_two_identical_flags_sent_together_store_one(curator, item):
    """Both requests wait on a lock the test holds on the item, then go one after the other:
    the second finds the first's flag."""
    if connection.vendor != "postgresql":
        pytest.fail("this test needs PostgreSQL: set DATABASE_URL (make services)")
    answers, errors = [], []

    def send() -> None:
        try:
            flag = review_flag_create(review_item=item, user=curator, kind="unsure", comment="x")
            answers.append(flag.replayed)
        except Exception as exc:  # reported by the main thread, which owns the assertions
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send) for _ in range(2)]
    with transaction.atomic():
        list(ReviewItem.objects.select_for_update().filter(id=item.id).values_list("id"))
        for thread in threads:
            thread.start()
        # Until both wait on the item (or, were they not to lock it, both are done); the
        # deadline only keeps a test that went wrong from hanging.
        deadline = time.monotonic() + 30
        while any(t.is_alive() for t in threads) and waiting_on_locks() < 2:
            assert time.monotonic() < deadline, "the two requests never both waited"
            time.sleep(0.01)
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(answers) == [False, True]
    assert ReviewFlag.objects.count() == 1


def waiting_on_locks() -> int:
    with connection.cursor() as cursor:
        # Inside a transaction the activity view is read once and kept unless cleared.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def test_only_an_admin_resolves_a_flag_and_only_once(curator, admin_user, item):
    flag = review_flag_create(review_item=item, user=curator, kind="unsure")
    with pytest.raises(FlagError, match="only an admin"):
        review_flag_resolve(flag=flag, user=curator)
    review_flag_resolve(flag=flag, user=admin_user)
    flag.refresh_from_db()
    assert flag.resolved_by == admin_user and flag.resolved_at is not None
    with pytest.raises(FlagError, match="already resolved"):
        review_flag_resolve(flag=flag, user=admin_user)


def test_the_card_flag_form_keeps_the_same_card_and_says_so(client, curator, item):
    client.force_login(curator)
    client.get("/review/")
    response = client.post(
        f"/review/items/{item.id}/flag", {"kind": "unsure", "comment": ""}, **HTMX
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "Flagged for the admins: unsure." in page
    assert f'data-item-id="{item.id}"' in page
    assert ReviewFlag.objects.get().kind == "unsure"


def test_the_card_flag_form_sent_twice_stores_one_flag(client, curator, item):
    client.force_login(curator)
    client.get("/review/")
    data = {"kind": "unsure", "comment": "dup test"}
    first = client.post(f"/review/items/{item.id}/flag", data, **HTMX)
    again = client.post(f"/review/items/{item.id}/flag", data, **HTMX)
    assert (first.status_code, again.status_code) == (200, 200)
    assert "Flagged for the admins: unsure." in first.content.decode()
    assert "Already flagged for the admins: unsure." in again.content.decode()
    assert f'data-item-id="{item.id}"' in again.content.decode()
    assert ReviewFlag.objects.count() == 1


def test_a_bare_comment_without_words_is_refused_on_the_card(client, curator, item):
    client.force_login(curator)
    client.get("/review/")
    response = client.post(f"/review/items/{item.id}/flag", {"kind": "comment"}, **HTMX)
    assert response.status_code == 400
    assert "Not flagged: comment: write the comment" in response.content.decode()
    assert f'data-item-id="{item.id}"' in response.content.decode()
    assert not ReviewFlag.objects.exists()


def test_the_flags_page_is_for_admins_and_lists_open_flags_with_links(curator, admin_user, item):
    review_flag_create(review_item=item, user=curator, kind="comment", comment="<i>odd</i>")
    resolved = review_flag_create(review_item=item, user=curator, kind="unsure")
    review_flag_resolve(flag=resolved, user=admin_user)
    carla, ada = Client(), Client()
    carla.force_login(curator)
    ada.force_login(admin_user)
    assert carla.get("/review/flags/").status_code == 403

    page = ada.get("/review/flags/").content.decode()
    assert page.count('data-testid="flag"') == 1
    assert "&lt;i&gt;odd&lt;/i&gt;" in page and "<i>odd</i>" not in page
    assert "/inputs/?taxonomy=jobs&amp;q=drone%20pilot" in page
    assert f"/api/v1/review-items/{item.id}" in page
    assert ada.get("/review/flags/?status=all").content.decode().count('data-testid="flag"') == 2
    assert ada.get("/review/flags/?kind=nope").status_code == 400


def test_a_curator_cannot_resolve_a_flag_from_the_page(curator, item):
    flag = review_flag_create(review_item=item, user=curator, kind="unsure")
    carla = Client()
    carla.force_login(curator)
    assert carla.post(f"/review/flags/{flag.id}/resolve").status_code == 403
    flag.refresh_from_db()
    assert flag.resolved_at is None


def test_the_api_flags_an_item_and_admins_list_and_resolve_flags(curator, admin_user, item):
    carla, ada = token_client(curator), token_client(admin_user)
    response = carla.post(
        f"{API}/review-items/{item.id}/flags",
        {"kind": "taxonomy_gap", "comment": "drones"},
        format="json",
    )
    assert response.status_code == 201, response.content
    flag = response.json()
    assert (flag["review_item"], flag["kind"], flag["comment"], flag["user"]) == (
        item.id,
        "taxonomy_gap",
        "drones",
        "carla",
    )
    assert carla.get(f"{API}/review-flags").status_code == 403

    listed = ada.get(f"{API}/review-flags").json()["results"]
    assert [f["id"] for f in listed] == [flag["id"]]
    assert carla.post(f"{API}/review-flags/{flag['id']}/resolve").status_code == 403
    resolved = ada.post(f"{API}/review-flags/{flag['id']}/resolve")
    assert resolved.status_code == 200
    assert resolved.json()["resolved_by"] == "ada"
    again = ada.post(f"{API}/review-flags/{flag['id']}/resolve")
    assert again.status_code == 409 and "already resolved" in again.json()["flag"][0]
    assert ada.get(f"{API}/review-flags").json()["results"] == []
    assert len(ada.get(f"{API}/review-flags?status=resolved").json()["results"]) == 1


def test_the_api_answers_the_same_open_flag_sent_again_with_200_and_stores_nothing(curator, item):
    carla = token_client(curator)
    url, body = f"{API}/review-items/{item.id}/flags", {"kind": "unsure", "comment": "dup test"}
    first = carla.post(url, body, format="json")
    again = carla.post(url, body, format="json")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()
    assert ReviewFlag.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "maybe"}, "kind"),
        ({}, "kind"),
        ({"kind": "comment"}, "comment"),
        ({"kind": "unsure", "comment": "y" * 1001}, "comment"),
        ({"kind": "unsure", "comment": "nul\u0000"}, "comment"),
    ],
)
def test_the_api_refuses_a_bad_flag_naming_the_field(curator, item, body, field):
    response = token_client(curator).post(
        f"{API}/review-items/{item.id}/flags", body, format="json"
    )
    assert response.status_code == 400
    assert field in response.json()
    assert not ReviewFlag.objects.exists()


def test_the_api_answers_404_for_an_unknown_item_or_flag(curator, admin_user, item):
    assert (
        token_client(curator)
        .post(f"{API}/review-items/999999/flags", {"kind": "unsure"}, format="json")
        .status_code
        == 404
    )
    assert token_client(admin_user).post(f"{API}/review-flags/999999/resolve").status_code == 404


def test_the_flags_page_costs_the_same_queries_for_one_flag_or_many(
    curator, admin_user, tiny_taxonomy
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    items = inputs_submit(
        taxonomy=tiny_taxonomy, texts=["a", "drone pilot", "kite maker", "tea taster"], source="api"
    )
    ada = Client()
    ada.force_login(admin_user)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert ada.get("/review/flags/?status=all").status_code == 200
        return len(captured)

    flag = review_flag_create(review_item=items[0], user=curator, kind="unsure")
    review_flag_resolve(flag=flag, user=admin_user)
    one = queries()
    for item in items[1:]:
        flag = review_flag_create(review_item=item, user=curator, kind="taxonomy_gap")
        review_flag_resolve(flag=flag, user=admin_user)
    assert queries() == one
