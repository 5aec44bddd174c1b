"""What the retraining tests share: a small trainable model live on the tiny taxonomy, the
corrections it gets wrong, and a fine-tune run in this process as the worker would."""

from __future__ import annotations

import pytest

from annotations.models import Group, Taxonomy
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from annotations.services.taxonomy import taxonomy_import
from models_app.models import TrainingRun
from models_app.training.retraining import finetune_run_request
from models_app.training.run_execution import training_run_execute
from tests.conftest import TINY_CSV, build_live_model

# Small enough to train in a second or two on the five-group taxonomy.
TRAINABLE = {
    "encoder": {"kind": "ngram_bag", "buckets": 4096, "embedding_dim": 16, "output_dim": 16},
    "training": {
        "batch_size": 8,
        "max_steps": 60,
        "eval_every": 20,
        "patience": 10,
        "validation_share": 0.0,
        "learning_rate": 0.05,
        "threads": 1,
    },
}

# Inputs the first model gets wrong, and where they belong.
CORRECTIONS = {
    "Latte Artist": "35-3023",
    "Bookkeeper": "13-2011",
    "Midwife": "29-1141",
    "Forklift Operator": "53-3032",
}

# The one text here whose verdict lands in the held-out fifth (feedback_is_held_out).
HELD_OUT_TEXT = "Espresso Barista"


@pytest.fixture
def taxonomy(db) -> Taxonomy:
    report = taxonomy_import(slug="jobs", path=TINY_CSV, fmt="csv", name="Tiny jobs")
    build_live_model(report.taxonomy, TRAINABLE)
    return report.taxonomy


def group(code: str) -> Group:
    return Group.objects.get(taxonomy__slug="jobs", code=code)


def correct_everything(taxonomy, user) -> None:
    for item in inputs_submit(taxonomy=taxonomy, texts=list(CORRECTIONS), source="api"):
        gold = group(CORRECTIONS[item.input.text])
        verdict = "confirm" if item.top_group_id == gold.id else "reassign"
        judgement_create(review_item=item, user=user, verdict=verdict, group=gold)


def run_queued() -> None:
    """What the worker would do with the runs waiting (one at a time may wait)."""
    for run_id in TrainingRun.objects.filter(status="queued").values_list("id", flat=True):
        training_run_execute(run_id=run_id)


def finetune(taxonomy, **config) -> TrainingRun:
    run_queued()
    run = finetune_run_request(taxonomy=taxonomy, trigger="manual", config=config, enqueue=False)
    return training_run_execute(run_id=run.id)
