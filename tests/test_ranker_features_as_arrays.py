"""The ranker's features, computed for a batch as arrays (``candidates_of_texts``), equal the
features worked out one candidate at a time from their definitions, with Python sets, on real
O*NET titles and made-up texts (other scripts, accents, emoji, texts too short for a trigram,
members deleted since the build, curators' members, excluded groups), for a batch larger than
one block of the word and trigram counting, with a lexical cache reused, starting afresh
between batches, one text at a time and shared by threads. No Django."""

from __future__ import annotations

import csv
import math
import random
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from models_app.siamese.ranker.candidates import (
    DESCRIPTION_DIGITS,
    GroupFacts,
    HitMember,
    SearchedTexts,
    TaxonomyEvidence,
    candidates_of_texts,
)
from models_app.siamese.ranker.features import FEATURES
from models_app.siamese.ranker.lexical import LexicalCache
from models_app.siamese.text import comparison_key

ONET = Path(__file__).resolve().parent.parent / "data" / "onet"
DIMENSION = 16
PER_MATCHER = 15
BY_DESCRIPTION = 5
# Features counted from words and trigrams: the same numbers exactly, not nearly.
STRING_FEATURES = (
    "member_dice",
    "member_words_query",
    "member_words_member",
    "member_exact",
    "judged_dice",
    "name_dice",
    "name_words",
    "query_words",
)
# Texts no O*NET title is like: other scripts, accents, emoji (beyond 16 bits), a dash alone
# (no word), two letters (no trigram).
ODD_TEXTS = [
    "Café Barista",
    "Straße Bauer",
    "Ingeniero de Software — Señor",
    "数据 分析师",
    "数据分析师",
    "🚀 Rocket Engineer",
    "Rocket 🚀🚀 Engineer",
    "—",
    "QA",
    "Инженер-программист",
    "مهندس برمجيات",
    "ÉCOLE teacher",
]


def trigram_set(text: str) -> set[str]:
    key = comparison_key(text)
    return {key[i : i + 3] for i in range(len(key) - 2)}


def word_set(text: str) -> set[str]:
    return set(re.findall(r"\w+", comparison_key(text)))


def dice(a: set[str], b: set[str]) -> float:
    return 2 * len(a & b) / (len(a) + len(b)) if a or b else 0.0


def reference_candidates(text, vector, hits, members, groups, excluded):
    """One text's candidates as (groups, members, similarity, {feature: values}), from the
    definitions, candidate by candidate."""
    by_source = {False: [], True: []}  # curator's member or not: its hits in order
    for member_id, score in hits:
        member = members.get(member_id)
        if member is not None and member.group_id not in excluded:
            by_source[member.curator].append((score, member_id, member.group_id))
    grouped = {}
    for curator, found in by_source.items():
        grouped[curator] = {}
        for score, member_id, group_id in found:
            grouped[curator].setdefault(group_id, []).append((score, member_id))
    products = (groups.vectors @ vector).tolist()
    cosine = {
        group_id: products[row]
        for row, group_id in enumerate(groups.ids.tolist())
        if groups.has_description[row]
    }
    # Equal to the millionth is equal (the product's last bits depend on how it is computed):
    # ties go to the group's row.
    row_of = {group_id: row for row, group_id in enumerate(groups.ids.tolist())}
    described = sorted(
        (g for g in cosine if g not in excluded),
        key=lambda g: (-np.round(np.float32(cosine[g]), DESCRIPTION_DIGITS), row_of[g]),
    )
    order = list(
        dict.fromkeys(
            [
                *list(grouped[False])[:PER_MATCHER],
                *list(grouped[True])[:PER_MATCHER],
                *described[:BY_DESCRIPTION],
            ]
        )
    )
    description_top = max([-1.0, *cosine.values()])
    names = dict(zip(groups.ids.tolist(), groups.names, strict=True))
    query_words, query_grams = word_set(text), trigram_set(text)

    rows = {name: [] for name in FEATURES}
    chosen, similarity = [], []
    for group_id in order:
        best = {}
        for curator, prefix in ((False, "member"), (True, "judged")):
            found, hits_of = by_source[curator], grouped[curator]
            top = found[0][0] if found else 0.0
            floor = found[-1][0] if found else 0.0
            mine = hits_of.get(group_id, [])
            value = mine[0][0] if mine else floor
            rows[prefix].append(value)
            rows[f"{prefix}_gap"].append(top - value)
            rows[f"{prefix}_count"].append(math.log1p(len(mine)))
            rank = list(hits_of).index(group_id) if mine else len(hits_of)
            rows[f"{prefix}_rank"].append(math.log1p(rank))
            rows[f"{prefix}_missing"].append(0.0 if mine else 1.0)
            best[prefix] = (value, mine[0][1]) if mine else None
            if curator:
                weights = [math.exp((score - top) / 0.05) for score, _, _ in found]
                share = sum(w for w, (_, _, g) in zip(weights, found, strict=True) if g == group_id)
                rows["judged_vote"].append(share / (sum(weights) or 1.0) if mine else 0.0)
            else:
                second = mine[1][0] if len(mine) > 1 else min(value, floor)
                rows["member_second"].append(second)
        member, judged = best["member"], best["judged"]
        rows["best"].append(max(member[0] if member else -1.0, judged[0] if judged else -1.0))
        similarity.append(max(rows["best"][-1], 0.0))
        judged_wins = (judged[0] if judged else -2.0) > (member[0] if member else -2.0)
        chosen.append(judged[1] if judged_wins else member[1] if member else -1)

        member_text = members[member[1]].text if member else None
        if member_text is not None:
            shared = len(query_words & word_set(member_text))
            rows["member_dice"].append(dice(query_grams, trigram_set(member_text)))
            rows["member_words_query"].append(shared / max(len(query_words), 1))
            rows["member_words_member"].append(shared / max(len(word_set(member_text)), 1))
            rows["member_exact"].append(float(comparison_key(member_text) == comparison_key(text)))
        else:
            for name in (
                "member_dice",
                "member_words_query",
                "member_words_member",
                "member_exact",
            ):
                rows[name].append(0.0)
        rows["judged_dice"].append(
            dice(query_grams, trigram_set(members[judged[1]].text)) if judged else 0.0
        )
        name = names.get(group_id)
        rows["name_dice"].append(dice(query_grams, trigram_set(name)) if name else 0.0)
        rows["name_words"].append(
            len(query_words & word_set(name)) / max(len(word_set(name)), 1) if name else 0.0
        )
        rows["query_words"].append(float(len(query_words)))
        if group_id in cosine:
            rows["description"].append(cosine[group_id])
            rows["description_gap"].append(description_top - cosine[group_id])
            rows["description_missing"].append(0.0)
        else:
            rows["description"].append(0.0)
            rows["description_gap"].append(0.0)
            rows["description_missing"].append(1.0)
        for name in ("verdicts", "verdict_share", "rejections"):
            rows[name].append(0.0)
        rows["rejected_near"].append(-1.0)
    return order, chosen, similarity, rows


def onet_rows() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(code, title) of every occupation and of every alternate title."""

    def read(name: str, column: str) -> list[tuple[str, str]]:
        with (ONET / name).open(encoding="utf-8") as handle:
            return [(row["O*NET-SOC Code"], row[column])
                    for row in csv.DictReader(handle, delimiter="\t")]  # fmt: skip

    return read("Occupation Data.txt", "Title"), read("Alternate Titles.txt", "Alternate Title")


def unit_rows(rng: np.random.Generator, count: int) -> np.ndarray:
    rows = rng.standard_normal((count, DIMENSION)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def batch():
    """A taxonomy of real O*NET titles (some made curators' members, some deleted since the
    build) and 700 texts with their hits, vectors and excluded groups."""
    rng = np.random.default_rng(44)
    pick = random.Random(44)
    occupations, titles = onet_rows()
    group_of_code = {code: number for number, (code, _) in enumerate(occupations, start=10)}
    sampled = pick.sample(titles, 3000)
    members = {
        member_id: HitMember(group_of_code[code], title, curator=member_id % 15 == 0)
        for member_id, (code, title) in enumerate(sampled, start=1)
    }
    for member_id, text in enumerate(ODD_TEXTS, start=5001):
        members[member_id] = HitMember(pick.choice(list(group_of_code.values())), text)
    deleted = [9001, 9002, 9003]  # hit, but no longer members
    groups = GroupFacts.build(
        list(group_of_code.values()),
        [title for _, title in occupations],
        unit_rows(rng, len(occupations)),
        rng.random(len(occupations)) < 0.8,
    )

    member_ids = list(members)
    by_word = {}
    for member_id, member in members.items():
        for word in word_set(member.text):
            by_word.setdefault(word, []).append(member_id)
    texts = []
    for number in range(700):
        base = members[pick.choice(member_ids)].text
        kind = number % 7
        if kind == 0:
            texts.append(base.upper())  # the member exactly, by its comparison key
        elif kind == 1:
            texts.append(f"  senior {base}  ")
        elif kind == 2 and len(base) > 4:
            cut = pick.randrange(len(base))
            texts.append(base[:cut] + base[cut + 1 :])  # a typo
        elif kind == 3:
            texts.append(pick.choice(ODD_TEXTS) + pick.choice(["", " " + base]))
        else:
            texts.append(base)
    texts[10] = texts[11]  # a text twice in the batch

    hits, excluded = [], []
    for text in texts:
        near = [m for word in word_set(text) for m in by_word.get(word, [])]
        chosen = pick.sample(near, min(len(near), 25)) + pick.sample(member_ids, 30)
        chosen = list(dict.fromkeys(chosen + pick.sample(deleted, 1)))
        scores = np.sort(rng.uniform(0.2, 1.0, len(chosen)))[::-1].round(3)  # some ties
        hits.append(list(zip(chosen, scores.tolist(), strict=True)))
        groups_hit = sorted({members[m].group_id for m in chosen if m in members})
        excluded.append(frozenset(pick.sample(groups_hit, 2)) if pick.random() < 0.1 else set())
    return texts, unit_rows(rng, len(texts)), hits, members, groups, excluded


@pytest.fixture(scope="module")
def defined(batch):
    """Each text's candidates from their definitions."""
    texts, vectors, hits, members, groups, excluded = batch
    return [
        reference_candidates(texts[i], vectors[i], hits[i], members, groups, excluded[i])
        for i in range(len(texts))
    ]


def assert_as_defined(found, defined, texts, texts_at=None) -> None:
    for i in texts_at if texts_at is not None else range(len(texts)):
        candidates = found[i] if texts_at is None else found[texts_at.index(i)]
        order, chosen, similarity, rows = defined[i]
        assert candidates.groups.tolist() == order, texts[i]
        assert candidates.members.tolist() == chosen, texts[i]
        np.testing.assert_allclose(candidates.similarity, similarity, rtol=1e-6, atol=1e-6)
        for column, name in enumerate(FEATURES):
            expected = np.array(rows[name], np.float64).astype(np.float32)
            if name in STRING_FEATURES:
                assert candidates.features[:, column].tolist() == expected.tolist(), (
                    texts[i],
                    name,
                )
            else:
                np.testing.assert_allclose(
                    candidates.features[:, column], expected, rtol=1e-6, atol=1e-6,
                    err_msg=f"{texts[i]!r}: {name}",
                )  # fmt: skip


def features_of(batch, lexical, rows=None):
    texts, vectors, hits, members, groups, excluded = batch
    rows = list(range(len(texts))) if rows is None else rows
    return candidates_of_texts(
        SearchedTexts([texts[i] for i in rows], vectors[rows], [hits[i] for i in rows], members),
        TaxonomyEvidence(groups, lexical=lexical),
        excluded=[excluded[i] for i in rows],
        per_matcher=PER_MATCHER,
        by_description=BY_DESCRIPTION,
    )


def test_a_batchs_features_are_their_definitions_candidate_by_candidate(batch, defined):
    lexical = LexicalCache()
    assert_as_defined(features_of(batch, lexical), defined, batch[0])
    # Again, every text now read from the cache.
    assert_as_defined(features_of(batch, lexical), defined, batch[0])


def test_a_cache_that_starts_afresh_between_batches_changes_no_feature(batch, defined):
    lexical = LexicalCache(size=150)
    for start in range(0, 700, 100):
        rows = list(range(start, start + 100))
        assert_as_defined(features_of(batch, lexical, rows), defined, batch[0], rows)


def test_threads_sharing_one_cache_each_get_their_texts_features(batch, defined):
    lexical = LexicalCache(size=2000)
    shares = [list(range(first, 700, 4)) for first in range(4)]
    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda rows: features_of(batch, lexical, rows), shares))
    for rows, candidates in zip(shares, found, strict=True):
        assert_as_defined(candidates, defined, batch[0], rows)


def test_texts_one_at_a_time_through_a_warm_cache_have_their_features(batch, defined):
    # As a web worker sees them: a request's text new, most of its members' texts known.
    lexical = LexicalCache()
    features_of(batch, lexical, list(range(0, 700, 2)))
    for i in [i for i in range(1, 700, 2) if i % 7 in (2, 3)]:
        assert_as_defined(features_of(batch, lexical, [i]), defined, batch[0], [i])


def test_one_text_alone_has_the_string_features_it_has_in_the_batch(batch):
    # The description's cosine is a float32 product whose last bits depend on the batch; the
    # evidence counted from words and trigrams does not.
    together = features_of(batch, LexicalCache())
    columns = [FEATURES.index(name) for name in STRING_FEATURES]
    for i in (0, 3, 10, 11, 699):
        alone = features_of(batch, LexicalCache(), [i])[0]
        assert alone.groups.tolist() == together[i].groups.tolist()
        assert (alone.features[:, columns] == together[i].features[:, columns]).all()
        np.testing.assert_allclose(alone.features, together[i].features, rtol=1e-6, atol=1e-6)
