"""A fine-tune's time left covers every stage still to come (the candidate's index, the gate,
the promotion), not only its training's, from rates measured at its start on this machine and
how much longer each stage took than counted in the last run."""

from __future__ import annotations

import pytest
from django.utils import timezone

from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.models import TrainingRun
from models_app.training.retraining import finetune_execute, finetune_run_request
from models_app.training.services.run_clock import RunClock, calibration
from tests.conftest import one_verdict
from tests.retraining.conftest import HELD_OUT_TEXT, correct_everything, group


def test_a_fine_tunes_time_left_covers_the_stages_after_its_training(taxonomy, curator):
    correct_everything(taxonomy, curator)
    (held,) = inputs_submit(taxonomy=taxonomy, texts=[HELD_OUT_TEXT], source="api")
    judgement_create(review_item=held, user=curator, verdict="reassign", group=group("35-3023"))
    run = finetune_run_request(taxonomy=taxonomy, trigger="manual", enqueue=False)
    reports: list[tuple[str, float, float | None]] = []

    outcome = finetune_execute(run=run, progress=lambda stage, fraction, eta=None: reports.append(
        (stage, fraction, eta)
    ))  # fmt: skip
    # Finished as the worker finishes it (training_run_execute).
    TrainingRun.objects.filter(id=run.id).update(finished_at=timezone.now(), **outcome)

    run.refresh_from_db()
    eta = run.gate_report["eta"]
    assert eta["rates"]["encode_seconds_per_text"] > 0
    expected = eta["expected_seconds"]
    after_training = expected["index"] + expected["gate"] + expected["promote"]
    assert expected["index"] > 0 and expected["gate"] > 0 and expected["held_out"] > 0
    training = [left for stage, _, left in reports if stage in ("train", "catch up")]
    assert training and None not in training
    # The second training shows as its own stage, after the held-out check, never as "train".
    stages = [stage for stage, _, _ in reports]
    assert "catch up" in stages
    assert "train" not in stages[stages.index("catch up") :]
    # The report stores each stage's time to the millionth of a second (RunClock.report); the
    # time left while running is unrounded, so each comparison allows that rounding.
    rounding = 1e-6
    # Every report while training (both phases) says at least what the stages after it take.
    assert min(training) >= after_training - 3 * rounding
    # While the candidate's members are encoded, the gate is still to come.
    encoding = [left for stage, _, left in reports if stage == "encode"]
    assert encoding and min(encoding) >= expected["gate"] - rounding

    # The next fine-tune expects each stage as much longer than counted as this one took.
    run.refresh_from_db()
    took = dict(run.gate_report["stage_seconds"])
    took["promote"] = took.pop("flips", 0.0)
    one_verdict(taxonomy, curator, text="Night Nurse", code="29-1141")
    second = finetune_run_request(taxonomy=taxonomy, trigger="manual", enqueue=False)
    finetune_execute(run=second, progress=lambda stage, fraction, eta=None: None)
    second.refresh_from_db()
    factors = second.gate_report["eta"]["factors"]
    assert factors == pytest.approx(calibration(run.gate_report["eta"], took), abs=1e-3)
    assert factors  # the learn phase's at least: its budget counted, its time taken


def test_each_stage_after_the_first_run_is_expected_as_much_longer_as_it_took_then():
    factors = calibration(
        {"expected_seconds": {"index": 4.0, "gate": 10.0, "held_out": 0.1, "promote": 0.0}},
        {"index": 12.0, "gate": 25.0, "held_out": 0.01, "promote": 1.0, "learn": 50.0},
    )
    # Too short to say anything (held_out), or nothing counted (promote, learn): no factor.
    assert factors == {"index": 3.0, "gate": 2.5}
    reports = []
    clock = RunClock(
        lambda stage, fraction, eta=None: reports.append(eta),
        {"learn": 60.0, "index": 4.0, "gate": 20.0},
        factors=factors,
    )
    clock.phase("learn")("train", 0.5, 5.0)
    assert reports == [5.0 + 4.0 * 3.0 + 20.0 * 2.5]
    assert clock.report()["factors"] == {"index": 3.0, "gate": 2.5}
