"""A verdict shows everywhere at once: the input's page and the Done list answer with the
curators' verdict from the moment it is stored ("none of these" included); undo takes back the
whole correction a curator made (a false match and the group then given); skips are listed
apart from the verdicts."""

from __future__ import annotations

import re

from annotations.models import FeedbackPair, Group, Judgement, ReviewItem
from annotations.services.review.verdicts import judgement_create
from tests.review_pages.conftest import HTMX


def group(item, code: str) -> Group:
    return Group.objects.get(taxonomy=item.taxonomy, code=code)


def answer_on_the_inputs_page(client, item) -> str:
    page = client.get(f"/inputs/{item.input_id}/").content.decode()
    answer = re.search(r'data-testid="item-top">(.*?)</dd>', page, re.S).group(1)
    return " ".join(re.sub(r"<[^>]+>", " ", answer).split())


def done_rows(client) -> dict[str, str]:
    page = client.get("/review/queue/", {"status": "done"}).content.decode()
    rows = re.findall(r'data-testid="queue-row".*?</tr>', page, re.S)
    found = {}
    for row in rows:
        cells = [
            " ".join(re.sub(r"<[^>]+>", " ", c).split())
            for c in re.findall(r"<td.*?</td>", row, re.S)
        ]
        found[cells[0]] = cells[1]
    return found


def test_a_reassignment_is_the_answer_on_the_inputs_page_and_in_the_done_list(
    client, curator, items
):
    barista = items[0]  # "Java Barista"
    # Put in a group the model ranked neither first nor second: the old answer, the prediction's
    # best not rejected, is the second.
    ranked = [g["group_id"] for g in barista.prediction.ranked_groups[:2]]
    chosen = Group.objects.filter(taxonomy=barista.taxonomy).exclude(id__in=ranked).first()
    judgement_create(review_item=barista, user=curator, verdict="reassign", group=chosen)
    client.force_login(curator)

    assert answer_on_the_inputs_page(client, barista) == (
        f"{chosen.code} {chosen.name} (the curators' verdict)"
    )
    assert done_rows(client)["Java Barista"] == f"{chosen.code} {chosen.name}"
    barista.refresh_from_db()
    assert barista.top_group_id == chosen.id


def test_none_of_these_is_the_answer_on_the_inputs_page_and_in_the_done_list(
    client, curator, items
):
    barista = items[0]
    judgement_create(review_item=barista, user=curator, verdict="none")
    client.force_login(curator)
    assert (
        answer_on_the_inputs_page(client, barista) == "none of the groups (the curators' verdict)"
    )
    assert done_rows(client)["Java Barista"] == "none of the groups"


def test_a_false_match_and_the_group_then_given_are_undone_together(client, curator, items):
    item = items[0]
    predicted = item.top_group
    client.force_login(curator)
    client.get("/review/")
    client.post(f"/review/items/{item.id}/judge", {"verdict": "false_match"}, **HTMX)
    client.get("/review/")  # the card comes back, waiting for its group
    developers = group(item, "15-1252")
    client.post(
        f"/review/items/{item.id}/judge",
        {"verdict": "reassign", "group_code": developers.code},
        **HTMX,
    )
    reassign = Judgement.objects.get(verdict="reassign")
    page = client.get("/review/").content.decode()
    # One line for the correction, with one Undo, carrying the key.
    lines = re.findall(r'data-testid="recent-verdict" data-judgement-id="(\d+)"', page)
    assert lines == [str(reassign.id)]
    assert f"not {predicted.name}, then Reassign → Software Developers" in page

    response = client.post(f"/review/judgements/{reassign.id}/undo", **HTMX)

    assert response.status_code == 200
    assert not Judgement.objects.live().exists()
    assert not FeedbackPair.objects.exists()
    item.refresh_from_db()
    assert (item.status, item.top_group_id) == (ReviewItem.Status.PENDING, predicted.id)
    assert 'data-testid="recent-verdict"' not in response.content.decode()


def test_skips_are_listed_apart_and_leave_the_last_ten_verdicts_whole(client, curator, many_items):
    for item in many_items[:10]:
        judgement_create(review_item=item, user=curator, verdict="confirm")
    skips = [
        judgement_create(review_item=item, user=curator, verdict="skip")
        for item in many_items[10:13]
    ]
    client.force_login(curator)
    page = client.get("/review/").content.decode()

    verdicts = re.findall(r'data-testid="recent-verdict" data-judgement-id="(\d+)"', page)
    assert len(verdicts) == 10
    assert all(Judgement.objects.get(id=v).verdict == "confirm" for v in verdicts)
    listed_skips = re.findall(r'data-testid="recent-skip" data-judgement-id="(\d+)"', page)
    assert listed_skips == [str(s.id) for s in reversed(skips)]
    # The key undoes what came last: the latest skip.
    assert page.count('data-shortcut="u"') == 1
    latest = re.search(
        r'data-judgement-id="(\d+)"(?:(?!data-judgement-id).)*?data-shortcut="u"', page, re.S
    )
    assert latest.group(1) == str(skips[-1].id)
