"""The ranker's candidates, features, fit, calibration and files (no Django)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.configs import ConfigError
from models_app.siamese.ranker.candidates import (
    Candidates,
    GroupFacts,
    HitMember,
    SearchedTexts,
    TaxonomyEvidence,
    candidate_features,
    candidates_of_texts,
)
from models_app.siamese.ranker.features import FEATURES
from models_app.siamese.ranker.files import load_ranker, save_ranker
from models_app.siamese.ranker.model import (
    MIN_EXAMPLES,
    LinearRanker,
    RankingExample,
    fit_ranker,
    hand_prior,
    recalibrated,
)
from models_app.siamese.ranker.verdict_history import OwnVerdict, VerdictHistory

COLUMN = {name: i for i, name in enumerate(FEATURES)}
MEMBERS = {
    1: HitMember(10, "java developer"),
    2: HitMember(10, "java programmer"),
    3: HitMember(20, "coffee expert"),
    4: HitMember(30, "barista"),
    5: HitMember(20, "java barista", curator=True),
}


def unit(*values: float) -> np.ndarray:
    vector = np.array(values, np.float32)
    return vector / np.linalg.norm(vector)


def facts(description_rows: dict[int, np.ndarray]) -> GroupFacts:
    ids = [10, 20, 30, 40]
    vectors = [description_rows.get(g, np.zeros(2, np.float32)) for g in ids]
    return GroupFacts.build(
        ids,
        ["Software developers", "Coffee experts", "Baristas", "Tea tasters"],
        vectors,
        [g in description_rows for g in ids],
    )


def feature(candidates: Candidates, group: int, name: str) -> float:
    row = int(np.flatnonzero(candidates.groups == group)[0])
    return float(candidates.features[row, COLUMN[name]])


def test_candidates_are_the_union_of_members_curators_members_and_descriptions():
    hits = [(1, 0.9), (2, 0.8), (3, 0.5), (5, 0.7), (99, 0.95)]  # 99: deleted since the build
    groups = facts({40: unit(1, 0)})
    found = candidate_features("java dev", unit(1, 0), hits, MEMBERS, TaxonomyEvidence(groups))

    assert sorted(found.groups.tolist()) == [10, 20, 40]
    assert found.features.shape == (3, len(FEATURES))
    assert np.isfinite(found.features).all()
    # A group's similarity is its best member's, of either source; 0 for a description alone.
    assert dict(zip(found.groups.tolist(), found.similarity.tolist(), strict=True)) == {
        10: pytest.approx(0.9),
        20: pytest.approx(0.7),
        40: 0.0,
    }
    assert feature(found, 20, "judged") == pytest.approx(0.7)
    assert feature(found, 20, "member") == pytest.approx(0.5)
    assert feature(found, 10, "judged_missing") == 1.0
    assert feature(found, 40, "description") == pytest.approx(1.0)
    assert feature(found, 10, "description_missing") == 1.0
    assert found.members[found.groups.tolist().index(20)] == 5  # the curator's member is nearer


def test_excluded_groups_are_never_candidates_by_any_matcher():
    hits = [(1, 0.9), (3, 0.5), (5, 0.7)]
    groups = facts({20: unit(1, 0), 30: unit(1, 0.1)})
    found = candidate_features(
        "java", unit(1, 0), hits, MEMBERS, TaxonomyEvidence(groups), excluded=frozenset({20})
    )
    assert 20 not in found.groups.tolist()
    assert 30 in found.groups.tolist()


def test_a_required_group_no_matcher_proposed_is_added_last_and_marked():
    """A training example's verdict group joins its candidates where no matcher proposed it:
    last, flagged, with the features any group outside the hits has; a proposed or ruled-out
    group is not added again."""
    hits = [[(1, 0.9), (3, 0.5)], [(1, 0.9), (3, 0.5)], [(1, 0.9), (3, 0.5)], [(3, 0.6)]]
    vectors = np.stack([unit(1, 0)] * 4)
    batch = candidates_of_texts(
        SearchedTexts(["java dev", "java dev", "java dev", "coffee"], vectors, hits, MEMBERS),
        TaxonomyEvidence(facts({})),
        excluded=[frozenset(), frozenset(), frozenset({30}), frozenset()],
        required=[30, 20, 30, None],
    )
    assert [batch.added_for(i) for i in range(4)] == [True, False, False, False]
    added = batch[0]
    assert added.groups.tolist() == [10, 20, 30]
    assert added.similarity[-1] == 0.0 and added.members[-1] == -1
    assert added.features[-1, COLUMN["member_missing"]] == 1.0
    assert batch[1].groups.tolist() == [10, 20]  # proposed already
    assert batch[2].groups.tolist() == [10, 20]  # rejected for this very text
    assert batch[3].groups.tolist() == [20]
    # A group beyond every id the hits, descriptions and exclusions name keeps texts apart.
    far = candidates_of_texts(
        SearchedTexts(["java dev", "coffee"], vectors[:2], [hits[0], hits[3]], MEMBERS),
        TaxonomyEvidence(facts({})),
        required=[9_999, None],
    )
    assert far[0].groups.tolist() == [10, 20, 9_999] and far[1].groups.tolist() == [20]
    # Without ``required`` nothing is marked.
    plain = candidates_of_texts(
        SearchedTexts(["java dev"], vectors[:1], hits[:1], MEMBERS), TaxonomyEvidence(facts({}))
    )
    assert plain[0].groups.tolist() == [10, 20] and not plain.added_for(0)


def with_group_outside(example: RankingExample, group: int = 400) -> RankingExample:
    """The example's text put in a group none of its candidates is."""
    return RankingExample(example.candidates, group)


def added_outside(example: RankingExample, group: int = 400) -> RankingExample:
    """As ``with_group_outside``, the group added to the candidates as a required one is."""
    c = example.candidates
    extra = np.zeros((1, len(FEATURES)), np.float32)
    return RankingExample(Candidates(
        np.append(c.groups, group), np.vstack([c.features, extra]),
        np.append(c.similarity, 0.0), np.append(c.members, -1),
    ), group, added=True)  # fmt: skip


def test_verdicts_for_groups_outside_the_candidates_count_but_the_weights_skip_them():
    """Every verdict with a group counts towards the first fit; the weights are those of the
    verdicts whose group was among the candidates, and the others are misses out of fold."""
    examples = synthetic_examples(MIN_EXAMPLES - 5, seed=11)
    outside = [with_group_outside(e) for e in synthetic_examples(5, seed=12)]
    with pytest.raises(ConfigError, match="at least 20 verdicts with a group, got 15"):
        fit_ranker(examples, prior=hand_prior())
    ranker = fit_ranker(examples + outside, prior=hand_prior())
    assert ranker.fitted_on == MIN_EXAMPLES
    evidence = ranker.metrics["evidence"]
    assert len(evidence["right"]) == MIN_EXAMPLES
    assert evidence["right"].count(False) >= len(outside)
    # Only "none of these" and groups outside: the prior's weights stand, calibrated.
    lone = fit_ranker([with_group_outside(e) for e in synthetic_examples(20, seed=13)],
                      prior=hand_prior())  # fmt: skip
    assert lone.calibrated
    assert np.allclose(lone.weights, hand_prior().weights / hand_prior().scale * lone.scale)


def test_an_added_group_teaches_the_fit_but_its_evidence_is_a_miss():
    """Examples whose right group was added (``required``) fit the weights; out of fold they
    are scored as served, without it: a miss, never evidence that the top answer was right."""
    examples = synthetic_examples(MIN_EXAMPLES - 5, seed=11)
    outside = [added_outside(e) for e in synthetic_examples(5, seed=12)]
    ranker = fit_ranker(examples + outside, prior=hand_prior())
    skipped = fit_ranker(examples + [with_group_outside(e) for e in synthetic_examples(5, seed=12)],
                         prior=hand_prior())  # fmt: skip
    assert not np.allclose(ranker.weights, skipped.weights)
    evidence = ranker.metrics["evidence"]
    assert len(evidence["right"]) == MIN_EXAMPLES
    assert evidence["right"].count(False) >= len(outside)


def test_an_exact_member_and_shared_words_are_evidence():
    found = candidate_features("Java Developer", unit(1, 0), [(1, 1.0), (3, 0.4)], MEMBERS)
    assert feature(found, 10, "member_exact") == 1.0
    assert feature(found, 10, "member_words_query") == 1.0
    assert feature(found, 20, "member_exact") == 0.0


def test_a_tie_of_member_scores_is_broken_by_the_descriptions():
    # Two groups hold the same string: their best members tie, their descriptions do not.
    members = {1: HitMember(10, "driver"), 2: HitMember(20, "driver")}
    groups = facts({10: unit(0, 1), 20: unit(1, 0)})
    found = candidate_features(
        "driver", unit(1, 0), [(1, 1.0), (2, 1.0)], members, TaxonomyEvidence(groups)
    )
    assert feature(found, 10, "best") == feature(found, 20, "best")

    scores = hand_prior().scores(found.features)
    assert found.groups[int(np.argmax(scores))] == 20
    # Without descriptions the evidence cannot tell them apart.
    bare = candidate_features("driver", unit(1, 0), [(1, 1.0), (2, 1.0)], members)
    blind = hand_prior().scores(bare.features)
    assert blind[0] == blind[1]


def test_the_history_counts_a_groups_verdicts_and_leaves_a_texts_own_out():
    history = VerdictHistory(
        confirmed={10: 3, 20: 1},
        rejected={20: 2},
        rejected_groups=np.array([20, 20]),
        rejected_vectors=np.stack([unit(1, 0), unit(0, 1)]),
        group_count=4,
    )
    hits = [(1, 0.9), (3, 0.5)]
    found = candidate_features("java", unit(1, 0), hits, MEMBERS, TaxonomyEvidence(history=history))
    assert feature(found, 10, "verdicts") == pytest.approx(np.log1p(3))
    assert feature(found, 20, "rejections") == pytest.approx(np.log1p(2))
    assert feature(found, 20, "rejected_near") == pytest.approx(1.0)

    own = OwnVerdict(10, rejected_rows=(0,))
    alone = candidate_features(
        "java", unit(1, 0), hits, MEMBERS, TaxonomyEvidence(history=history), own=own
    )
    assert feature(alone, 10, "verdicts") == pytest.approx(np.log1p(2))
    assert feature(alone, 20, "rejections") == pytest.approx(np.log1p(1))
    assert feature(alone, 20, "rejected_near") == pytest.approx(0.0, abs=1e-6)


def synthetic_examples(count: int, seed: int) -> list[RankingExample]:
    """Texts with three candidates whose right group is the one curators chose most often,
    while the member cosine favours another: evidence the prior ignores."""
    rng = np.random.default_rng(seed)
    examples = []
    for _ in range(count):
        features = rng.normal(0, 0.05, size=(3, len(FEATURES))).astype(np.float32)
        right = int(rng.integers(3))
        features[:, COLUMN["best"]] = rng.uniform(0.5, 0.9, 3)
        features[(right + 1) % 3, COLUMN["best"]] = 0.95
        features[:, COLUMN["verdicts"]] = rng.uniform(0, 1, 3)
        features[right, COLUMN["verdicts"]] = 3.0
        candidates = Candidates(
            groups=np.array([100, 200, 300]),
            features=features,
            similarity=features[:, COLUMN["best"]],
            members=np.array([-1, -1, -1]),
        )
        examples.append(RankingExample(candidates, [100, 200, 300][right]))
    return examples


def accuracy(ranker: LinearRanker, examples: list[RankingExample]) -> float:
    right = [
        e.candidates.groups[int(np.argmax(ranker.scores(e.candidates.features)))] == e.group_id
        for e in examples
    ]
    return float(np.mean(right))


def test_a_fitted_ranker_learns_the_evidence_the_prior_ignores():
    prior = hand_prior()
    train, held = synthetic_examples(200, seed=0), synthetic_examples(200, seed=1)
    ranker = fit_ranker(train, prior=prior)

    assert accuracy(prior, held) < 0.05
    assert accuracy(ranker, held) > 0.95
    assert ranker.calibrated and ranker.fitted_on == 200
    # Its evidence: each example's top answer by the fold that never saw it, with its
    # probability; right as often as the ranker is on texts it never saw.
    evidence = ranker.metrics["evidence"]
    assert len(evidence["probabilities"]) == len(evidence["right"]) == 200
    assert all(0 < p < 1 for p in evidence["probabilities"])
    assert np.mean(evidence["right"]) > 0.9


def test_the_probability_leaves_room_for_none_of_these():
    examples = synthetic_examples(150, seed=2)
    # A third of the texts' right group is not among their candidates.
    examples += [RankingExample(e.candidates, 999) for e in synthetic_examples(75, seed=3)]
    ranker = fit_ranker(examples, prior=hand_prior())
    candidates = examples[0].candidates
    probabilities = ranker.probabilities(ranker.scores(candidates.features), 0.9)
    assert probabilities is not None
    assert 0 < probabilities.sum() < 0.95
    assert (probabilities >= 0).all()
    assert LinearRanker.prior().probabilities(np.zeros(3), 0.9) is None  # not calibrated


def top_probability(ranker: LinearRanker, examples: list[RankingExample]) -> float:
    """The mean probability of each text's top group."""
    tops = []
    for e in examples:
        scores = ranker.scores(e.candidates.features)
        found = ranker.probabilities(scores, float(e.candidates.similarity.max()))
        tops.append(found[int(np.argmax(scores))])
    return float(np.mean(tops))


def test_a_calibration_on_trusted_labels_stops_doubting_right_answers():
    """Weights fitted on labels of which 40% name a wrong group still rank right, but their
    probability believes the labels; calibrated again on labels that can be trusted, the same
    weights say how often they are right."""
    rng = np.random.default_rng(5)
    noisy = []
    for e in synthetic_examples(400, seed=5):
        wrong = [g for g in e.candidates.groups.tolist() if g != e.group_id]
        group = wrong[int(rng.integers(2))] if rng.random() < 0.4 else e.group_id
        noisy.append(RankingExample(e.candidates, group))
    doubting = fit_ranker(noisy, prior=hand_prior())
    trusted, held = synthetic_examples(200, seed=6), synthetic_examples(200, seed=7)
    honest = recalibrated(doubting, trusted)

    assert accuracy(doubting, held) > 0.95  # the ranking survived the noise
    assert np.array_equal(honest.weights, doubting.weights)
    assert top_probability(doubting, held) < 0.75
    assert top_probability(honest, held) > 0.9
    with pytest.raises(ConfigError, match=f"at least {MIN_EXAMPLES}"):
        recalibrated(doubting, trusted[: MIN_EXAMPLES - 1])
    with pytest.raises(ConfigError, match="calibrated ranker"):
        recalibrated(hand_prior(), trusted)


def test_too_few_usable_verdicts_are_refused_and_the_prior_stands():
    prior = hand_prior()
    with pytest.raises(ConfigError, match=f"at least {MIN_EXAMPLES}"):
        fit_ranker(synthetic_examples(MIN_EXAMPLES - 1, seed=0), prior=prior)
    # Verdicts whose group is never among the candidates ("none of these") teach no ranking.
    missing = [RankingExample(e.candidates, None) for e in synthetic_examples(50, seed=0)]
    with pytest.raises(ConfigError):
        fit_ranker(missing, prior=prior)


def test_nan_and_infinite_features_give_finite_scores():
    ranker = fit_ranker(synthetic_examples(60, seed=4), prior=hand_prior())
    features = synthetic_examples(1, seed=5)[0].candidates.features.copy()
    features[0, 0], features[1, 3], features[2, 5] = np.nan, np.inf, -np.inf
    scores = ranker.scores(features)
    assert np.isfinite(scores).all()
    assert np.isfinite(ranker.probabilities(scores, float("nan") if False else 0.5)).all()


def test_a_ranker_and_its_history_survive_a_save_and_load(tmp_path):
    ranker = fit_ranker(synthetic_examples(60, seed=6), prior=hand_prior())
    history = VerdictHistory(
        confirmed={10: 2},
        rejected={20: 1},
        rejected_groups=np.array([20]),
        rejected_vectors=unit(1, 0)[None, :],
        group_count=4,
    )
    save_ranker(tmp_path, ranker, history)
    loaded, loaded_history = load_ranker(tmp_path)

    features = synthetic_examples(1, seed=7)[0].candidates.features
    assert np.allclose(loaded.scores(features), ranker.scores(features))
    assert loaded.temperature == ranker.temperature
    assert (loaded_history.confirmed, loaded_history.rejected) == ({10: 2}, {20: 1})
    assert np.allclose(loaded_history.rejected_vectors, history.rejected_vectors)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d.update(weights=[float("nan")] * len(FEATURES)), "finite"),
        (lambda d: d.update(features=["best"]), "features"),
        (lambda d: d.update(scale=[0.0] * len(FEATURES)), "positive"),
        (lambda d: d.update(temperature=-1.0), "temperature"),
        (lambda d: d.pop("weights"), "weights"),
    ],
)
def test_a_damaged_ranker_file_is_refused_by_name(tmp_path, damage, message):
    save_ranker(tmp_path, hand_prior(), VerdictHistory())
    raw = json.loads((tmp_path / "ranker.json").read_text())
    damage(raw)
    (tmp_path / "ranker.json").write_text(json.dumps(raw))
    with pytest.raises(ArtifactError, match=message):
        load_ranker(tmp_path)


def test_missing_or_unreadable_ranker_files_are_refused(tmp_path):
    with pytest.raises(ArtifactError):
        load_ranker(tmp_path)
    save_ranker(tmp_path, hand_prior(), VerdictHistory())
    (tmp_path / "history.npz").write_bytes(b"not a numpy file")
    with pytest.raises(ArtifactError, match="history"):
        load_ranker(tmp_path)
    save_ranker(tmp_path, hand_prior(), VerdictHistory())
    whole = (tmp_path / "history.npz").read_bytes()
    for cut in (whole[:40], b"PK\x03\x04", b""):  # a zip cut short (BadZipFile), EOFError
        (tmp_path / "history.npz").write_bytes(cut)
        with pytest.raises(ArtifactError, match="history"):
            load_ranker(tmp_path)
    (tmp_path / "ranker.json").write_text("{broken")
    with pytest.raises(ArtifactError, match="cannot be read"):
        load_ranker(tmp_path)


def test_an_exact_match_curators_contradicted_for_similar_texts_is_not_sure():
    """Texts whose exact member match curators had rejected for similar texts were elsewhere;
    the fitted ranker learns it, and no longer calls such a match likely right."""
    rng = np.random.default_rng(8)

    def example(contradicted: bool) -> RankingExample:
        features = rng.normal(0, 0.02, size=(2, len(FEATURES))).astype(np.float32)
        features[:, COLUMN["best"]] = [1.0, 0.8]
        features[0, COLUMN["member_exact"]] = 1.0
        features[:, COLUMN["rejected_near"]] = -1.0
        if contradicted:
            features[0, COLUMN["rejected_near"]] = 0.95
            features[0, COLUMN["rejections"]] = 2.0
        candidates = Candidates(np.array([1, 2]), features, features[:, 0], np.array([-1, -1]))
        return RankingExample(candidates, 2 if contradicted else 1)

    examples = [example(contradicted=i % 3 == 0) for i in range(240)]
    ranker = fit_ranker(examples, prior=hand_prior())
    for contradicted, most in ((True, 0.5), (False, 1.0)):
        candidates = example(contradicted).candidates
        probabilities = ranker.probabilities(ranker.scores(candidates.features), 1.0)
        assert probabilities[0] < most
        if not contradicted:
            assert probabilities[0] > 0.9
