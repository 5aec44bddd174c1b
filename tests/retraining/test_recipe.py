"""What a fine-tune trains on, and how long: held-out verdicts measured before they are learnt,
fresh verdicts repeated, curator members of held-out verdicts left out, the feedback margin and
the time budget."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from annotations.models import FeedbackPair, Member
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.siamese.sampling import FeedbackExample
from models_app.siamese.specs import parse_model_spec
from models_app.siamese.text import comparison_key
from models_app.training import finetune_recipe, retraining
from models_app.training.finetune_recipe import finetune_minutes, finetune_spec, half_fresh
from models_app.training.services.builds import model_version_fit
from models_app.training.services.training_data import feedback_is_held_out
from tests.retraining.conftest import (
    CORRECTIONS,
    HELD_OUT_TEXT,
    TRAINABLE,
    correct_everything,
    finetune,
    group,
)


@pytest.fixture
def fit_phases(monkeypatch) -> list[dict]:
    """The real training, with what each phase of a fine-tune was given and gave noted."""
    phases = []
    real_fit = retraining.encoder_fit

    def recording_fit(**kwargs):
        phase = {
            "feedback": [comparison_key(f.text) for f in kwargs["feedback"]],
            "left_out": kwargs.get("left_out_members", frozenset()),
            "parent": kwargs.get("parent"),
            "anchor": kwargs.get("anchor"),
        }
        phases.append(phase)
        phase["fit"] = real_fit(**kwargs)
        return phase["fit"]

    monkeypatch.setattr(retraining, "encoder_fit", recording_fit)
    return phases


def test_held_out_verdicts_are_measured_before_the_run_learns_them(
    taxonomy, curator, settings, fit_phases
):
    settings.SIAMWEB_GATE_ALPHA = 1e-9
    assert feedback_is_held_out(HELD_OUT_TEXT)
    assert not any(feedback_is_held_out(text) for text in CORRECTIONS)
    correct_everything(taxonomy, curator)
    (item,) = inputs_submit(taxonomy=taxonomy, texts=[HELD_OUT_TEXT], source="api")
    judgement_create(review_item=item, user=curator, verdict="reassign", group=group("35-3023"))
    run = finetune(taxonomy, training={"max_steps": 200})

    key = comparison_key(HELD_OUT_TEXT)
    learn, catch_up = fit_phases
    # Phase 1 sees neither the held-out verdict's pairs nor its curator member ...
    assert key not in learn["feedback"] and key in learn["left_out"]
    assert {comparison_key(text) for text in CORRECTIONS} <= set(learn["feedback"])
    # ... the gate measures it on that model, then the catch-up phase learns it.
    (row,) = [row for row in run.gate_report["metrics"] if row["name"] == "held_out_feedback"]
    assert row["n"] == 1 and row["suite"] == "feedback"
    # ... as users would see it (each model with a ranker fitted for it), the models alone beside.
    assert row["answered"] == "served" and row["model_alone"]["n"] == 1
    assert key in catch_up["feedback"] and not catch_up["left_out"]
    # Both phases' results keep a share of the live version's weights, not of phase 1's ...
    live_encoder = learn["parent"]
    assert learn["anchor"] is None and catch_up["anchor"] is live_encoder
    # ... once: the catch-up phase continues from phase 1's weights before its blend.
    assert finetune_recipe.FINETUNE_KEEP_PARENT_SHARE > 0
    learnt = learn["fit"].result
    assert catch_up["parent"] is learnt.trained_encoder
    assert learnt.trained_encoder is not learnt.encoder
    assert not torch.equal(
        learnt.trained_encoder.state_dict()["dense.weight"],
        learnt.encoder.state_dict()["dense.weight"],
    )
    # ... drawn as often as all the other new verdicts together: the catch-up phase is short.
    held = catch_up["feedback"].count(key)
    others = len(catch_up["feedback"]) - held
    assert held >= 2 and abs(held - others) <= held // 2 + 1
    metrics = run.model_version.metrics
    assert metrics["held_out_verdicts"] == 1
    # A quarter of the steps as well as of the time: 150 to learn, 50 to catch up.
    assert (metrics["steps"], metrics["catch_up_steps"]) == (200, 50)


def test_the_first_phase_draws_new_verdicts_as_often_as_all_earlier_ones(
    taxonomy, curator, settings, fit_phases
):
    settings.SIAMWEB_GATE_ALPHA = 1e-9
    correct_everything(taxonomy, curator)
    assert finetune(taxonomy, training={"max_steps": 200}).status == "promoted"
    new_text = "Coffee Artist"
    assert not feedback_is_held_out(new_text)
    (item,) = inputs_submit(taxonomy=taxonomy, texts=[new_text], source="api")
    gold = group("35-3023")
    verdict = "confirm" if item.top_group_id == gold.id else "reassign"
    judgement_create(review_item=item, user=curator, verdict=verdict, group=gold)
    fit_phases.clear()  # the first fine-tune's
    finetune(taxonomy, training={"max_steps": 20})

    (phase,) = fit_phases  # nothing new is held out: one phase
    learn = phase["feedback"]
    pairs = FeedbackPair.objects.filter(taxonomy=taxonomy)
    # Every earlier verdict's pairs once each ...
    for text in CORRECTIONS:
        assert learn.count(comparison_key(text)) == pairs.filter(text_a=text).count()
    # ... and the one new verdict's repeated as many times as there are earlier judged texts.
    assert learn.count(comparison_key(new_text)) == 4 * pairs.filter(text_a=new_text).count()
    assert len(learn) == pairs.count() + 3 * pairs.filter(text_a=new_text).count()


def example(text: str, label: bool = True) -> FeedbackExample:
    return FeedbackExample(text=text, group_id=1, label=label, member_text="m")


def test_fresh_verdicts_are_repeated_to_as_many_judged_texts_as_the_rest():
    # Counted in judged texts: a reassign's two pairs are one verdict.
    rest = [example("a"), example("a", False), example("b"), example("c"), example("d")]
    fresh = [example("new")]
    assert half_fresh(fresh=fresh, rest=rest) == fresh * 4 + rest
    assert half_fresh(fresh=fresh, rest=rest, max_repeats=2) == fresh * 2 + rest
    three = [example("x"), example("y"), example("z")]
    assert half_fresh(fresh=three, rest=rest) == three + rest  # 4 texts against 3: once
    assert half_fresh(fresh=fresh, rest=[]) == fresh
    assert half_fresh(fresh=[], rest=rest) == rest


def test_a_finetune_with_nothing_held_out_learns_in_one_phase(taxonomy, curator, settings):
    settings.SIAMWEB_GATE_ALPHA = 1e-9
    correct_everything(taxonomy, curator)
    run = finetune(taxonomy, training={"max_steps": 50})
    assert run.model_version.metrics["catch_up_steps"] == 0
    assert run.model_version.metrics["steps"] == 50
    assert "held_out_feedback" not in {row["name"] for row in run.gate_report["metrics"]}


def test_a_build_leaves_the_curator_members_of_held_out_verdicts_out(taxonomy, curator):
    (item,) = inputs_submit(taxonomy=taxonomy, texts=[HELD_OUT_TEXT], source="api")
    judgement_create(review_item=item, user=curator, verdict="reassign", group=group("35-3023"))
    assert Member.objects.filter(taxonomy=taxonomy, source="curator").count() == 1
    version = model_version_fit(taxonomy=taxonomy, spec=TRAINABLE)
    assert version.trained_on_members == Member.objects.filter(taxonomy=taxonomy).count() - 1


@pytest.mark.parametrize("loss, margin", [("sdml", 0.05), (None, 0.05), ("contrastive", None)])
def test_only_a_loss_that_takes_margins_gets_the_feedback_margin(loss, margin):
    training = {"batch_size": 64} if loss is None else {"loss": loss}  # None: the default loss
    parent = SimpleNamespace(config={"encoder": {"kind": "ngram_bag"}, "training": training})
    spec = finetune_spec(parent, {})
    assert spec["training"].get("feedback_margin") == margin
    parse_model_spec(spec)  # a valid spec either way
    assert "feedback_margin" not in parent.config["training"]  # the parent's spec is not touched


def test_a_fine_tune_that_changes_the_loss_drops_a_margin_the_new_loss_cannot_take():
    parent = SimpleNamespace(
        config={
            "encoder": {"kind": "ngram_bag"},
            "training": {"loss": "sdml", "feedback_margin": 0.05},  # a fine-tune's own spec
        }
    )
    spec = finetune_spec(parent, {"training": {"loss": "contrastive"}})
    assert "feedback_margin" not in spec["training"]
    parse_model_spec(spec)
    asked = finetune_spec(parent, {"training": {"feedback_margin": 0.1}})
    assert asked["training"]["feedback_margin"] == 0.1  # an admin's own value is kept


@pytest.mark.parametrize(
    "new_verdicts, minutes",
    [(0, 2.0), (1, 2.0), (500, 2.0), (600, 2.4), (750, 3.0), (1000, 3.0), (10_000, 3.0)],
)
def test_a_fine_tune_on_more_new_verdicts_than_its_budget_is_for_trains_longer(
    new_verdicts, minutes, settings
):
    settings.SIAMWEB_FINETUNE_MAX_MINUTES = 2.0
    settings.SIAMWEB_FINETUNE_BUDGET_VERDICTS = 500
    assert finetune_minutes(new_verdicts) == pytest.approx(minutes)
    assert finetune_recipe.FINETUNE_BUDGET_GROWTH_CAP == 1.5  # the 3.0 above is 2.0 x the cap


def test_a_run_trains_on_the_budget_of_its_new_verdicts_unless_it_asks_for_its_own(
    taxonomy, curator, settings
):
    settings.SIAMWEB_GATE_ALPHA = 1e-9
    settings.SIAMWEB_FINETUNE_MAX_MINUTES = 2.0
    settings.SIAMWEB_FINETUNE_BUDGET_VERDICTS = 2
    correct_everything(taxonomy, curator)  # four new verdicts: twice the budget's, capped at 1.5
    run = finetune(taxonomy, training={"max_steps": 30})
    assert run.gate_report["new_verdicts"] == len(CORRECTIONS)
    assert run.model_version.config["training"]["max_minutes"] == pytest.approx(3.0)
    parent = SimpleNamespace(config={"encoder": {"kind": "ngram_bag"}, "training": {}})
    asked = finetune_spec(parent, {"training": {"max_minutes": 0.5}}, new_verdicts=1000)
    assert asked["training"]["max_minutes"] == 0.5  # a run's own budget is not scaled
