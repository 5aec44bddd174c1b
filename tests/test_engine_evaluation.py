from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import pytest

from models_app.siamese.baselines import EncoderMatcher, TrigramMatcher, trigrams
from models_app.siamese.evaluation import (
    PRIMARY_METRIC,
    SuiteEvaluator,
    build_test_suite,
    evaluate,
    split_members,
)
from models_app.siamese.text import comparison_key

TITLES = [
    ("Java Developer", 1),
    ("Software Engineer", 1),
    ("Registered Nurse", 2),
    ("Nurse Practitioner", 2),
    ("Truck Driver", 3),
    ("Delivery Driver", 3),
    ("Sales Manager", 4),
]


def trigram_matcher() -> TrigramMatcher:
    return TrigramMatcher([t for t, _ in TITLES], [g for _, g in TITLES])


def test_the_trigram_matcher_ranks_an_exact_match_first():
    for text, label in TITLES:
        assert trigram_matcher().rank([text], 1) == [[label]]


def test_the_trigram_matcher_sends_a_typo_to_the_right_label():
    assert trigram_matcher().rank(["Registred Nurce", "Truk Drivr", "sales managr"], 1) == [
        [2],
        [3],
        [4],
    ]


def test_the_trigram_matcher_returns_distinct_labels_best_first():
    ranking = trigram_matcher().rank(["nurse driver"], 10)[0]
    assert sorted(ranking) == [1, 2, 3, 4]
    assert set(ranking[:2]) == {2, 3}


def paper_sim(query: str, candidate: str) -> int:
    """The formula as printed: sim = M - (|T_Q sym-diff T_C| - |T_Q & T_C|), M = len(Q)."""
    tq, tc = trigrams(query), trigrams(candidate)
    return len(comparison_key(query)) - (len(tq ^ tc) - len(tq & tc))


def brute_force_rank(query: str, texts: Sequence[str], labels: Sequence[int]) -> list[int]:
    best: dict[int, int] = {}
    for text, label in zip(texts, labels, strict=True):
        best[label] = max(best.get(label, -(10**9)), paper_sim(query, text))
    order = list(dict.fromkeys(labels))  # ties: first appearance
    return sorted(order, key=lambda label: (-best[label], order.index(label)))


def test_the_trigram_matcher_equals_the_papers_formula_by_brute_force():
    rng = random.Random(0)

    def word() -> str:
        return "".join(rng.choice("abcde") for _ in range(rng.randint(1, 6)))

    texts = [" ".join(word() for _ in range(rng.randint(1, 3))) for _ in range(60)]
    labels = [rng.choice([10, 3, 7, 42, 5, 8]) for _ in texts]
    queries = [" ".join(word() for _ in range(rng.randint(1, 3))) for _ in range(40)] + ["", "ab"]
    matcher = TrigramMatcher(texts, labels)
    assert matcher.rank(queries, 6) == [brute_force_rank(q, texts, labels) for q in queries]
    assert matcher.rank(queries, 2) == [brute_force_rank(q, texts, labels)[:2] for q in queries]
    for query in queries[:10]:
        offset = len(comparison_key(query)) - len(trigrams(query))  # M - |T_Q|, per query
        expected = [paper_sim(query, text) - offset for text in texts]
        assert matcher.scores(query).tolist() == expected


def test_a_matcher_with_no_candidates_ranks_nothing():
    assert TrigramMatcher([], []).rank(["nurse"], 3) == [[]]
    with pytest.raises(ValueError, match="2 texts but 1 labels"):
        TrigramMatcher(["a", "b"], [1])


class LookupEncoder:
    """Vectors from a table: a stand-in encoder whose neighbours are known in advance."""

    kind = "lookup"

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    @property
    def dim(self) -> int:
        return 2

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.asarray([self.table[t] for t in texts], dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_the_encoder_matcher_folds_members_into_labels_and_widens_the_search():
    encoder = LookupEncoder(
        {
            "a1": [1, 0],
            "a2": [1, 0.05],
            "a3": [1, 0.1],
            "a4": [1, 0.15],
            "b1": [0, 1],
            "c1": [-1, 0.2],
            "q": [1, 0.01],
        }
    )
    matcher = EncoderMatcher(
        encoder, ["a1", "a2", "a3", "a4", "b1", "c1"], [5, 5, 5, 5, 6, 7], oversample=1
    )
    # With k=2 and oversample=1 the first look sees two members, both of label 5.
    assert matcher.rank(["q"], 2) == [[5, 6]]
    assert matcher.rank(["q"], 5) == [[5, 6, 7]]
    assert matcher.rank([], 3) == []


class FixedMatcher:
    """Rankings known in advance, to check the metrics by hand."""

    def __init__(self, rankings: dict[str, list[int]]) -> None:
        self.rankings = rankings

    def rank(self, queries: Sequence[str], k: int) -> list[list[int]]:
        return [self.rankings[q][:k] for q in queries]


FIXED = FixedMatcher(
    {
        "a": [1, 2, 3],  # hit at 1
        "b": [9, 2, 3],  # target 2 at rank 2
        "c": [11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 3],  # target 3 at rank 11: a miss
        "d": [4],  # hit at 1
        "e": [6, 5],  # target 5 at rank 2
        "f": [1, 2, 3, 4, 5, 7, 8, 9, 10, 6],  # target 6 at rank 10
    }
)
FIXED_SUITE = {
    "typos": [("a", 1), ("b", 2), ("c", 3), ("d", 4)],
    "composition": [("e", 5), ("f", 6)],
    "extra_words": [],
    "verdicts": [],
}


def test_evaluate_gives_the_exact_accuracy_precision_and_mrr():
    assert evaluate(FIXED, FIXED_SUITE, k=10) == {
        "mean_accuracy": pytest.approx(0.25),
        "typos/accuracy": 0.5,
        "typos/p@1": 0.5,
        "typos/p@10": 0.75,
        "typos/mrr": pytest.approx((1 + 0.5 + 0 + 1) / 4),
        "typos/n": 4.0,
        "composition/accuracy": 0.0,
        "composition/p@1": 0.0,
        "composition/p@10": 1.0,
        "composition/mrr": pytest.approx((0.5 + 0.1) / 2),
        "composition/n": 2.0,
    }


def test_evaluate_only_counts_ranks_within_k():
    scores = evaluate(FIXED, FIXED_SUITE, k=5)
    assert "typos/p@10" not in scores
    assert scores["composition/mrr"] == pytest.approx(0.25)
    assert SuiteEvaluator(FIXED_SUITE, k=5)(FIXED) == scores
    assert SuiteEvaluator.primary_metric == PRIMARY_METRIC == "mean_accuracy"


def test_a_suite_without_cases_cannot_be_evaluated():
    with pytest.raises(ValueError, match="no cases"):
        evaluate(FIXED, {"typos": [], "verdicts": []})


MEMBERS = [
    (1, "Senior Java Developer"),
    (1, "Java Developer"),
    (1, "Java Programmer"),
    (1, "Python Developer"),
    (1, "Software Engineer"),
    (2, "Registered Nurse"),
    (2, "ICU Nurse"),
    (2, "Nurse Practitioner"),
    (3, "Truck Driver"),
    (3, "Delivery Driver"),
    (3, "Forklift Operator"),
    (4, "Zebra Keeper"),  # listed under two groups: no right answer
    (5, "Zebra Keeper"),
    (5, "Zoo Keeper"),
    (4, "Human Resources Manager"),
    (4, "Assistant Manager"),
]


def test_the_suite_is_the_same_for_a_seed_and_changes_with_it():
    suite = build_test_suite(MEMBERS, seed=3, size=8)
    assert suite == build_test_suite(MEMBERS, seed=3, size=8)
    assert suite != build_test_suite(MEMBERS, seed=4, size=8)
    assert list(suite) == ["typos", "composition", "extra_words", "verdicts"]
    assert len(suite["typos"]) == len(suite["extra_words"]) == 8


def test_the_suite_builds_each_set_from_the_taxonomy():
    suite = build_test_suite(MEMBERS, seed=0, size=100, verdicts=[("RN nights", 2)])
    unambiguous = [(g, t) for g, t in MEMBERS if t != "Zebra Keeper"]
    known = {comparison_key(t) for _, t in MEMBERS}
    assert sorted(g for _, g in suite["typos"]) == sorted(g for g, _ in unambiguous)
    assert all(comparison_key(q) not in known for q, _ in suite["typos"])
    assert all(
        any(t in q and t != q for g2, t in unambiguous if g2 == g) for q, g in suite["extra_words"]
    )
    assert suite["composition"]
    assert all(comparison_key(q) not in known for q, _ in suite["composition"])
    assert suite["verdicts"] == [("RN nights", 2)]


def test_composition_swaps_in_a_synonym_induced_from_the_same_group():
    members = [(1, "Pipe Welder"), (1, "Steel Welder"), (1, "Pipe Fitter"), (2, "Baker")]
    # Induced in group 1: (pipe, steel) and (fitter, welder); the only new title is Steel Fitter.
    cases = [build_test_suite(members, seed=s)["composition"] for s in range(10)]
    assert all(len(c) <= 1 for c in cases)
    assert {case for c in cases for case in c} == {("Steel Fitter", 1)}


def test_composition_swaps_in_a_synonym_from_the_manual_list():
    for seed in range(5):
        suite = build_test_suite([(1, "Senior Welder"), (2, "Baker")], seed=seed)
        assert len(suite["composition"]) == 1
        assert suite["composition"][0] in {("Sr. Welder", 1), ("Sr Welder", 1), ("Snr Welder", 1)}


def test_strings_listed_under_two_groups_make_no_test_cases_unless_asked():
    def zebra_cases(suite):
        return [q for q, _ in suite["extra_words"] if "Zebra Keeper" in q]

    assert zebra_cases(build_test_suite(MEMBERS, size=100)) == []
    assert len(zebra_cases(build_test_suite(MEMBERS, size=100, unambiguous_only=False))) == 2


def test_the_trigram_baseline_runs_through_the_suite():
    suite = build_test_suite(MEMBERS, seed=0, size=100)
    matcher = TrigramMatcher([t for _, t in MEMBERS], [g for g, _ in MEMBERS])
    scores = evaluate(matcher, suite)
    assert scores["typos/accuracy"] >= 0.8
    assert 0 < scores[PRIMARY_METRIC] <= 1


def test_split_members_holds_out_whole_strings_and_keeps_every_group():
    members = [(g, f"title {g} {i}") for g in range(20) for i in range(g % 4 + 1)]
    members += [(0, "Title 0 0"), (7, "title 7 0")]  # duplicates travel with their string
    train, validation = split_members(members, validation_share=0.3, seed=1)
    assert (train, validation) == split_members(members, validation_share=0.3, seed=1)
    assert sorted(train + validation) == sorted(members)
    train_keys = {comparison_key(t) for _, t in train}
    assert not train_keys & {comparison_key(t) for _, t in validation}
    assert {g for g, _ in train} == {g for g, _ in members}
    distinct = len({comparison_key(t) for _, t in members})
    held = len({comparison_key(t) for _, t in validation})
    assert held == round(0.3 * distinct)
    assert validation != split_members(members, validation_share=0.3, seed=2)[1]
