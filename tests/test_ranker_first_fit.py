"""The first ranker fit waits for 20 judged texts with a group, wherever the group was found: a
reassignment to a group outside the text's candidates counts too. A fit that cannot run yet is
logged once with its reason and tried again only after a newer verdict, and the Models page
says how many more it needs."""

from __future__ import annotations

import csv

import pytest

from annotations.models import Group
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from annotations.services.taxonomy import taxonomy_import
from models_app.models import Deployment, RankerVersion
from models_app.training.ranker_training import ranker_fit, rankers_due
from tests.conftest import TINY_CSV, build_live_model

TEXTS = [f"{role} {n}" for n in range(6) for role in ("Java Developer", "ICU Nurse", "Barista")]
# Put in the accountants' group, which none of them is near: outside their candidates.
ODD = ["Espresso Bar Python", "Night Java Nurse", "Truckload Barista Coder", "Senior ICU Developer",
       "Remote Coffee Nursing", "Weekend Kernel Hacker"]  # fmt: skip


@pytest.fixture
def undescribed(db, tmp_path, settings):
    """The tiny taxonomy without descriptions, searched one member deep: a text's only
    candidate is its nearest member's group, so a reassignment elsewhere is not among them."""
    settings.SIAMWEB_RANKER_DEPTH = 1
    with TINY_CSV.open(encoding="utf-8", newline="") as handle:
        rows = [{**row, "description": ""} for row in csv.DictReader(handle)]
    path = tmp_path / "undescribed.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    taxonomy = taxonomy_import(slug="jobs", path=path, fmt="csv", name="Tiny jobs").taxonomy
    build_live_model(taxonomy)
    return taxonomy


def test_reassignments_outside_the_candidates_count_towards_the_first_fit(undescribed, curator):
    accountants = Group.objects.get(taxonomy=undescribed, code="13-2011")
    confirmed = TEXTS[:14]  # 14 confirms and 6 reassignments: 20 only with the reassignments
    for item in inputs_submit(taxonomy=undescribed, texts=confirmed, source="api"):
        judgement_create(review_item=item, user=curator, verdict="confirm")
    for item in inputs_submit(taxonomy=undescribed, texts=ODD, source="api"):
        assert item.top_group_id != accountants.id
        judgement_create(review_item=item, user=curator, verdict="reassign", group=accountants)
    assert rankers_due() == [undescribed]
    version = ranker_fit(taxonomy=undescribed)
    assert version is not None and version.verdicts == len(confirmed) + len(ODD)
    # For the six texts whose group no matcher proposed, the fit's out-of-fold evidence holds a
    # miss: what it serves could not have been right.
    evidence = version.metrics["evidence"]
    assert len(evidence["right"]) == len(confirmed) + len(ODD)
    assert evidence["right"].count(False) >= len(ODD)


def test_a_refused_first_fit_is_logged_once_and_the_page_says_what_it_waits_for(
    undescribed, curator, other_curator, admin_user, client, caplog, settings
):
    settings.SIAMWEB_DOUBLE_REVIEW_PERCENT = 100  # each text judged by two curators
    texts = TEXTS[:12]  # 24 verdicts, 12 judged texts
    for item in inputs_submit(taxonomy=undescribed, texts=texts, source="api"):
        judgement_create(review_item=item, user=curator, verdict="confirm")
        item.refresh_from_db()
        judgement_create(review_item=item, user=other_curator, verdict="confirm")
    assert rankers_due() == [undescribed]
    caplog.clear()
    assert ranker_fit(taxonomy=undescribed) is None
    assert caplog.text.count("no ranker for jobs yet") == 1
    deployment = Deployment.objects.get(taxonomy=undescribed)
    assert deployment.ranker_refused_usable == len(texts)
    # Nothing new: not due again, so beat does not try (and log) every few seconds.
    assert rankers_due() == []
    client.force_login(admin_user)
    page = client.get("/models/").content.decode()
    assert f"{len(texts)} at the last try, {20 - len(texts)} more needed" in page
    # A newer verdict makes it due again.
    (late,) = inputs_submit(taxonomy=undescribed, texts=["Head Barista 9"], source="api")
    judgement_create(review_item=late, user=curator, verdict="confirm")
    assert rankers_due() == [undescribed]
    assert not RankerVersion.objects.exists()


def test_before_any_try_the_page_counts_the_verdicts_given(tiny_taxonomy, curator, client):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Developer 1"], source="api")
    judgement_create(review_item=item, user=curator, verdict="confirm")
    client.force_login(curator)
    page = client.get("/models/").content.decode()
    assert "the first fit needs 20 judged texts with a group: 1 verdict" in page
