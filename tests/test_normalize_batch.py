"""The lean batch path: a text gets the same answer inside a batch of any size as alone, and a
batch costs a fixed number of queries whatever its size."""

from __future__ import annotations

import math

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotations.models import Group, Member
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.serving.engines import HitsCache, live_engine
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.siamese import exact_cosines
from models_app.siamese.baselines import TrigramMatcher
from models_app.siamese.exact_cosines import (
    ExactCosines,
    cosines,
    distinct_rows,
    kth_best_at_least,
)
from models_app.siamese.index import MemberIndex
from models_app.siamese.search import MemberSearch, SearchConfig, best_first
from models_app.siamese.text import comparison_key

WORDS = ["java", "nurse", "barista", "driver", "truck", "senior", "icu", "coffee", "tax",
         "staff", "night", "lead", "python", "haul", "accountant", "shift"]  # fmt: skip


def random_members(size: int, dim: int, seed: int):
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(1, 4))) for _ in range(size)]
    vectors = rng.standard_normal((size, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return texts, vectors


def same_hits(first, second) -> bool:
    """The same members in the same order, each scored the same to 1e-6."""
    return [m for m, _ in first] == [m for m, _ in second] and all(
        abs(a - b) <= 1e-6 for (_, a), (_, b) in zip(first, second, strict=True)
    )


@pytest.mark.parametrize("size", [40, 5000])  # both sides of the one-query-at-a-time cut
@pytest.mark.parametrize("weight", [0.0, 0.3])
def test_a_query_gets_the_same_hits_alone_as_in_a_batch(size, weight):
    texts, vectors = random_members(size, 32, seed=size)
    ids = np.arange(1000, 1000 + size) * 2
    index = MemberIndex.build(vectors, ids, kind="flat")
    search = MemberSearch(index, texts, SearchConfig(lexical_weight=weight))
    queries, query_vectors = random_members(300, 32, seed=7)  # two chunks, the last of 44
    extra_texts, extra_vectors = random_members(3, 32, seed=8)
    extra = {"extra_ids": np.array([5, 7, 9]), "extra_texts": extra_texts,
             "extra_vectors": extra_vectors}  # fmt: skip
    batch = search.search(queries, query_vectors, 24, **extra)
    alone = [search.search([q], query_vectors[i : i + 1], 24, **extra)[0]
             for i, q in enumerate(queries)]  # fmt: skip
    assert all(same_hits(b, a) for b, a in zip(batch, alone, strict=True))


@pytest.mark.parametrize("dim", [16, 384])
def test_each_cosine_is_the_dot_product_to_a_millionth(dim):
    _, members = random_members(300, dim, seed=dim)
    _, queries = random_members(5, dim, seed=dim + 1)
    found = np.vstack([cosines(queries, members), cosines(queries[:1], members)])
    exact = [[math.fsum(np.float64(q) * m) for m in members.astype(np.float64)]
             for q in np.vstack([queries, queries[:1]]).astype(np.float64)]  # fmt: skip
    assert np.abs(found - np.array(exact)).max() <= 1e-6


@pytest.mark.parametrize("collide", [False, True])
def test_distinct_rows_group_exactly_the_identical_vectors(collide, monkeypatch):
    """Identical rows are one distinct vector, rows a hair apart are not; a hash that puts
    different rows together (every row at one hash, forced here) falls back to comparing the
    rows' bytes and groups them the same."""
    _, base = random_members(400, 64, seed=3)
    rng = np.random.default_rng(4)
    members = np.concatenate([base, base + 1e-7 * rng.standard_normal(base.shape), base[:50]])
    members = members.astype(np.float32)[rng.permutation(850)]
    if collide:
        monkeypatch.setattr(
            exact_cosines, "row_hashes", lambda words: np.zeros(len(words), np.uint64)
        )
    first, vector_of = distinct_rows(members)
    assert len(first) == 800
    assert np.array_equal(members[first][vector_of], members)
    for row, distinct in enumerate(vector_of):  # the first row of its vector
        same = np.flatnonzero((members == members[row]).all(axis=1))
        assert first[distinct] == same.min()


def test_the_near_set_is_every_member_at_or_above_the_reach_th_best():
    # Members in threes, two of them identical and one a hair apart: the threshold often falls
    # inside a tie, where every tied member must be kept.
    _, base = random_members(1500, 128, seed=5)
    rng = np.random.default_rng(6)
    members = np.concatenate([base, base + 1e-7 * rng.standard_normal(base.shape), base])
    exact = ExactCosines(members.astype(np.float32))
    _, queries = random_members(40, 128, seed=9)
    queries[:20] = members[:20]
    every = exact.all(queries)
    for reach in (1, 7, 40):
        rows, positions, values, threshold = exact.near(queries, reach)
        for row in range(len(queries)):
            expected = np.sort(every[row])[::-1][reach - 1]
            assert threshold[row] == expected
            mine = positions[rows == row]
            assert sorted(mine.tolist()) == np.flatnonzero(every[row] >= expected).tolist()
            assert values[rows == row].tolist() == every[row, mine].tolist()


@pytest.mark.parametrize("size", [20, 1000, 1007])
def test_the_kth_best_bound_is_never_above_the_kth_best(size):
    rng = np.random.default_rng(size)
    values = rng.standard_normal((30, size)).astype(np.float32)
    # Rows whose best values all fall in one strided set (columns 0, width, 2 * width, ...),
    # where one maximum stands for them all, and rows of ties.
    width = size // 16
    if width:
        values[:10, ::width] += 5.0
    values[10:15] = 1.0
    for k in (1, 5, 16, 17):
        bound = kth_best_at_least(values, k)
        kth = np.sort(values, axis=1)[:, -k]
        assert (bound <= kth).all()
        assert (bound[10:15] == 1.0).all()
        # Where values are distinct, no more than the k sets' members reach it (16 each).
        reaching = (values >= bound[:, None]).sum(axis=1)
        assert (np.delete(reaching, range(10, 15)) <= 16 * k).all()


@pytest.mark.parametrize("window", [0.03, 0.3])
def test_the_near_set_shortcut_answers_as_scoring_every_member(window):
    # Members in small clusters of identical vectors: a query's nearest members tie in
    # threes, so the near set's threshold often falls inside a tie and the shortcut must
    # answer exactly as scoring all 6,000 members does.
    texts, vectors = random_members(2000, 16, seed=3)
    texts = [f"{text} {copy}" for copy in range(3) for text in texts]
    vectors = np.concatenate([vectors] * 3)
    ids = np.arange(1, len(texts) + 1)
    search = MemberSearch(
        MemberIndex.build(vectors, ids, kind="flat"),
        texts,
        SearchConfig(lexical_weight=0.3, lexical_window=window),
    )
    queries, query_vectors = random_members(200, 16, seed=4)
    query_vectors[:100] = vectors[:100]  # half of them on a member: a tie of three at the top
    # Members added since the build, one of them on a query's nearest members.
    extra_texts, extra_vectors = random_members(3, 16, seed=5)
    extra_vectors[0] = vectors[50]
    extra_ids = np.array([90001, 90002, 90003])
    for extra in ((np.zeros(0, np.int64), [], np.zeros((0, 16), np.float32)),
                  (extra_ids, extra_texts, extra_vectors)):  # fmt: skip
        terms = search._extra_terms(queries, query_vectors, extra[1], extra[2])
        for depth in (1, 5, 24):
            fast = search.search(queries, query_vectors, depth, extra_ids=extra[0],
                                 extra_texts=extra[1], extra_vectors=extra[2])  # fmt: skip
            cosine = search.exact.all(query_vectors)  # every member's, exact
            every = search._hybrid_rows(queries, cosine, terms, depth, extra[0])
            every = [sorted(hits, key=best_first)[:depth] for hits in every]
            # The same members in the same order; a score's last bits depend on the shape of
            # the product that computed it (a chunk of queries, or all of them), so to 1e-6.
            assert all(same_hits(f, e) for f, e in zip(fast, every, strict=True))


def test_pair_scores_are_the_trigram_scores_of_those_pairs():
    texts, _ = random_members(200, 4, seed=1)
    matcher = TrigramMatcher(texts, list(range(len(texts))))
    queries = ["senior java nurse", "zzz", "coffee barista night shift", ""]
    rows = np.array([0, 0, 1, 2, 2, 2, 3])
    candidates = np.array([5, 17, 5, 0, 199, 42, 9])
    expected = [int(matcher.scores(queries[r])[c]) for r, c in zip(rows, candidates, strict=True)]
    assert matcher.pair_scores(queries, rows, candidates).tolist() == expected


def test_a_mixed_batch_answers_each_text_as_it_is_answered_alone(tiny_taxonomy, curator):
    taxonomy = tiny_taxonomy
    # A curator's verdict on one text, a rejected group on another, a member added since the
    # build: each changes what the batch must answer for that text only.
    (confirmed,) = inputs_submit(taxonomy=taxonomy, texts=["Java Wizard"], source="api")
    group = Group.objects.get(taxonomy=taxonomy, code="35-3023")
    judgement_create(review_item=confirmed, user=curator, verdict="reassign", group=group)
    (rejected,) = inputs_submit(taxonomy=taxonomy, texts=["Charge Nurse Lead"], source="api")
    judgement_create(review_item=rejected, user=curator, verdict="false_match")
    Member.objects.create(
        taxonomy=taxonomy,
        group=Group.objects.get(taxonomy=taxonomy, code="53-3032"),
        text="Ice Road Trucker",
        normalized_text=comparison_key("Ice Road Trucker"),
    )
    texts = ["Java Wizard", "Charge Nurse Lead", "ice road trucker", "Senior Java Engineer",
             "java wizard", "zzqx unknown words", "Java Wizard", "Tax Accountant II",
             "barista", "Long Haul Truck Driver"]  # fmt: skip
    batch = [result.as_dict() for result in rank_taxonomy_groups(taxonomy, texts, k=3)]
    alone = [rank_taxonomy_groups(taxonomy, [text], k=3)[0].as_dict() for text in texts]
    assert batch == alone
    assert batch[0]["source"] == batch[4]["source"] == "curator"
    assert batch[0] == batch[6]  # a repeated text is answered once and given to both
    assert batch[2]["groups"][0]["member"] == "Ice Road Trucker"
    rejected_group = rejected.top_group.id
    assert rejected_group not in [g["group_id"] for g in batch[1]["groups"]]


def test_a_batch_costs_the_same_queries_whatever_its_size(tiny_taxonomy, curator):
    inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Wizard"], source="api")
    rank_taxonomy_groups(tiny_taxonomy, ["warm up"], k=5)  # the live engine loads once per process
    counts = []
    for size in (1, 10, 300):
        texts = [f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7) % len(WORDS)]} {i}" for i in range(size)]
        with CaptureQueriesContext(connection) as queries:
            rank_taxonomy_groups(tiny_taxonomy, texts, k=5)
        counts.append(len(queries))
    assert counts[0] == counts[1] == counts[2]


def test_a_batch_of_a_thousand_texts_stays_under_ten_queries(
    tiny_taxonomy, django_assert_max_num_queries
):
    rank_taxonomy_groups(tiny_taxonomy, ["warm up"], k=5)
    texts = [f"nurse {i}" for i in range(1000)]
    with django_assert_max_num_queries(10):
        rank_taxonomy_groups(tiny_taxonomy, texts, k=5)


def test_cached_hits_are_the_hits_a_search_gives(tiny_taxonomy):
    engine = live_engine(tiny_taxonomy)
    cache = HitsCache(size=3)
    texts = ["icu nurse", "java dev", "barista", "icu nurse", "truck", "accountant", "java dev"]
    for start in range(0, len(texts), 2):  # batches that see texts again, past the cache's size
        batch = texts[start : start + 2]
        cached = engine.nearest_members(batch, 16, cache=cache)
        found = engine.nearest_members(batch, 16)
        assert all(same_hits(c, f) for c, f in zip(cached, found, strict=True))
    assert len(cache._hits) == 3


def test_a_cached_text_in_a_batch_of_new_ones_is_answered_though_they_push_it_out(tiny_taxonomy):
    """A bulk job's later chunk: one title seen long ago, the rest new. Putting the new ones in
    drops the least recently used, which is that very title: it is read first."""
    engine = live_engine(tiny_taxonomy)
    cache = HitsCache(size=3)
    engine.nearest_members(["icu nurse", "java dev", "barista"], 16, cache=cache)
    batch = ["icu nurse", "truck", "accountant", "tax clerk"]
    answered = rank_taxonomy_groups(tiny_taxonomy, batch, k=2, engine=engine, hits_cache=cache)
    alone = rank_taxonomy_groups(tiny_taxonomy, batch, k=2, engine=engine)
    assert [[g.group_id for g in a.groups] for a in answered] == [
        [g.group_id for g in a.groups] for a in alone
    ]
    assert len(cache._hits) == 3
