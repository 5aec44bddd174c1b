"""The gate weighs real traffic: an unjudged answer the live ranker is confident of, moved by a
candidate to a group no curator has put a text in, is an answer it most likely breaks."""

from __future__ import annotations

import numpy as np
import pytest

from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.serving.engines import engine_unstored, live_engine, live_engine_and_ranker
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.serving.rankers import engine_prior, serving_ranker
from models_app.siamese.search import SearchConfig
from models_app.siamese.text import comparison_key
from models_app.training import gate
from tests.retraining.conftest import group

# The flagship case: a promoted fine-tune moved this from Software Developers to a food group.
MOVED_TEXT = "Java Backend Engineer"
# Plain string search would keep the exact member match whatever the encoder says.
EMBEDDING_ONLY = SearchConfig(lexical_weight=0.0)


class MovingEncoder:
    """The live encoder, except that each text in ``moves`` is encoded as another text: a
    candidate that moves those answers and no others."""

    def __init__(self, encoder, moves: dict[str, str]) -> None:
        self.encoder = encoder
        self.moves = {comparison_key(text): to for text, to in moves.items()}

    def encode(self, texts, *args, **kwargs) -> np.ndarray:
        moved = [self.moves.get(comparison_key(text), text) for text in texts]
        return self.encoder.encode(moved, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.encoder, name)


def comparison_moving(taxonomy, moves: dict[str, str]) -> gate.Comparison:
    encoder = live_engine(taxonomy).encoder
    comparison = gate.Comparison.build(taxonomy)
    comparison.add("live", encoder, EMBEDDING_ONLY)
    comparison.add("candidate", MovingEncoder(encoder, moves), EMBEDDING_ONLY)
    return comparison


@pytest.fixture
def traffic(taxonomy, curator, settings):
    """The flagship text waiting unjudged, one verdict (a nurse) and the live ranker's
    probability for the flagship's served answer, which the gate counts as confident."""
    _, nurse = inputs_submit(taxonomy=taxonomy, texts=[MOVED_TEXT, "Midwife"], source="api")
    judgement_create(review_item=nurse, user=curator, verdict="reassign", group=group("29-1141"))
    (served,) = rank_taxonomy_groups(taxonomy, [MOVED_TEXT], k=3)
    assert served.groups[0].group_id == group("15-1252").id
    # The tiny taxonomy's cold ranker is surer of this than of most answers, though not of 0.9.
    settings.SIAMWEB_GATE_CONFIDENT_PROBABILITY = served.probability - 0.01
    settings.SIAMWEB_GATE_MOVED_PER_THOUSAND = 1.0
    return served.probability


def test_a_confident_answer_moved_to_a_group_without_evidence_blocks(taxonomy, traffic):
    comparison = comparison_moving(taxonomy, {MOVED_TEXT: "Coffee Maker"})
    assert comparison.top_groups("candidate") != comparison.top_groups("live")

    report = comparison.gate(alpha=0.05)

    moved = report["answers_moved"]
    assert (moved["moved"], moved["passed"]) == (1, False)
    assert moved["expected_lost"] == pytest.approx(traffic, abs=1e-3)
    assert moved["allowed"] == pytest.approx(moved["compared"] / 1000)
    (example,) = moved["examples"]
    assert example["input"] == MOVED_TEXT
    assert (example["before"]["code"], example["after"]["code"]) == ("15-1252", "35-3023")
    assert report["decision"] == "reject"
    assert any("to groups no curator has put a text in" in why for why in report["reasons"])


def test_a_move_to_a_group_curators_put_texts_in_is_not_counted(taxonomy, curator, traffic):
    (latte,) = inputs_submit(taxonomy=taxonomy, texts=["Latte Artist"], source="api")
    judgement_create(review_item=latte, user=curator, verdict="reassign", group=group("35-3023"))
    comparison = comparison_moving(taxonomy, {MOVED_TEXT: "Coffee Maker"})

    moved = comparison.answers_moved(confident=traffic - 0.01, allowed_per_thousand=1.0)

    assert moved["changed_without_evidence"] == 0
    assert (moved["moved"], moved["expected_lost"], moved["passed"]) == (0, 0.0, True)


def test_an_unsure_answer_moved_is_not_counted_and_many_inputs_allow_more(taxonomy, traffic):
    comparison = comparison_moving(taxonomy, {MOVED_TEXT: "Coffee Maker"})

    unsure = comparison.answers_moved(confident=min(traffic + 0.01, 1.0), allowed_per_thousand=1.0)
    assert (unsure["changed_without_evidence"], unsure["moved"], unsure["passed"]) == (1, 0, True)

    # One expected loss in a thousand is allowed: this many inputs compared allow this one.
    lenient = comparison.answers_moved(
        confident=traffic - 0.01, allowed_per_thousand=1000 / unsure["compared"]
    )
    assert (lenient["moved"], lenient["passed"]) == (1, True)
    assert "within the 1.0 allowed" in lenient["why"]


def test_a_judged_answer_moved_is_the_verdict_rows_business(taxonomy, curator, traffic):
    (item,) = inputs_submit(taxonomy=taxonomy, texts=[MOVED_TEXT], source="api")
    judgement_create(review_item=item, user=curator, verdict="confirm", group=group("15-1252"))
    comparison = comparison_moving(taxonomy, {MOVED_TEXT: "Coffee Maker"})

    moved = comparison.answers_moved(confident=traffic - 0.01, allowed_per_thousand=1.0)

    assert moved["moved"] == 0 and moved["passed"]


def served_comparison_moving(taxonomy, moves: dict[str, str]) -> gate.Comparison:
    """Live and a candidate that moves ``moves``, both as users would see them: each engine with
    a ranker beside it (the live one's, and for the candidate its prior)."""
    comparison = comparison_moving(taxonomy, moves)
    live, ranker_id = live_engine_and_ranker(taxonomy)
    moving = MovingEncoder(live.encoder, moves)
    candidate = engine_unstored(
        taxonomy, encoder=moving, search_config=EMBEDDING_ONLY, label="moving"
    )
    comparison.add_served("live", live, serving_ranker(live, ranker_id))
    comparison.add_served("candidate", candidate, engine_prior(candidate))
    return comparison


def test_real_traffic_is_compared_as_served_when_both_models_are(taxonomy, traffic):
    # Served, the other matchers' evidence weighs beside the encoder's: this move lands on the
    # baristas, where "Coffee Maker" alone would not (the nurses, a group with a verdict).
    comparison = served_comparison_moving(taxonomy, {MOVED_TEXT: "Espresso Barista"})
    inputs = comparison.inputs()
    # The live pair's answers are what the API serves now, probabilities included.
    served = {a.text: a for a in rank_taxonomy_groups(taxonomy, inputs, k=gate.OFFERED_GROUPS)}
    for text, (top, offered) in zip(inputs, comparison.served_answers("live"), strict=True):
        assert top == served[text].groups[0].group_id
        # (A curator's answer is given without a probability.)
        assert offered[top] == pytest.approx(served[text].probability or 0.0)
    # The candidate served moves the flagship text: blocked as the model alone was.
    moved = comparison.answers_moved(confident=traffic - 0.01, allowed_per_thousand=1.0)
    assert moved["answered"] == "served"
    assert (moved["moved"], moved["passed"]) == (1, False)
    assert moved["expected_lost"] == pytest.approx(traffic, abs=1e-3)
    (example,) = moved["examples"]
    assert (example["before"]["code"], example["after"]["code"]) == ("15-1252", "35-3023")
    # The flip report reads the same served answers.
    assert comparison.flips()["counts"]["changed"] >= 1
    # Without both served, the models alone answer, and say so.
    alone = comparison_moving(taxonomy, {MOVED_TEXT: "Coffee Maker"})
    assert alone.answers_moved(confident=0.5, allowed_per_thousand=1.0)["answered"] == (
        "model alone"
    )
