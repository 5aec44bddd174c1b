"""The gate's held-out verdicts as users would see them: each model with a ranker fitted for it
on the other verdicts, paired case by case; the models alone reported beside, not tested. And
the engine of a model never stored (a fine-tune's first phase) answers as a stored one would."""

from __future__ import annotations

import numpy as np

from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.models import IndexBuild, ModelVersion, TrainingRun
from models_app.serving.engines import engine_unstored, live_engine
from models_app.serving.groups import engine_group_facts
from models_app.siamese.text import comparison_key
from models_app.training import gate, ranker_training, retraining
from models_app.training.ranker_training import held_out_served_hits, judged_texts
from models_app.training.selectors.reports import gate_report_of
from tests.test_match_probability import RIGHT, WRONG, judge_all


def unstored_copy(taxonomy):
    """The live model as an engine that was never stored: its members encoded again."""
    live = live_engine(taxonomy)
    engine = engine_unstored(
        taxonomy,
        encoder=live.encoder,
        search_config=live.search.config,
        label=f"{live.model_label} again",
    )
    return live, engine


def test_an_unstored_engine_finds_what_the_stored_one_finds(tiny_taxonomy):
    live, unstored = unstored_copy(tiny_taxonomy)
    texts = ["Senior Java Engineer", "Night Nurse", "Barista", "Truck Driver CDL"]
    found = unstored.nearest_members(texts, 5)
    expected = live.nearest_members(texts, 5)
    for row, want in zip(found, expected, strict=True):
        assert [m for m, _ in row] == [m for m, _ in want]
        np.testing.assert_allclose([s for _, s in row], [s for _, s in want], atol=1e-5)
    # Its groups' descriptions are its own encodings, cached on it and nowhere else.
    facts = engine_group_facts(unstored, tiny_taxonomy.slug)
    assert engine_group_facts(unstored, tiny_taxonomy.slug) is facts
    stored = engine_group_facts(live, tiny_taxonomy.slug)
    assert facts.ids.tolist() == stored.ids.tolist()
    np.testing.assert_allclose(facts.vectors, stored.vectors, atol=1e-5)
    assert unstored.model_version_id is None and unstored.index_build_id is None


# Confirmed beside judge_all's 22, so that a ranker fits on what is left after the held-out six.
MORE = ["Java Software Engineer", "ICU Registered Nurse", "Barista Part Time",
        "Delivery Truck Driver", "Junior Accountant", "Python Backend Engineer"]  # fmt: skip


def test_the_served_comparison_fits_a_ranker_without_the_held_out_verdicts(
    tiny_taxonomy, curator, monkeypatch
):
    judge_all(tiny_taxonomy, curator)
    for item in inputs_submit(taxonomy=tiny_taxonomy, texts=MORE, source="api"):
        judgement_create(review_item=item, user=curator, verdict="confirm")
    fitted_on = []
    real_fit = ranker_training.fit_ranker

    def recording_fit(examples, **kwargs):
        fitted_on.append(len(examples))
        return real_fit(examples, **kwargs)

    monkeypatch.setattr(ranker_training, "fit_ranker", recording_fit)
    held = [comparison_key(text) for text in [*RIGHT[:4], *list(WRONG)[:2]]]
    live, unstored = unstored_copy(tiny_taxonomy)
    hits = held_out_served_hits(tiny_taxonomy, [live, unstored], frozenset(held))
    assert hits is not None
    # A ranker fitted for each engine on every judged text but the held-out ones.
    judged = len(RIGHT) + len(WRONG) + len(MORE)
    assert fitted_on == [judged - len(held)] * 2
    # One answer per held-out text, in the same order for both engines: paired.
    assert [len(h) for h in hits] == [len(held), len(held)]
    # The same model stored or not, with the same verdicts: the same served answers.
    assert hits[0] == hits[1]
    # Only the texts curators put in a group are cases; none held out: nothing to compare.
    assert held_out_served_hits(tiny_taxonomy, [live], frozenset({"no such text"})) is None
    assert len(judged_texts(tiny_taxonomy)) == judged


def test_a_served_held_out_row_says_so_and_gives_the_models_alone_beside_it(tiny_taxonomy):
    row = gate.gate_row("held_out_feedback", "feedback", "live", [True, False], [True, True],
                        alpha=0.05)  # fmt: skip
    served = {**row, "answered": "served",
              "model_alone": {"live": 1.0, "candidate": 0.5, "n": 2}}  # fmt: skip
    run = TrainingRun.objects.create(
        taxonomy=tiny_taxonomy,
        kind=TrainingRun.Kind.FINETUNE,
        status=TrainingRun.Status.REJECTED,
        gate_report={"metrics": [served, {**row, "answered": "model alone"}]},
    )
    first, second = gate_report_of(run).rows
    assert "as curators would see them" in first.meaning
    assert first.sentence.endswith("By the models alone: 0.500 against 1.000 (not tested).")
    assert "as curators would see them" not in second.meaning
    assert "models alone" not in second.sentence


def test_a_parent_that_is_not_live_is_compared_by_the_models_alone(tiny_taxonomy):
    """A retry whose parent was rolled away from: there is no live pair of the parent's to
    serve with, so neither the held-out verdicts nor real traffic are compared as served."""
    live = live_engine(tiny_taxonomy)
    not_live = ModelVersion.objects.create(
        taxonomy=tiny_taxonomy, number=9, encoder_kind="char_ngram_tfidf",
        artifact_path="jobs/models/none",
    )  # fmt: skip
    comparison = gate.Comparison.build(tiny_taxonomy)
    build = IndexBuild.objects.get(id=live.index_build_id)
    retraining._serve_both(comparison, tiny_taxonomy, not_live, build)
    assert not comparison.traffic_served
    assert retraining._held_out_served(tiny_taxonomy, not_live, live, frozenset({"x"})) is None
    # The live model's own parent does get the served pair.
    parent = ModelVersion.objects.get(id=live.model_version_id)
    retraining._serve_both(comparison, tiny_taxonomy, parent, build)
    assert comparison.traffic_served
