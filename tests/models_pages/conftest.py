"""What the Models pages' tests share: a gate report and a flip report as a run stores them, runs
and versions as rows, and the state an action must leave alone."""

from __future__ import annotations

import copy

import pytest
from django.utils import timezone

from annotations.models import AuditEvent, Taxonomy
from models_app.models import Deployment, ModelVersion, TrainingRun
from models_app.training.run_execution import training_run_execute
from models_app.training.services.runs import training_run_request
from tests.conftest import TINY_MODEL


def gate_metric(name, suite, before, after, *, n, lost, gained, p, passed, why, against=None):
    row = {
        "name": name, "suite": suite, "candidate": after, "delta": round(after - before, 4),
        "n": n, "lost": lost, "gained": gained, "p_worse": p, "alpha": 0.0125,
        "ci95": [round(after - before - 0.02, 4), round(after - before + 0.02, 4)],
        "significantly_worse": not passed, "passed": passed, "why": why,
        "reference" if against else "live": before,
    }  # fmt: skip
    return {**row, "against": against} if against else row


GATE_REPORT = {
    "test": "McNemar exact, one-sided, paired on the same cases",
    "alpha": 0.05,
    "alpha_per_test": 0.0125,
    "reference_version": "jobs/v1",
    "decision": "reject",
    "reasons": [
        "typos fell by 0.050 (60 lost, 10 gained of 1000; p = 0.0000, below 0.0125): "
        "significantly worse",
        "extra_words fell by 0.015 since jobs/v1 (25 lost, 10 gained of 1000; p = 0.0083, "
        "below 0.0125): significantly worse",
    ],
    "metrics": [
        gate_metric(
            "typos",
            "frozen",
            0.9,
            0.85,
            n=1000,
            lost=60,
            gained=10,
            p=0.0,
            passed=False,
            why="typos fell by 0.050: significantly worse",
        ),
        gate_metric(
            "composition",
            "frozen",
            0.8,
            0.82,
            n=1000,
            lost=5,
            gained=25,
            p=0.9999,
            passed=True,
            why="composition rose by 0.020: within noise or better",
        ),
        gate_metric(
            "extra_words",
            "drift",
            0.93,
            0.915,
            n=1000,
            lost=25,
            gained=10,
            p=0.0083,
            passed=False,
            why="extra_words fell by 0.015 since jobs/v1",
            against="jobs/v1",
        ),
        gate_metric(
            "held_out_feedback",
            "feedback",
            0.5,
            0.75,
            n=4,
            lost=0,
            gained=1,
            p=1.0,
            passed=True,
            why="held_out_feedback rose by 0.250: within noise or better",
        ),
    ],
    "verdicts": {"count": 12, "live": 0.5, "candidate": 0.75, "rose": True},
    "new_verdicts": 12,
    "stage_seconds": {"learn": 135.2, "held_out": 14.0, "catch_up": 45.1, "index": 6.3},
}


def flip_row(text: str, *, before: str, after: str, curator: str | None, confirmed: bool) -> dict:
    def ref(code: str | None) -> dict | None:
        return None if code is None else {"code": code, "name": f"Group {code}"}

    return {
        "input": text,
        "before": ref(before),
        "after": ref(after),
        "curator": ref(curator),
        "verdict": ("confirm" if confirmed else "reassign") if curator else None,
        "confirmed": confirmed,
    }


FLIP_REPORT = {
    "compared": 40,
    "counts": {"fixed": 1, "broken": 205, "changed": 1, "confirmed_now_wrong": 2},
    "fixed": [
        flip_row(
            "java coder", before="35-3023", after="15-1252", curator="15-1252", confirmed=False
        )
    ],
    # Stored unconfirmed first: the page must still put the confirmed ones on top.
    "broken": [
        flip_row(
            "barista trainee", before="35-3023", after="29-1141", curator=None, confirmed=False
        ),
        flip_row("icu nurse", before="29-1141", after="35-3023", curator="29-1141", confirmed=True),
        flip_row(
            "senior java dev", before="15-1252", after="35-3023", curator="15-1252", confirmed=True
        ),
    ],
    "changed": [
        flip_row("chef de partie", before="35-2014", after="35-3023", curator=None, confirmed=False)
    ],
}


def live_version_id(taxonomy: Taxonomy) -> int:
    return Deployment.objects.get(taxonomy=taxonomy).index_build.model_version_id


def snapshot() -> tuple:
    return (
        sorted(TrainingRun.objects.values_list("id", "kind", "status", "gate_report")),
        sorted(Deployment.objects.values_list("taxonomy_id", "index_build_id")),
        AuditEvent.objects.count(),
    )


def make_run(taxonomy: Taxonomy, **fields) -> TrainingRun:
    defaults = {"kind": TrainingRun.Kind.FINETUNE, "status": TrainingRun.Status.RUNNING}
    return TrainingRun.objects.create(taxonomy=taxonomy, **{**defaults, **fields})


@pytest.fixture
def first_version(tiny_taxonomy) -> ModelVersion:
    return ModelVersion.objects.get(taxonomy=tiny_taxonomy, number=1)


@pytest.fixture
def older_version(first_version) -> ModelVersion:
    """jobs/v2 as a row (never loaded), not live: what a rollback can go back to."""
    return ModelVersion.objects.create(
        taxonomy=first_version.taxonomy,
        number=2,
        encoder_kind="char_ngram_tfidf",
        artifact_path="jobs/models/none",
        parent=first_version,
        metrics={"suite": {"mean_accuracy": 0.5, "typos/accuracy": 0.625}},
    )


@pytest.fixture
def rejected_finetune(first_version) -> TrainingRun:
    """A fine-tune the gate rejected, with a real candidate (jobs/v2) and its index."""
    build = training_run_request(
        taxonomy=first_version.taxonomy,
        kind=TrainingRun.Kind.BUILD,
        config=TINY_MODEL,
        activate=False,
        enqueue=False,
    )
    build = training_run_execute(run_id=build.id)
    assert build.status == TrainingRun.Status.SUCCEEDED, build.error
    return make_run(
        first_version.taxonomy,
        status=TrainingRun.Status.REJECTED,
        stage="done",
        progress=1.0,
        parent_version=first_version,
        model_version=build.model_version,
        index_build=build.index_build,
        # A copy: the instance keeps the dict it was given, and a test that edits its report
        # must not edit every later test's.
        gate_report=copy.deepcopy(GATE_REPORT),
        finished_at=timezone.now(),
    )


@pytest.fixture
def failed_run(tiny_taxonomy) -> TrainingRun:
    return make_run(
        tiny_taxonomy,
        kind=TrainingRun.Kind.REINDEX,
        status=TrainingRun.Status.FAILED,
        stage="encode",
        progress=0.4,
        error="MemoryError: the index did not fit",
        finished_at=timezone.now(),
    )
