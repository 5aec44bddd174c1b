from __future__ import annotations

import numpy as np
import pytest

from models_app.siamese.configs import ConfigError
from models_app.siamese.encoders import fit_encoder
from models_app.siamese.hybrid_matcher import HybridMatcher
from models_app.siamese.index import MemberIndex
from models_app.siamese.search import MemberSearch, SearchConfig
from models_app.siamese.specs import parse_model_spec, parse_search_config

TITLES = [
    "Java Developer",
    "Software Developer",
    "Registered Nurse",
    "ICU Nurse",
    "Barista",
    "Coffee Shop Barista",
    "Truck Driver",
    "Delivery Driver",
]
LABELS = [0, 0, 1, 1, 2, 2, 3, 3]


@pytest.fixture(scope="module")
def encoder():
    return fit_encoder(TITLES, {"dim": 6, "min_df": 1})


def build(encoder, weight: float, kind: str = "flat") -> MemberSearch:
    ids = np.arange(100, 100 + len(TITLES))
    index = MemberIndex.build(encoder.encode(TITLES), ids, kind=kind, nlist=2, nprobe=1)
    return MemberSearch(index, TITLES, SearchConfig(lexical_weight=weight))


def test_without_the_lexical_term_it_is_the_index_search(encoder):
    search = build(encoder, 0.0)
    vectors = encoder.encode(["java developer"])
    hits = search.search(["java developer"], vectors, 3)[0]
    scores, ids = search.index.search(vectors, 3)
    # The same members; scores to 1e-6 (FAISS and numpy's BLAS sum in another order).
    assert [member for member, _ in hits] == ids[0].tolist()
    assert [score for _, score in hits] == pytest.approx(scores[0].tolist(), abs=1e-6)


def test_the_lexical_term_scores_the_best_trigram_match_one(encoder):
    search = build(encoder, 1.0)  # lexical only
    query = "Urgent!! barista wanted, Lisbon, 30h/week"
    hits = search.search([query], encoder.encode([query]), 2)[0]
    assert hits[0] == (104, 1.0)  # "Barista": every trigram of it is in the query


def test_scores_combine_as_configured(encoder):
    query = "icu nurse"
    vector = encoder.encode([query])[0]
    mixed = dict(build(encoder, 0.3).search([query], vector[None, :], 8)[0])
    cosine = dict(build(encoder, 0.0).search([query], vector[None, :], 8)[0])
    lexical = dict(build(encoder, 1.0).search([query], vector[None, :], 8)[0])
    for member_id, score in mixed.items():
        assert score == pytest.approx(0.7 * cosine[member_id] + 0.3 * lexical[member_id], abs=1e-5)


def test_members_added_since_the_build_are_scored_the_same_way(encoder):
    search = build(encoder, 0.3)
    query = "latte art barista"
    extra_vectors = encoder.encode(["Latte Art Barista"])
    hits = search.search(
        [query], encoder.encode([query]), 3,
        extra_ids=np.array([999]), extra_texts=["Latte Art Barista"], extra_vectors=extra_vectors,
    )[0]  # fmt: skip
    assert hits[0][0] == 999
    assert hits[0][1] == pytest.approx(1.0, abs=1e-5)


# One title under two groups (ids 305 and 201), as O*NET lists many alternate titles under
# several occupations: both members score exactly alike for any query.
SHARED_TEXTS = ["Ship Rigger", "Welder", "Ship Rigger", "Rigger Helper", "Java Developer", "Nurse"]
SHARED_IDS = np.array([305, 104, 201, 150, 111, 122])


@pytest.fixture(scope="module")
def shared_encoder():
    return fit_encoder(SHARED_TEXTS, {"dim": 4, "min_df": 1})


def shared_search(encoder, rows: list[int], weight: float) -> MemberSearch:
    vectors = encoder.encode([SHARED_TEXTS[i] for i in rows])
    index = MemberIndex.build(vectors, SHARED_IDS[rows], kind="flat")
    return MemberSearch(index, [SHARED_TEXTS[i] for i in rows], SearchConfig(lexical_weight=weight))


@pytest.mark.parametrize("weight", [0.0, 0.3])
def test_members_that_score_alike_come_lowest_id_first_whatever_the_index_holds(
    shared_encoder, weight
):
    query = ["ship rigger wanted (m/f/d)"]
    vector = shared_encoder.encode(query)
    as_built = shared_search(shared_encoder, [0, 1, 2, 3, 4, 5], weight)
    reversed_rows = shared_search(shared_encoder, [5, 4, 3, 2, 1, 0], weight)
    # 201 added since the build, scored beside the index.
    added_later = shared_search(shared_encoder, [0, 1, 3, 4, 5], weight)
    found = [
        as_built.search(query, vector, 6)[0],
        reversed_rows.search(query, vector, 6)[0],
        added_later.search(
            query, vector, 6,
            extra_ids=SHARED_IDS[[2]], extra_texts=[SHARED_TEXTS[2]],
            extra_vectors=shared_encoder.encode([SHARED_TEXTS[2]]),
        )[0],
    ]  # fmt: skip
    (first, second), score = [m for m, _ in found[0][:2]], found[0][0][1]
    assert (first, second) == (201, 305) and found[0][1][1] == score  # a tie, lower id first
    assert found[1] == found[0]
    assert [m for m, _ in found[2]] == [m for m, _ in found[0]]
    assert [s for _, s in found[2]] == pytest.approx([s for _, s in found[0]], abs=1e-6)
    # A depth that keeps one of the tied members keeps the same one, whatever the order.
    for search in (as_built, reversed_rows):
        assert [m for m, _ in search.search(query, vector, 1)[0]] == [201]
    assert as_built.search(query, vector, 0) == [[]]


def test_an_ivf_index_reranks_its_candidates_with_the_lexical_term(encoder):
    query = "coffee shop barista"
    flat = build(encoder, 0.3).search([query], encoder.encode([query]), 3)[0]
    ivf = build(encoder, 0.3, kind="ivf").search([query], encoder.encode([query]), 3)[0]
    assert ivf[0][0] == flat[0][0] == 105


def test_the_hybrid_matcher_ranks_groups(encoder):
    matcher = HybridMatcher(encoder, TITLES, LABELS, config=SearchConfig(lexical_weight=0.3))
    ranked = matcher.rank(["Sr. Barista (m/f/d) Berlin", "truck drivr"], 2)
    assert [row[0] for row in ranked] == [2, 3]
    assert all(len(set(row)) == 2 for row in ranked)


def test_the_hybrid_matcher_names_the_member_behind_each_group(encoder):
    matcher = HybridMatcher(encoder, TITLES, LABELS, config=SearchConfig(lexical_weight=0.3))
    (hits,) = matcher.rank_hits(["truck drivr"], 2)
    assert [hit.group_id for hit in hits] == matcher.rank(["truck drivr"], 2)[0]
    # Each group's evidence is one of its own members, and the best scores first.
    assert all(LABELS[hit.member_id] == hit.group_id for hit in hits)
    assert hits[0].score >= hits[1].score
    assert matcher.vectors.shape == (len(TITLES), encoder.dim)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"search": {"lexical_weight": 2}}, "lexical_weight must be in"),
        ({"search": {"lexical_weight": "high"}}, "must be a number"),
        ({"search": {"boost": 1}}, "unknown search option"),
        ({"search": []}, "search must be a JSON object"),
    ],
)
def test_bad_search_settings_are_refused(raw, message):
    with pytest.raises(ConfigError, match=message):
        parse_model_spec(raw)


def test_a_version_stored_without_search_settings_gets_the_default():
    assert parse_search_config({"encoder": {}}).lexical_weight == SearchConfig().lexical_weight
    assert parse_search_config({"search": {"lexical_weight": 0.0}}).lexical_weight == 0.0


def _two_member_search(window: float) -> MemberSearch:
    # Hand-made unit vectors, so the embedding's opinion is exact: member 1 along x, member 2
    # along y.
    vectors = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    index = MemberIndex.build(vectors, np.array([1, 2]), kind="flat")
    config = SearchConfig(lexical_weight=0.3, lexical_window=window)
    return MemberSearch(index, ["Java Developer", "Coffee Expert"], config)


def _query_vector(cos_java: float, cos_coffee: float) -> np.ndarray:
    return np.array([[cos_java, cos_coffee]], dtype=np.float32)


QUERY = "Java Developer wanted"  # every trigram of "Java Developer" is in it, few of the other's


def test_the_trigram_term_does_not_override_a_clear_embedding_answer():
    # The embedding (say, fine-tuned on a curator's correction) puts the query with "Coffee
    # Expert" well ahead; the string still overlaps "Java Developer".
    vector = _query_vector(0.5, 0.8)
    windowed = _two_member_search(0.03).search([QUERY], vector, 2)[0]
    assert windowed[0][0] == 2
    assert dict(windowed)[1] == pytest.approx(0.7 * 0.5)  # no lexical bonus outside the window
    # Without a window (2: every member) the trigram bonus overturns it.
    unwindowed = _two_member_search(2.0).search([QUERY], vector, 2)[0]
    assert unwindowed[0] == (1, pytest.approx(0.7 * 0.5 + 0.3))


def test_the_trigram_term_breaks_a_near_tie_of_the_embedding():
    vector = _query_vector(0.79, 0.8)  # within 0.03 of each other
    hits = _two_member_search(0.03).search([QUERY], vector, 2)[0]
    assert hits[0] == (1, pytest.approx(0.7 * 0.79 + 0.3))


@pytest.mark.parametrize("window", [-0.1, 2.5, "wide"])
def test_a_lexical_window_outside_its_range_is_refused(window):
    with pytest.raises(ConfigError, match="lexical_window"):
        SearchConfig(lexical_window=window)


@pytest.mark.parametrize("weight", [0.0, 0.3])
def test_an_empty_index_finds_only_the_members_added_since_its_build(shared_encoder, weight):
    empty = MemberIndex.build(
        np.zeros((0, shared_encoder.dim), np.float32), np.zeros(0, np.int64), kind="flat"
    )
    search = MemberSearch(empty, [], SearchConfig(lexical_weight=weight))
    query = ["welder"]
    found = search.search(
        query, shared_encoder.encode(query), 3,
        extra_ids=np.array([104]), extra_texts=["Welder"],
        extra_vectors=shared_encoder.encode(["Welder"]),
    )  # fmt: skip
    assert [[m for m, _ in hits] for hits in found] == [[104]]
    assert search.search(query, shared_encoder.encode(query), 3) == [[]]
