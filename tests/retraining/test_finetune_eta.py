"""A fine-tune's time left covers every stage still to come (the candidate's index, the gate,
the promotion), not only its training's, from rates measured at its start on this machine."""

from __future__ import annotations

from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.retraining import finetune_execute, finetune_run_request
from tests.retraining.conftest import HELD_OUT_TEXT, correct_everything, group


def test_a_fine_tunes_time_left_covers_the_stages_after_its_training(taxonomy, curator):
    correct_everything(taxonomy, curator)
    (held,) = inputs_submit(taxonomy=taxonomy, texts=[HELD_OUT_TEXT], source="api")
    judgement_create(review_item=held, user=curator, verdict="reassign", group=group("35-3023"))
    run = finetune_run_request(taxonomy=taxonomy, trigger="manual", enqueue=False)
    reports: list[tuple[str, float, float | None]] = []

    finetune_execute(run=run, progress=lambda stage, fraction, eta=None: reports.append(
        (stage, fraction, eta)
    ))  # fmt: skip

    run.refresh_from_db()
    eta = run.gate_report["eta"]
    assert eta["rates"]["encode_seconds_per_text"] > 0
    expected = eta["expected_seconds"]
    after_training = expected["index"] + expected["gate"] + expected["promote"]
    assert expected["index"] > 0 and expected["gate"] > 0 and expected["held_out"] > 0
    training = [left for stage, _, left in reports if stage == "train"]
    assert training and None not in training
    # Every report while training (both phases) says at least what the stages after it take.
    assert min(training) >= after_training
    # While the candidate's members are encoded, the gate is still to come.
    encoding = [left for stage, _, left in reports if stage == "encode"]
    assert encoding and min(encoding) >= expected["gate"]
