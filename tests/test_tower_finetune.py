"""A tower's fine-tune on verdicts: the title tower's recipe, a false match a negative in its
title's batch, the parent left as it was and the result blended toward it."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from models_app.siamese.configs import ConfigError
from models_app.siamese.encoders import parse_config
from models_app.siamese.sampling import FeedbackExample
from models_app.siamese.specs import TrainConfig, parse_model_spec
from models_app.siamese.title_tower import LabelledTaxonomy, TitleTowerRecipe, batch_drawer
from models_app.siamese.tower_finetune import tower_finetune, verdicts_as_titles
from models_app.siamese.towers import WHEEL_BASE, TransformerEncoder

MEMBERS = [
    (1, "Registered Nurse"), (1, "Staff Nurse"), (1, "ICU Nurse"),
    (2, "Travel Agent"), (2, "Travel Consultant"),
    (3, "Barista"), (3, "Coffee Shop Barista"),
    (4, "Truck Driver"), (4, "HGV Driver"),
]  # fmt: skip
# "Travel RN" was answered Travel Agent; the curator put it under nurses.
VERDICTS = [
    FeedbackExample("Travel RN - 13 weeks", 1, True, ""),
    FeedbackExample("Travel RN - 13 weeks", 2, False, "Travel Agent"),
    FeedbackExample("Barista - part time", 3, True, "Barista"),
    FeedbackExample("Something odd", 4, False, "HGV Driver"),  # rejected only: no group
]


def test_verdicts_become_titles_of_their_groups_and_false_matches_of_their_texts():
    material = verdicts_as_titles(MEMBERS, VERDICTS)
    assert material.titles == [("Travel RN - 13 weeks", "1"), ("Barista - part time", "3")]
    assert material.false_matches == [
        ("Travel RN - 13 weeks", "2", "Travel Agent"),
        ("Something odd", "4", "HGV Driver"),
    ]
    assert material.members["1"] == ["Registered Nurse", "Staff Nurse", "ICU Nurse"]


def test_a_false_match_is_a_negative_column_of_its_titles_row():
    material = verdicts_as_titles(MEMBERS, VERDICTS)
    # Titles only, and room for each title's false match beside it.
    recipe = TitleTowerRecipe(batch_size=4, member_share=0.0)
    draw = batch_drawer([material], recipe, random.Random(3))
    drawn = 0
    for _ in range(50):
        anchors, positives, _ = draw()
        assert len(anchors) == len(positives) <= 4
        if "Travel RN - 13 weeks" in anchors:
            row = anchors.index("Travel RN - 13 weeks")
            assert positives[row] in {"Registered Nurse", "Staff Nurse", "ICU Nurse"}
            # Its false match is the next row's positive, so the softmax pushes the title away.
            assert positives[row + 1] == "Travel Agent"
            assert anchors[row + 1] == "Travel Consultant"  # the other member of its group
            drawn += 1
    assert drawn > 20


def test_without_false_matches_the_batches_are_the_shipped_recipes_draw_for_draw():
    """The shipped title tower is rebuilt from a seed: the false matches must not move a draw."""
    plain = LabelledTaxonomy("t", verdicts_as_titles(MEMBERS, []).members, [("RN nights", "1")])
    recipe = TitleTowerRecipe(batch_size=4)
    first, second = (batch_drawer([plain], recipe, random.Random(9)) for _ in range(2))
    assert [first() for _ in range(30)] == [second() for _ in range(30)]


@pytest.fixture(scope="module")
def wheel_tower():
    return TransformerEncoder.create([], parse_config({"kind": "transformer", "base": WHEEL_BASE}))


def _margin(encoder: TransformerEncoder) -> float:
    """How much nearer the corrected title is to its group's members than to its false match."""
    title, agent, *nurses = encoder.encode(
        ["Travel RN - 13 weeks", "Travel Agent", "Registered Nurse", "Staff Nurse", "ICU Nurse"]
    )
    return float(np.mean([title @ nurse for nurse in nurses]) - title @ agent)


def test_a_fine_tune_pulls_a_corrected_title_to_its_group_and_leaves_the_parent_as_it_was(
    wheel_tower,
):
    parent_state = {k: v.clone() for k, v in wheel_tower.state_dict().items()}
    before = _margin(wheel_tower)
    config = TrainConfig(
        max_steps=12, max_minutes=60.0, learning_rate=2e-4, batch_size=4, keep_parent_share=0.25
    )
    result = tower_finetune(wheel_tower, MEMBERS, VERDICTS * 4, config)
    assert result.steps == 12 and result.stopped_because == "max_steps"
    assert _margin(result.trained_encoder) > before
    assert _margin(result.encoder) > before
    assert all(torch.equal(v, wheel_tower.state_dict()[k]) for k, v in parent_state.items())
    # The result is a quarter parent, three quarters as trained, weight by weight.
    state = result.trained_encoder.state_dict()
    name = next(k for k in state if k.endswith("encoder.layer.0.attention.self.query.weight"))
    blended, trained = result.encoder.state_dict()[name], state[name]
    assert not torch.equal(trained, parent_state[name])
    assert torch.allclose(blended, 0.75 * trained + 0.25 * parent_state[name], atol=1e-6)
    # The word embeddings never train, as in the title tower.
    words = next(k for k in state if k.endswith("embeddings.word_embeddings.weight"))
    assert torch.equal(state[words], parent_state[words])
    assert result.metrics["steps"] == 12.0


def test_a_fine_tune_with_no_verdict_that_places_a_text_is_refused(wheel_tower):
    with pytest.raises(ConfigError, match="at least one verdict"):
        tower_finetune(wheel_tower, MEMBERS, VERDICTS[3:], TrainConfig(max_steps=1))


def test_only_a_pretrained_tower_takes_the_titles_recipe():
    spec = {"encoder": {"kind": "transformer"}, "training": {"finetune_recipe": "titles"}}
    assert parse_model_spec(spec)[1].finetune_recipe == "titles"
    with pytest.raises(ConfigError, match="finetune_recipe 'titles' trains a pretrained tower"):
        parse_model_spec({"encoder": {"kind": "ngram_bag"}, "training": spec["training"]})
    with pytest.raises(ConfigError, match="finetune_recipe must be one of pairs, titles"):
        parse_model_spec({"encoder": {"kind": "transformer"}, "training": {"finetune_recipe": "x"}})


@pytest.mark.parametrize("encoder", [{"kind": "transformer"}, {"kind": "ngram_bag"}])
def test_a_fine_tune_learns_by_pairs_unless_a_towers_run_asks_for_the_title_recipe(encoder):
    from types import SimpleNamespace

    from models_app.training.finetune_recipe import finetune_spec

    stored = {"loss": "sdml", "feedback_margin": 0.05}  # a pairs fine-tune's spec
    parent = SimpleNamespace(config={"encoder": encoder, "training": stored})
    _, training = parse_model_spec(finetune_spec(parent, {}))
    assert (training.finetune_recipe, training.replay_share) == ("pairs", 0.5)
    assert (training.feedback_margin, training.feedback_augment_share) == (0.05, 1.0)
    asked = finetune_spec(parent, {"training": {"finetune_recipe": "titles"}})
    if encoder["kind"] != "transformer":
        with pytest.raises(ConfigError, match="trains a pretrained tower"):
            parse_model_spec(asked)
        return
    _, titles = parse_model_spec(asked)
    # Only what the title recipe reads: no margin, no replay share, no augmented inputs.
    assert (titles.finetune_recipe, titles.feedback_margin, titles.replay_share) == ("titles", 0, 1)
    assert titles.feedback_augment_share == 0 and titles.keep_parent_share == 0.25
    assert titles.batch_size == 64  # the title tower's, as measured
