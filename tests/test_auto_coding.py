"""Auto-coding: an admin sets a target precision and an audit share; answers the evidence
vouches for at that target leave the queue, a random share of them is judged blind, and the
audit pauses the policy when it shows the precision below the target."""

from __future__ import annotations

import csv
import io
import math
import re

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from annotations.models import AuditEvent, AutoCodingPolicy, Group, ReviewItem
from annotations.services.review.inputs import (
    audit_priority,
    inputs_submit,
    review_items_repredict,
)
from annotations.services.review.queue_order import review_items_reorder
from annotations.services.review.verdicts import judgement_create
from annotations.services.taxonomy_edit.groups import group_merge
from models_app.bulk.jobs import bulk_job_create
from models_app.bulk.run import bulk_job_execute
from models_app.bulk.selectors import bulk_job_result
from models_app.models import BulkJob
from models_app.serving.auto_coding_audits import auto_coding_days
from models_app.siamese.vouching import precision_exact_lower_bound, precision_exact_upper_bound
from tests.test_match_probability import RIGHT, WRONG, judge_all

URL = "/api/v1/taxonomies/jobs/auto-coding"
TEXTS = RIGHT + list(WRONG)


@pytest.fixture
def admin_api(admin_user) -> APIClient:
    client = APIClient()
    client.force_authenticate(admin_user)
    return client


def top_probability(item: ReviewItem) -> float:
    return item.prediction.ranked_groups[0]["probability"]


def test_off_by_default_and_every_answer_waits_for_review(tiny_taxonomy, admin_api):
    found = admin_api.get(URL).json()
    assert (found["target_precision"], found["version"], found["active"]) == (None, 0, False)
    assert (found["coding"], found["not_coding_reason"]) == (False, "auto-coding is off")
    items = inputs_submit(taxonomy=tiny_taxonomy, texts=TEXTS, source="api")
    assert {item.status for item in items} == {ReviewItem.Status.PENDING}
    assert not any(item.auto_coded or item.audit for item in items)


def test_answers_reaching_the_threshold_are_coded_and_leave_the_queue(
    tiny_taxonomy, admin_api, api_client
):
    response = admin_api.put(URL, {"target_precision": 0.5, "audit_share": 0}, format="json")
    assert response.status_code == 200, response.content
    policy = response.json()
    assert (policy["version"], policy["active"]) == (1, True)
    threshold = policy["threshold"]
    assert threshold is not None
    assert (policy["coding"], policy["not_coding_reason"], policy["verdicts_needed"]) == (
        True, "", None
    )  # fmt: skip
    event = AuditEvent.objects.get(action="auto_coding.set")
    assert event.after["target_precision"] == 0.5 and event.actor.username == "ada"

    items = inputs_submit(taxonomy=tiny_taxonomy, texts=TEXTS, source="api")
    coded = [item for item in items if top_probability(item) >= threshold]
    waiting = [item for item in items if top_probability(item) < threshold]
    assert coded and waiting  # the tiny taxonomy's answers fall on both sides
    for item in coded:
        assert (item.status, item.auto_coded, item.audit) == ("done", True, False)
        assert item.vouched_group_id == item.top_group_id
        assert (item.vouched_threshold, item.vouched_policy_version) == (threshold, 1)
    assert all(item.status == "pending" and not item.auto_coded for item in waiting)
    # The API says so, with the threshold and version; the queue holds only the rest.
    shown = api_client.get(f"/api/v1/review-items/{coded[0].id}").json()
    assert shown["auto_coded"] is True
    assert shown["auto_coding"] == {"threshold": threshold, "policy_version": 1}
    queue = api_client.get("/api/v1/review-items").json()["results"]
    assert {row["id"] for row in queue} == {item.id for item in waiting}
    assert admin_api.get(URL).json()["coded"] == len(coded)


def test_audits_are_blind_and_a_drop_in_precision_pauses_auto_coding(
    client, tiny_taxonomy, admin_api, api_client, curator, settings
):
    settings.SIAMWEB_DOUBLE_REVIEW_PERCENT = 0
    admin_api.put(URL, {"target_precision": 0.5, "audit_share": 1.0}, format="json")
    items = inputs_submit(taxonomy=tiny_taxonomy, texts=TEXTS, source="api")
    audits = [item for item in items if item.audit]
    others = [item for item in items if not item.audit]
    assert len(audits) >= 5 and others
    # An audit card is a card like any other: nothing in the API or the page says audit, its
    # place in the queue is that of an answer of any probability (not last for being sure),
    # and curators may not read the threshold or the audit's counts.
    audit_card = api_client.get(f"/api/v1/review-items/{audits[0].id}").json()
    assert (audit_card["status"], audit_card["auto_coded"], audit_card["auto_coding"]) == (
        "pending", False, None
    )  # fmt: skip
    assert "audit" not in str(audit_card).replace("audit_", "")
    assert all(0 <= item.priority <= 1 + math.log(item.input.occurrences) for item in audits)
    assert api_client.get(URL).status_code == 403
    client.force_login(curator)
    claimed = client.get("/review/").content.decode()
    assert "audit" not in claimed.lower().replace("auditing", "")

    # Curators find every audited answer wrong: the precision is shown below the target once
    # the exact bound says so, at the fifth (0 of 4 may still be a 52% policy).
    for number, item in enumerate(audits[:5], start=1):
        assert admin_api.get(URL).json()["active"], f"paused after {number - 1} audits"
        other = Group.objects.filter(taxonomy=tiny_taxonomy).exclude(id=item.vouched_group_id)
        judgement_create(review_item=item, user=curator, verdict="reassign", group=other.first())
    policy = admin_api.get(URL).json()
    assert (policy["active"], policy["audited"], policy["audited_right"]) == (False, 5, 0)
    assert (policy["coding"], policy["threshold"]) == (False, None)
    assert policy["not_coding_reason"] == "auto-coding is paused by its audit"
    assert policy["paused_at"] and "0 of 5 audited answers right" in policy["paused_reason"]
    assert policy["audited_interval"][1] < 0.5
    assert AuditEvent.objects.filter(action="auto_coding.pause").count() == 1
    # Paused: nothing more is coded; what was judged before keeps its verdicts.
    later = inputs_submit(taxonomy=tiny_taxonomy, texts=["Senior Java Developer II"], source="api")
    assert not later[0].audit and not later[0].auto_coded
    # An admin setting the policy again resumes it under a new version.
    resumed = admin_api.put(URL, {"target_precision": 0.5}, format="json").json()
    assert (resumed["active"], resumed["version"], resumed["audited"]) == (True, 2, 0)
    assert AutoCodingPolicy.objects.get().audit_share == 0.05


def test_a_policy_on_without_a_threshold_says_it_codes_nothing_and_why(
    client, tiny_taxonomy, admin_api, admin_user, curator
):
    """The taxonomy's own ranker serves on far fewer verdicts than it takes to vouch with, and
    the starter's evidence measured another ranker: on, but nothing is coded, and every place
    that shows the policy says so, with what the vouching endpoint says is missing."""
    judge_all(tiny_taxonomy, curator)
    policy = admin_api.put(URL, {"target_precision": 0.9}, format="json").json()
    vouching = admin_api.get(f"{URL.removesuffix('auto-coding')}vouching", {"target": 0.9}).json()
    assert vouching["evidence"]["source"] == "none" and vouching["threshold"] is None
    needed = vouching["verdicts_needed"]
    assert needed > 0
    assert (policy["active"], policy["coding"], policy["threshold"]) == (True, False, None)
    assert policy["verdicts_needed"] == needed
    reason = policy["not_coding_reason"]
    assert vouching["evidence"]["description"] in reason
    assert reason.endswith(f"about {needed} verdicts more could show one")
    later = inputs_submit(taxonomy=tiny_taxonomy, texts=["Senior Java Developer II"], source="api")
    assert not later[0].auto_coded and later[0].status == ReviewItem.Status.PENDING

    client.force_login(admin_user)
    page = client.get("/taxonomies/jobs/").content.decode()
    state = re.search(r'data-testid="auto-coding-state">(.*?)</p>', page, re.S).group(1)
    assert state.startswith("On (version 1), but coding nothing for now: ")
    assert f"about {needed} verdicts more could show one" in state and "too few" in state
    assert "Every answer waits for review until the evidence shows a threshold" in state
    assert 'data-testid="auto-coding-jump">auto-coding on, coding nothing for now</a>' in page
    saved = client.post("/taxonomies/jobs/auto-coding", {"target_precision": "90"}, follow=True)
    notice = re.search(r'data-testid="notice"[^>]*>(.*?)</p>', saved.content.decode()).group(1)
    assert notice.startswith("Auto-coding set (version 2), but it codes nothing for now: ")
    assert f"about {needed} verdicts more could show one" in notice


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"target_precision": 0.3}, "target_precision"),
        ({"target_precision": 1.0}, "target_precision"),
        ({"target_precision": "high"}, "target_precision"),
        ({}, "target_precision"),
        ({"target_precision": 0.95, "audit_share": 1.5}, "audit_share"),
        ({"target_precision": 0.95, "audit_share": -0.1}, "audit_share"),
        # A boolean is not a number, though Python reads true as 1 and false as 0.
        ({"target_precision": True}, "target_precision"),
        ({"target_precision": 0.95, "audit_share": True}, "audit_share"),
        ({"target_precision": 0.95, "audit_share": False}, "audit_share"),
    ],
)
def test_bad_settings_are_refused_naming_the_field_and_change_nothing(
    tiny_taxonomy, admin_api, body, field
):
    response = admin_api.put(URL, body, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert not AutoCodingPolicy.objects.exists()


def test_only_admins_set_it(tiny_taxonomy, api_client):
    response = api_client.put(URL, {"target_precision": 0.95}, format="json")
    assert response.status_code == 403
    assert not AutoCodingPolicy.objects.exists()


def test_pages_mark_coded_answers_and_a_curator_can_correct_one(
    client, tiny_taxonomy, admin_api, curator
):
    admin_api.put(URL, {"target_precision": 0.5, "audit_share": 0}, format="json")
    items = inputs_submit(taxonomy=tiny_taxonomy, texts=TEXTS, source="api")
    coded = next(item for item in items if item.auto_coded)
    client.force_login(curator)
    page = client.get(f"/inputs/{coded.input_id}/").content.decode()
    assert "(coded by the product: probability" in page and "auto-coding version 1" in page
    done = client.get("/review/queue/", {"status": "done"}).content.decode()
    assert done.count('data-testid="auto-coded-badge"') == sum(item.auto_coded for item in items)

    # A curator checks it: the card comes back held for them, and their verdict replaces it.
    response = client.post(f"/inputs/{coded.input_id}/correct")
    assert response.status_code == 302 and response["Location"] == "/review/"
    coded.refresh_from_db()
    assert (coded.status, coded.auto_coded, coded.leased_by) == ("pending", False, curator)
    assert AuditEvent.objects.filter(action="auto_coding.reopen").count() == 1
    card = client.get("/review/").content.decode()
    assert f'data-item-id="{coded.id}"' in card
    other = Group.objects.filter(taxonomy=tiny_taxonomy).exclude(id=coded.vouched_group_id)
    judgement_create(review_item=coded, user=curator, verdict="reassign", group=other.first())
    coded.refresh_from_db()
    assert coded.status == "done" and coded.top_group_id == other.first().id
    # Only a coded answer not yet judged reopens this way: nothing changes the second time.
    again = client.post(f"/inputs/{coded.input_id}/correct")
    assert again.status_code == 409
    assert "only an answer the product coded by itself" in again.content.decode()


def upload(taxonomy, data: str, user) -> BulkJob:
    return bulk_job_create(taxonomy=taxonomy, upload=io.BytesIO(data.encode()),
                           filename="titles.txt", column="", user=user, enqueue=False)  # fmt: skip


def test_a_bulk_job_codes_rows_with_the_policy_it_started_with(tiny_taxonomy, admin_api, curator):
    admin_api.put(URL, {"target_precision": 0.5, "audit_share": 0}, format="json")
    threshold = admin_api.get(URL).json()["threshold"]
    data = "title\n" + "\n".join(TEXTS) + "\n"
    job = upload(tiny_taxonomy, data, curator)
    # Auto-coding is turned off after the job's first chunk: the job keeps the policy it
    # started with.
    turned_off = []

    def turn_off(_job) -> None:
        if not turned_off:
            turned_off.append(admin_api.put(URL, {"target_precision": None}, format="json"))

    done = bulk_job_execute(job_id=job.id, chunk_rows=5, after_chunk=turn_off)
    assert turned_off[0].json()["active"] is False
    assert done.status == BulkJob.Status.SUCCEEDED, done.error
    assert (done.auto_coding_threshold, done.auto_coding_version) == (threshold, 1)
    with bulk_job_result(done, "csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    coded = [row for row in rows if row["auto_coded"] == "True"]
    assert coded and len(coded) < len(rows)
    assert all(float(row["probability"]) >= threshold for row in coded)
    assert all(float(row["probability"]) < threshold for row in rows if row not in coded)
    assert done.rows_auto_coded == len(coded)
    shown = admin_api.get(f"/api/v1/bulk-jobs/{done.id}").json()
    assert shown["rows_auto_coded"] == len(coded)
    assert shown["auto_coding"] == {"threshold": threshold, "policy_version": 1}
    # A job started with auto-coding off codes nothing.
    again = upload(tiny_taxonomy, data, curator)
    off = bulk_job_execute(job_id=again.id)
    assert (off.rows_auto_coded, off.auto_coding_threshold) == (0, None)


def paused_by_its_audit(taxonomy) -> None:
    """The policy paused as ``auto_coding_audit_check`` pauses it."""
    policy = AutoCodingPolicy.objects.get(taxonomy=taxonomy)
    policy.paused_at, policy.paused_version = timezone.now(), policy.version
    policy.save(update_fields=["paused_at", "paused_version"])


def test_a_pause_stays_for_a_running_job_when_an_admin_sets_the_policy_again(
    tiny_taxonomy, admin_api, curator
):
    """Paused by its audit under the version a job started with, then set again by an admin:
    the job does not go back to coding at the threshold its audit showed wrong."""
    admin_api.put(URL, {"target_precision": 0.5, "audit_share": 0}, format="json")
    job = upload(tiny_taxonomy, "title\n" + "\n".join(TEXTS * 2) + "\n", curator)
    changed = []

    def pause_then_set_again(_job) -> None:
        if not changed:
            paused_by_its_audit(tiny_taxonomy)
            changed.append(admin_api.put(URL, {"target_precision": 0.5}, format="json").json())

    done = bulk_job_execute(job_id=job.id, chunk_rows=5, after_chunk=pause_then_set_again)
    assert (changed[0]["version"], changed[0]["active"]) == (2, True)
    assert done.status == BulkJob.Status.SUCCEEDED and done.auto_coding_version == 1
    with bulk_job_result(done, "csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    coded = [at for at, row in enumerate(rows) if row["auto_coded"] == "True"]
    assert coded and max(coded) < 5  # the first chunk only
    # A job started under the new version codes again.
    again = bulk_job_execute(job_id=upload(tiny_taxonomy, "title\n" + TEXTS[0], curator).id)
    assert again.auto_coding_version == 2


def test_a_bulk_jobs_coded_rows_are_audited_blind_and_a_pause_stops_its_coding(
    tiny_taxonomy, admin_api, curator
):
    """Every coded row drawn (a share of 1): each is queued as an audit under the job's policy,
    not as the job's own row to review, while the file delivers its answer as coded. The audit
    pausing the policy mid-job stops the job's coding from its next chunk on."""
    admin_api.put(URL, {"target_precision": 0.5, "audit_share": 1.0}, format="json")
    data = "title\n" + "\n".join(TEXTS) + "\n"
    job = upload(tiny_taxonomy, data, curator)
    paused = []

    def pause(_job) -> None:
        if not paused:
            paused_by_its_audit(tiny_taxonomy)
            paused.append(ReviewItem.objects.filter(audit=True).count())

    done = bulk_job_execute(job_id=job.id, chunk_rows=5, after_chunk=pause)
    assert done.status == BulkJob.Status.SUCCEEDED, done.error
    assert done.auto_coding_audit_share == 1.0
    with bulk_job_result(done, "csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    coded = [row for row in rows if row["auto_coded"] == "True"]
    # Coded in the first chunk only: the pause after it stops the rest.
    assert coded and all(rows.index(row) < 5 for row in coded)
    assert done.rows_auto_coded == len(coded)
    audits = ReviewItem.objects.filter(taxonomy=tiny_taxonomy, audit=True)
    assert paused == [len(coded)] and audits.count() == len(coded)
    assert sorted(audits.values_list("input__text", flat=True)) == sorted(
        row["text"] for row in coded
    )
    for item in audits:
        assert (item.status, item.auto_coded, item.bulk_job_id) == ("pending", False, None)
        assert (item.vouched_policy_version, item.vouched_threshold) == (
            1, done.auto_coding_threshold
        )  # fmt: skip
        assert item.vouched_group_id == item.top_group_id


def test_the_taxonomy_page_counts_each_day(client, tiny_taxonomy, admin_api, admin_user, curator):
    admin_api.put(URL, {"target_precision": 0.5, "audit_share": 1.0}, format="json")
    items = inputs_submit(taxonomy=tiny_taxonomy, texts=TEXTS, source="api")
    audits = [item for item in items if item.audit]
    judgement_create(review_item=audits[0], user=curator, verdict="confirm")
    other = Group.objects.filter(taxonomy=tiny_taxonomy).exclude(id=audits[1].vouched_group_id)
    judgement_create(review_item=audits[1], user=curator, verdict="reassign", group=other.first())
    plain = next(item for item in items if not item.audit)
    judgement_create(review_item=plain, user=curator, verdict="confirm")
    days = auto_coding_days(tiny_taxonomy)
    assert len(days) == 14 and days[0].day == timezone.localdate()
    today = days[0]
    assert (today.received, today.coded, today.reviewed) == (len(TEXTS), 0, 3)
    assert (today.audited, today.audited_right, today.audited_precision) == (2, 1, 0.5)
    assert all(day.received == day.reviewed == 0 for day in days[1:])
    client.force_login(admin_user)
    page = client.get("/taxonomies/jobs/").content.decode()
    row = re.search(r'data-testid="auto-coding-day">(.*?)</tr>', page, re.S).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
    assert cells[1:] == [str(len(TEXTS)), "0", "3", "2", "1 (0.50)"]
    # Over time on the Models page: this week's audits, with their bounds.
    page = client.get("/models/?taxonomy=jobs").content.decode()
    weeks = re.findall(r'data-testid="audit-week">(.*?)</tr>', page, re.S)
    assert len(weeks) == 8
    cells = re.findall(r"<td[^>]*>(.*?)</td>", weeks[0])
    low, high = precision_exact_lower_bound(1, 2), precision_exact_upper_bound(1, 2)
    assert cells[1:] == [str(len(TEXTS)), "0", "2", "0.500", f"{low:.3f} \u2013 {high:.3f}"]
    assert all(re.findall(r"<td[^>]*>(.*?)</td>", week)[3] == "0" for week in weeks[1:])


def test_the_models_page_shows_no_audits_without_a_policy(client, tiny_taxonomy, curator):
    client.force_login(curator)
    assert 'data-testid="audit-weeks"' not in client.get("/models/").content.decode()


def test_an_audit_counts_once_settled_and_follows_a_merged_group(
    tiny_taxonomy, admin_api, admin_user, curator, other_curator, settings
):
    settings.SIAMWEB_DOUBLE_REVIEW_PERCENT = 100  # every input judged by two curators
    admin_api.put(URL, {"target_precision": 0.5, "audit_share": 1.0}, format="json")
    items = inputs_submit(taxonomy=tiny_taxonomy, texts=TEXTS, source="api")
    audit = next(item for item in items if item.audit)
    judgement_create(review_item=audit, user=curator, verdict="confirm")
    assert admin_api.get(URL).json()["audited"] == 0  # waits for the second curator
    audit.refresh_from_db()
    judgement_create(review_item=audit, user=other_curator, verdict="confirm")
    found = admin_api.get(URL).json()
    assert (found["audited"], found["audited_right"]) == (1, 1)
    # The group it was vouched for merged into another: the audit still counts it right.
    source = Group.objects.get(id=audit.vouched_group_id)
    target = Group.objects.filter(taxonomy=tiny_taxonomy).exclude(id=source.id).first()
    group_merge(source=source, target=target, user=admin_user)
    audit.refresh_from_db()
    assert audit.vouched_group_id == target.id == audit.top_group_id
    assert admin_api.get(URL).json()["audited_right"] == 1


def test_rows_a_bulk_job_sends_for_review_wait_for_a_person(tiny_taxonomy, admin_api, curator):
    """Auto-coding turned on while a job runs: the rows it sends for review (all but exact
    matches, here) are queued for a person, not coded by a policy the job did not start with."""
    data = "title\n" + "\n".join(TEXTS) + "\n"
    job = bulk_job_create(
        taxonomy=tiny_taxonomy, upload=io.BytesIO(data.encode()), filename="t.txt",
        review_below=1.0, user=curator, enqueue=False,
    )  # fmt: skip
    turned_on = []

    def turn_on(_job) -> None:
        if not turned_on:
            turned_on.append(admin_api.put(URL, {"target_precision": 0.5, "audit_share": 0},
                                           format="json"))  # fmt: skip

    done = bulk_job_execute(job_id=job.id, chunk_rows=5, after_chunk=turn_on)
    assert turned_on[0].json()["active"] and done.auto_coding_threshold is None
    queued = ReviewItem.objects.filter(taxonomy=tiny_taxonomy)
    assert queued.count() == done.rows_queued > len(TEXTS) // 2
    assert not queued.filter(auto_coded=True).exists() and not queued.filter(audit=True).exists()


def test_an_audit_keeps_a_place_drawn_at_random_when_the_queue_is_ordered_again(
    tiny_taxonomy, admin_api, monkeypatch
):
    """Its answer is sure: ordered by it, an audit would sink to the bottom of the queue,
    unjudged and told apart by its place."""
    admin_api.put(URL, {"target_precision": 0.5, "audit_share": 1.0}, format="json")
    items = inputs_submit(taxonomy=tiny_taxonomy, texts=TEXTS, source="api")
    audits = [item for item in items if item.audit]
    assert audits
    # The draw made certain: the place of an answer of probability 0.5.
    monkeypatch.setattr("annotations.services.review.inputs._audit_place.random", lambda: 0.5)

    def drawn(item) -> float:
        return audit_priority(item.input.occurrences)

    def priorities() -> dict[int, float]:
        return dict(ReviewItem.objects.filter(audit=True).values_list("id", "priority"))

    review_items_reorder(taxonomy=tiny_taxonomy)
    assert priorities() == {item.id: pytest.approx(drawn(item)) for item in audits}
    ReviewItem.objects.filter(audit=True).update(priority=0.0)
    review_items_repredict(taxonomy=tiny_taxonomy)  # a new model goes live: predicted again
    assert priorities() == {item.id: pytest.approx(drawn(item)) for item in audits}
