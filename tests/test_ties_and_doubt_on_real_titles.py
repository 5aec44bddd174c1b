"""Doubt said plainly, on real vacancy titles against O*NET with the shipped model and the
starter ranker: an answer is tied where its top two probabilities are too close to tell apart
as shown (``TIE_GAP``, chosen on titles nobody judged: bench/starter_ranker.py), not only where
they are equal to the last bit; low confidence where the top group is less likely right than
not; the API, bulk output and the review card say the same."""

from __future__ import annotations

import csv
import io
import random
import re
from pathlib import Path

import pytest

from annotations.services.review.inputs import inputs_submit
from annotations.services.taxonomy import taxonomy_import
from bench.jobbert_data import SHARED_DATA, jobbert_split
from models_app.bulk.jobs import bulk_job_create
from models_app.bulk.run import bulk_job_execute
from models_app.bulk.selectors import bulk_job_result
from models_app.serving.normalize import (
    LOW_CONFIDENCE,
    TIE_GAP,
    rank_taxonomy_groups,
    tied_as_shown,
)
from models_app.training.services.builds import model_version_import
from models_app.training.services.indexes import deployment_activate, index_build_create

ROOT = Path(__file__).resolve().parent.parent
TITLES = 300

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (SHARED_DATA / "jobbert").is_dir(), reason="the JobBERT titles are not in ../shared"
    ),
]


@pytest.fixture
def onet(db):
    taxonomy = taxonomy_import(slug="onet", path=ROOT / "data" / "onet", fmt="onet").taxonomy
    version = model_version_import(taxonomy=taxonomy, folder=ROOT / "data" / "models" / "onet")
    deployment_activate(index_build=index_build_create(model_version=version))
    return taxonomy


@pytest.fixture
def titles():
    dev_unseen, _ = jobbert_split()
    return random.Random(43).sample(sorted({title.text for title in dev_unseen}), TITLES)


def test_ties_and_low_confidence_are_set_by_the_probabilities(onet, titles):
    answers = rank_taxonomy_groups(onet, titles, k=5)
    close_not_equal = 0
    for answer in answers:
        first, second = answer.groups[0], answer.groups[1]
        gap = first.probability - second.probability
        assert answer.tied == tied_as_shown(first.probability, second.probability) == second.tied
        assert answer.low_confidence == (answer.probability < LOW_CONFIDENCE)
        # Every group tied with the first is within the gap of it as shown (so less than the gap
        # apart in full), and none further down is.
        for group in answer.groups[1:]:
            assert group.tied == tied_as_shown(first.probability, group.probability)
            assert not group.tied or first.probability - group.probability < TIE_GAP
        close_not_equal += answer.tied and gap > 0
    tied = sum(answer.tied for answer in answers)
    low = sum(answer.low_confidence for answer in answers)
    # Real titles hold both kinds of answer, and ties that are not equal to the last bit.
    assert 0 < tied < TITLES and 0 < low < TITLES
    assert close_not_equal > 0


def test_bulk_output_and_the_review_card_say_what_the_api_says(onet, titles, curator, client):
    answers = rank_taxonomy_groups(onet, titles, k=5)
    out = io.StringIO()
    csv.writer(out).writerows([["title"], *[[title] for title in titles]])
    job = bulk_job_create(
        taxonomy=onet, upload=io.BytesIO(out.getvalue().encode()), filename="t.csv", column="title"
    )
    done = bulk_job_execute(job_id=job.id)
    with bulk_job_result(done, "csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row, answer in zip(rows, answers, strict=True):
        assert row["tied"] == str(answer.tied) and row["low_confidence"] == str(
            answer.low_confidence
        )
        assert float(row["probability"]) == pytest.approx(answer.probability, abs=0.005)

    tied = next(answer for answer in answers if answer.tied)
    inputs_submit(taxonomy=onet, texts=[tied.text], source="api")
    client.force_login(curator)
    card = client.get("/review/").content.decode()
    assert tied.text.replace("&", "&amp;") in card
    shown = len(re.findall(r'data-testid="option-tied"', card))
    assert shown == sum(group.tied for group in tied.groups) and shown >= 2
    assert 'data-testid="tie-note"' in card
    probabilities = [
        float(p) for p in re.findall(r'data-testid="option-probability"[^>]*>([0-9.]+)<', card)
    ]
    assert probabilities == sorted(probabilities, reverse=True)  # what ranks is what is shown
