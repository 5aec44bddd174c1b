"""Every run's time left covers the phases still to come, not only its stage's: a build's
training is followed by encoding every member, the index and the evaluation; a reindex's and
a rollback's encoding by the index. The seconds each phase is expected to take come from rates
measured at the run's start and, from the second run of a kind and spec, from how much longer
than counted each phase took in the last one (the run's ``eta_report``)."""

from __future__ import annotations

import pytest

from annotations.models import Group, Member
from annotations.services.taxonomy import taxonomy_import
from models_app.models import TrainingRun
from models_app.training.promotion import live_version, model_version_rollback, rollback_execute
from models_app.training.services.run_clock import RunClock, calibration
from models_app.training.services.runs import build_or_reindex, training_run_request
from tests.conftest import TINY_CSV, build_live_model
from tests.retraining.conftest import TRAINABLE

# The rounding of the seconds a report keeps (six places), summed over the phases compared.
ROUNDING = 1e-5


def recorder(reports: list[tuple[str, float, float | None]]):
    return lambda stage, fraction, eta=None: reports.append((stage, fraction, eta))


def lefts(reports, stage: str) -> list[float | None]:
    return [left for name, _, left in reports if name == stage]


def add_members(taxonomy, count: int) -> None:
    """``count`` new members, enough for the encoder to be timed (``ENCODE_TIMED_FROM``)."""
    group = Group.objects.get(taxonomy=taxonomy, code="29-1141")
    Member.objects.bulk_create(
        Member(taxonomy=taxonomy, group=group, text=f"Ward Nurse {i}",
               normalized_text=f"ward nurse {i}")
        for i in range(count)
    )  # fmt: skip


def test_a_builds_time_left_covers_encoding_indexing_and_evaluating_after_its_training(db):
    taxonomy = taxonomy_import(slug="jobs", path=TINY_CSV, fmt="csv", name="Tiny jobs").taxonomy
    run = training_run_request(taxonomy=taxonomy, kind="build", config=TRAINABLE, enqueue=False)
    reports: list[tuple[str, float, float | None]] = []

    outcome = build_or_reindex(run=run, progress=recorder(reports))

    # Every report says a time left, from the first, before any work, to the evaluation's.
    assert {"train", "encode", "index", "evaluate"} <= {stage for stage, _, _ in reports}
    assert None not in [left for _, _, left in reports]
    eta = outcome["eta_report"]
    assert eta["rates"]["encode_seconds_per_text"] > 0
    assert eta["rates"]["index_seconds_per_member"] > 0
    expected = eta["expected_seconds"]
    after_training = expected["encode"] + expected["index"] + expected["evaluate"]
    assert expected["encode"] > 0 and expected["index"] > 0 and expected["evaluate"] > 0
    # Training is expected to take its time budget (an hour by default) until it says its own
    # time left; the first report, before its pairs are prepared, counts that and the rest.
    assert expected["train"] == 3600.0
    assert reports[0][:2] == ("train", 0.0)
    assert reports[0][2] > expected["train"] / 2 + after_training
    # Every report while training, its last (which says training is done) included.
    assert min(lefts(reports, "train")) >= after_training - ROUNDING
    # While the members are encoded, the index and the evaluation are still to come.
    assert min(lefts(reports, "encode")) >= expected["index"] + expected["evaluate"] - ROUNDING
    assert set(eta["took_seconds"]) == {"teacher", "train", "encode", "index", "evaluate"}


def test_a_reindexs_time_left_covers_the_index_while_it_encodes(tiny_taxonomy):
    add_members(tiny_taxonomy, 12)
    run = training_run_request(taxonomy=tiny_taxonomy, kind="reindex", enqueue=False)
    reports: list[tuple[str, float, float | None]] = []

    outcome = build_or_reindex(run=run, progress=recorder(reports))

    assert {stage for stage, _, _ in reports} == {"encode", "index"}
    assert None not in [left for _, _, left in reports]
    eta = outcome["eta_report"]
    expected = eta["expected_seconds"]
    # The live model encodes only the members added since its index was built.
    assert expected["encode"] == pytest.approx(
        12 * eta["rates"]["encode_seconds_per_text"], abs=ROUNDING
    )
    assert expected["encode"] > 0 and expected["index"] > 0
    assert min(lefts(reports, "encode")) >= expected["index"] - ROUNDING


def test_the_next_reindex_is_expected_as_much_longer_than_counted_as_the_last_took(
    tiny_taxonomy,
):
    last = {
        "rates": {},
        "expected_seconds": {"encode": 0.25, "index": 0.2},
        "took_seconds": {"encode": 0.75, "index": 1.0},
    }
    TrainingRun.objects.create(
        taxonomy=tiny_taxonomy, kind="reindex", status="succeeded", config={}, eta_report=last
    )
    add_members(tiny_taxonomy, 12)
    run = training_run_request(taxonomy=tiny_taxonomy, kind="reindex", enqueue=False)
    reports: list[tuple[str, float, float | None]] = []

    eta = build_or_reindex(run=run, progress=recorder(reports))["eta_report"]

    assert (
        eta["factors"] == calibration(last, last["took_seconds"]) == {"encode": 3.0, "index": 5.0}
    )
    expected = eta["expected_seconds"]
    assert min(lefts(reports, "encode")) >= 5.0 * expected["index"] - ROUNDING


def test_a_rollbacks_time_left_covers_the_index_while_it_encodes(tiny_taxonomy, admin_user):
    first = live_version(tiny_taxonomy)
    build_live_model(tiny_taxonomy)
    assert live_version(tiny_taxonomy) != first
    run = model_version_rollback(model_version=first, actor=admin_user)
    reports: list[tuple[str, float, float | None]] = []

    outcome = rollback_execute(run=run, progress=recorder(reports))

    assert {stage for stage, _, _ in reports} == {"encode", "index"}
    assert None not in [left for _, _, left in reports]
    eta = outcome["eta_report"]
    expected = eta["expected_seconds"]
    # Not the live version's index: every member is encoded again.
    members = Member.objects.filter(taxonomy=tiny_taxonomy).count()
    assert expected["encode"] == pytest.approx(
        members * eta["rates"]["encode_seconds_per_text"], abs=ROUNDING
    )
    assert expected["encode"] > 0 and expected["index"] > 0
    # Each report while encoding (the encoder's own time left) counts the index after it.
    assert min(lefts(reports, "encode")) >= expected["index"] - ROUNDING


def test_a_stage_that_starts_part_way_says_what_it_is_expected_to_take_not_nothing():
    reports: list[float | None] = []
    clock = RunClock(lambda stage, fraction, eta=None: reports.append(eta), {"gate": 10.0})
    # The gate's first report comes at 0.5 of its stage: no pace can be told from it yet.
    clock.phase("gate")("evaluate", 0.5, None)
    assert reports[0] > 9.0
