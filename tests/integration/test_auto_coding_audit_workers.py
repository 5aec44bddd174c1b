"""The audit on real workers (issue #53): a bulk job's chunks are coded on a Celery worker under
the policy the job started with, and a share of its coded rows is queued for a blind audit. With
the live ranker swapped for a worse one that still claims to be sure, curators' verdicts on
those audits pause auto-coding within the first 200 audited answers, admins are told, and a job
started after the pause codes nothing."""

from __future__ import annotations

import dataclasses
import io
import uuid

import pytest
from rest_framework.test import APIClient

from annotations.models import AuditEvent, AutoCodingPolicy, Group, ReviewItem
from models_app.bulk.jobs import bulk_job_create
from models_app.bulk.run import bulk_job_execute
from models_app.models import BulkJob, Deployment, RankerVersion
from models_app.serving.engines import artifact_path
from models_app.siamese.artifacts import atomic_directory
from models_app.siamese.ranker.features import FEATURE_SET
from models_app.siamese.ranker.files import cold_start_ranker, save_ranker
from models_app.siamese.ranker.verdict_history import VerdictHistory
from tests.integration.conftest import wait_for

pytestmark = pytest.mark.integration

URL = "/api/v1/taxonomies/jobs/auto-coding"
# The tiny taxonomy's groups, and the word in a title that says which is right.
TRUTH = {"Developer": "15-1252", "Nurse": "29-1141", "Barista": "35-3023",
         "Truck Driver": "53-3032", "Accountant": "13-2011"}  # fmt: skip
TITLES = ["Java Developer", "Night ICU Nurse", "Head Barista", "Long Haul Truck Driver",
          "Tax Accountant", "Python Developer", "Charge Nurse", "Espresso Barista",
          "CDL Truck Driver", "Staff Accountant"]  # fmt: skip
ROWS = 2_000  # at a 5% audit share, about 100 audits: far more than a pause needs
AUDIT_SHARE = 0.05
TARGET = 0.9
MOST_AUDITS = 200


def right_code(text: str) -> str:
    return next(code for word, code in TRUTH.items() if word in text)


def worse_ranker_live(taxonomy) -> RankerVersion:
    """The starter's linear weights turned around and its residual network dropped (the
    candidate with the least evidence ranks first), as sure as a ranker may say (a cold
    temperature), with out-of-fold evidence that claims every sure answer right: what a ranker
    fitted on bad verdicts could look like to the policy."""
    starter = cold_start_ranker()
    worse = dataclasses.replace(
        starter,
        weights=-starter.weights,
        residual=None,
        temperature=0.01,
        temperature_slope=0.0,
        miss_logit=-50.0,
        miss_slope=0.0,
        metrics={"evidence": {"probabilities": [0.999] * 300, "right": [True] * 300}},
    )
    relative = f"{taxonomy.slug}/rankers/{uuid.uuid4().hex}"
    with atomic_directory(artifact_path(relative)) as folder:
        save_ranker(folder, worse, VerdictHistory(group_count=len(TRUTH)))
    deployment = Deployment.objects.select_related("index_build").get(taxonomy=taxonomy)
    version = RankerVersion.objects.create(
        taxonomy=taxonomy,
        model_version_id=deployment.index_build.model_version_id,
        number=1,
        status=RankerVersion.Status.LIVE,
        artifact_path=relative,
        feature_set=FEATURE_SET,
        metrics=worse.metrics,
    )
    Deployment.objects.filter(id=deployment.id).update(ranker=version)
    return version


def ads() -> bytes:
    lines = ["title"] + [f"{TITLES[i % len(TITLES)]} {i}" for i in range(ROWS)]
    return ("\n".join(lines) + "\n").encode()


def test_audits_of_a_bulk_jobs_coded_rows_pause_auto_coding_when_its_ranker_turns_worse(
    start_worker, tiny_taxonomy, admin_user, curator, api_client
):
    worse_ranker_live(tiny_taxonomy)
    admin = APIClient()
    admin.force_authenticate(admin_user)
    policy = admin.put(URL, {"target_precision": TARGET, "audit_share": AUDIT_SHARE},
                       format="json").json()  # fmt: skip
    assert policy["active"] and policy["threshold"] is not None, policy
    worker = start_worker(SIAMWEB_BULK_CHUNK_ROWS=100)
    job = bulk_job_create(
        taxonomy=tiny_taxonomy,
        upload=io.BytesIO(ads()),
        filename="ads.csv",
        column="title",
        user=curator,
    )  # sent to the worker on commit

    def finished():
        job.refresh_from_db()
        return job.status not in BulkJob.ACTIVE_STATUSES

    wait_for(finished, "the bulk job to finish", worker.log)
    assert job.status == BulkJob.Status.SUCCEEDED, job.error
    assert (job.auto_coding_version, job.auto_coding_audit_share) == (1, AUDIT_SHARE)
    # How many rows it calls sure depends on the starter's weights it reverses (half of them
    # with today's); the audits need only a few dozen of them.
    assert job.rows_auto_coded >= ROWS // 4, "the worse ranker should still call many rows sure"
    # The audits: queued by the worker as any card (not the job's own rows to review), each
    # vouched for the group the job coded it with.
    audits = list(ReviewItem.objects.filter(taxonomy=tiny_taxonomy, audit=True).order_by("id"))
    assert 10 <= len(audits) <= job.rows_auto_coded * 0.2
    assert all(item.status == "pending" and not item.auto_coded for item in audits)
    assert all(item.bulk_job_id is None and item.vouched_policy_version == 1 for item in audits)

    # Curators judge the cards as they come, audits among them, by what is right.
    groups = {group.code: group for group in Group.objects.filter(taxonomy=tiny_taxonomy)}
    # An audit drawn among the texts double review samples waits for a second curator: judged,
    # not settled, and only settled audits count (``audited_answers``).
    judged = right_answers = settled = settled_right = 0
    for item in audits:
        right = groups[right_code(item.input.text)]
        vouched_right = item.vouched_group_id == right.id
        if vouched_right:
            body = {"review_item": item.id, "verdict": "confirm", "prediction": item.prediction_id}
            right_answers += 1
        else:
            body = {"review_item": item.id, "verdict": "reassign", "group": right.id}
        response = api_client.post("/api/v1/judgements", body, format="json")
        assert response.status_code == 201, response.content
        judged += 1
        item.refresh_from_db()
        if item.status == ReviewItem.Status.DONE and not item.conflict:
            settled += 1
            settled_right += vouched_right
        if not AutoCodingPolicy.objects.get(taxonomy=tiny_taxonomy).active:
            break
    found = admin.get(URL).json()
    assert not found["active"], f"still coding after {judged} audits, {right_answers} right"
    assert found["paused_at"] and judged <= MOST_AUDITS
    assert (found["audited"], found["audited_right"]) == (settled, settled_right)
    assert found["audited_interval"][1] < TARGET  # shown below the target
    assert AuditEvent.objects.filter(action="auto_coding.pause").count() == 1

    # Paused: a job started now codes nothing, and audits nothing.
    again = bulk_job_create(
        taxonomy=tiny_taxonomy, upload=io.BytesIO(ads()[:2000]), filename="more.csv",
        column="title", user=curator, enqueue=False,
    )  # fmt: skip
    later = bulk_job_execute(job_id=again.id)
    assert (later.rows_auto_coded, later.auto_coding_threshold) == (0, None)
    assert ReviewItem.objects.filter(audit=True).count() == len(audits)
