"""A text's candidate groups and the evidence of each: the ranker's features.

Retrieval proposes, the ranker decides. A text's candidates are the union of each matcher's best
groups: the served embedding's nearest taxonomy members, curators' members (texts judged before),
and the groups whose description is nearest. Each (text, group) candidate gets a row of features
(``FEATURES``): how well each matcher's best member of the group scores and ranks, how far it is
behind the text's best, the words and trigrams the text shares with it, the description's
similarity, and what verdicts said of the group before. Serving and fitting compute them with
the same function, ``candidates_of_texts``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from models_app.siamese.baselines import trigrams
from models_app.siamese.configs import ConfigError
from models_app.siamese.text import comparison_key

_WORD = re.compile(r"\w+")
# A curator's judged texts vote for their groups with weight exp((cosine - best) / this).
_VOTE_TEMPERATURE = 0.05

FEATURES: tuple[str, ...] = (
    # The group's best member of any source: what a group scored before the ranker.
    "best",
    # Taxonomy and admin members in the served embedding's hits.
    "member",
    "member_gap",
    "member_second",
    "member_count",
    "member_rank",
    "member_missing",
    "member_dice",
    "member_words_query",
    "member_words_member",
    "member_exact",
    # Curators' members: texts judged before, put in this group.
    "judged",
    "judged_gap",
    "judged_count",
    "judged_rank",
    "judged_missing",
    "judged_dice",
    "judged_vote",
    # The group's description, in the served embedding.
    "description",
    "description_gap",
    "description_missing",
    # The group's name, by string overlap.
    "name_dice",
    "name_words",
    # The text itself.
    "query_words",
    # What verdicts said of the group before the ranker was fitted.
    "verdicts",
    "verdict_share",
    "rejections",
    "rejected_near",
)
# What a stored ranker names to say which features it reads: the names, and a revision to move
# when a feature keeps its name but is computed differently. A ranker of another set is never
# served; it is due for a refit at once.
FEATURE_REVISION = 1
FEATURE_SET = f"r{FEATURE_REVISION}-" + hashlib.sha256(",".join(FEATURES).encode()).hexdigest()[:12]


def words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(comparison_key(text)))


def dice(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    return 2 * len(a & b) / (len(a) + len(b)) if a or b else 0.0


class HitMember(NamedTuple):
    """What a hit member is: its group, its text, and whether a curator's verdict put it there.
    A tuple: a batch's hits make tens of thousands."""

    group_id: int
    text: str
    curator: bool = False


@dataclass
class GroupFacts:
    """Each group's name and description vector (in the served embedding): ``ids`` (G,),
    ``vectors`` (G, D) unit rows, zero where the group has no description."""

    ids: np.ndarray
    names: list[str]
    vectors: np.ndarray
    has_description: np.ndarray

    def __post_init__(self) -> None:
        self.row_of = {int(group_id): row for row, group_id in enumerate(self.ids.tolist())}
        self._name_words = [words(name) for name in self.names]
        self._name_grams = [frozenset(trigrams(name)) for name in self.names]

    @classmethod
    def build(cls, ids, names, vectors, has_description) -> GroupFacts:
        ids = np.asarray(ids, dtype=np.int64)
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(ids) or len(names) != len(ids):
            raise ConfigError("group facts need one name and one vector a group")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        return cls(ids, list(names), vectors, np.asarray(has_description, dtype=bool))


@dataclass
class VerdictHistory:
    """What the taxonomy's verdicts said of each group when a ranker was fitted: how many texts
    curators put in it, how many times it was the wrong answer, and the vectors of the texts it
    was wrong for (in the served embedding)."""

    confirmed: dict[int, int] = field(default_factory=dict)
    rejected: dict[int, int] = field(default_factory=dict)
    rejected_groups: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    rejected_vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    group_count: int = 1

    @property
    def total(self) -> int:
        return sum(self.confirmed.values())

    def by_group(self) -> tuple[np.ndarray, np.ndarray]:
        """The rejected rows in order of their group, and those groups: worked out once."""
        found = getattr(self, "_by_group", None)
        if found is None:
            order = np.argsort(self.rejected_groups, kind="stable")
            found = (order, self.rejected_groups[order])
            self._by_group = found
        return found


@dataclass(frozen=True)
class OwnVerdict:
    """The verdict a training example comes from, left out of the history it is measured
    against: its group's count, and its rows among the rejected texts."""

    group_id: int | None
    rejected_rows: tuple[int, ...] = ()


@dataclass
class Candidates:
    """One text's candidate groups: ``groups`` (C,), ``features`` (C, F) in ``FEATURES`` order,
    each group's ``similarity`` (its best member's score: what it scored before the ranker,
    0 for a group proposed by its description alone) and ``members`` (that member's id, -1)."""

    groups: np.ndarray
    features: np.ndarray
    similarity: np.ndarray
    members: np.ndarray

    def __len__(self) -> int:
        return len(self.groups)


class LexicalCache:
    """Each text's words, trigrams and comparison key, worked out once: a member's text is read
    again by every query that hits it. Bounded: past ``size`` texts it starts afresh."""

    def __init__(self, size: int = 200_000) -> None:
        self.size = size
        self._found: dict[str, tuple[frozenset[str], frozenset[str], str]] = {}

    def __call__(self, text: str) -> tuple[frozenset[str], frozenset[str], str]:
        found = self._found.get(text)
        if found is None:
            if len(self._found) >= self.size:
                self._found.clear()
            key = comparison_key(text)
            found = (
                frozenset(_WORD.findall(key)),
                frozenset([key[i : i + 3] for i in range(len(key) - 2)]),  # a list: faster
                key,
            )
            self._found[text] = found
        return found


def candidate_features(
    text: str,
    vector: np.ndarray,
    hits: Sequence[tuple[int, float]],
    members: Mapping[int, HitMember],
    *,
    excluded: frozenset[int] | set[int] = frozenset(),
    own: OwnVerdict | None = None,
    **options,
) -> Candidates:
    """``candidates_of_texts`` for one text."""
    (found,) = candidates_of_texts(
        [text], np.asarray(vector)[None, :], [hits], members,
        excluded=[excluded], own=[own], **options,
    )  # fmt: skip
    return found


@dataclass
class _Source:
    """One source's hits of a batch of texts folded into (text, group) pairs: each pair's best
    score and member, second score, hit count and rank among the text's groups; per text its
    first and last score and how many groups it has."""

    keys: np.ndarray  # (U,) text * width + group, sorted
    best: np.ndarray
    member: np.ndarray
    second: np.ndarray  # nan: a single hit
    count: np.ndarray
    rank: np.ndarray
    vote: np.ndarray  # the pair's share of its text's votes (curators' members)
    top: np.ndarray  # (Q,) 0 where a text has no hit of this source
    floor: np.ndarray
    groups_of_text: np.ndarray  # (Q,)
    ranked: list[list[int]]  # per text its groups, best first

    @classmethod
    def fold(cls, q, group, score, member, width: int, texts: int) -> _Source:
        key = q * width + group
        keys, first, inverse, count = np.unique(
            key, return_index=True, return_inverse=True, return_counts=True
        )
        order = np.argsort(key, kind="stable")  # each pair's hits in their order
        starts = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int64)
        second = np.full(len(keys), np.nan)
        twice = count > 1
        second[twice] = score[order[starts[twice] + 1]]
        top, floor = np.zeros(texts), np.zeros(texts)
        if len(q):
            # Hits come best first: a text's first hit is its top, its last its floor.
            text_first = np.unique(q, return_index=True)[1]
            text_last = len(q) - 1 - np.unique(q[::-1], return_index=True)[1]
            top[q[text_first]] = score[text_first]
            floor[q[text_last]] = score[text_last]
        weight = np.exp((score - top[q]) / _VOTE_TEMPERATURE)
        totals = np.bincount(q, weights=weight, minlength=texts)
        totals[totals == 0] = 1.0
        vote = np.bincount(inverse, weights=weight, minlength=len(keys)) / totals[keys // width]
        # Rank: a text's groups in the order of their best (first) hit.
        text_of = keys // width
        by_rank = np.lexsort((first, text_of))
        groups_of_text = np.bincount(text_of, minlength=texts)
        block = np.concatenate([[0], np.cumsum(groups_of_text)[:-1]])
        rank = np.empty(len(keys), np.int64)
        rank[by_rank] = np.arange(len(keys)) - block[text_of[by_rank]]
        ranked_groups = (keys[by_rank] % width).tolist()
        bounds = np.concatenate([[0], np.cumsum(groups_of_text)]).tolist()
        ranked = [ranked_groups[bounds[i] : bounds[i + 1]] for i in range(texts)]
        best, chosen = score[first], member[first]
        if not len(keys):
            # One pair no key matches (keys are never negative), so lookups need no special case.
            keys, best, chosen, second = (
                np.array([-1]),
                np.zeros(1),
                np.array([-1]),
                np.full(1, np.nan),
            )
            count, rank, vote = np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1)
        return cls(keys, best, chosen, second, count, rank, vote, top, floor, groups_of_text,
                   ranked)  # fmt: skip

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where each key sits among this source's pairs, and whether it is one of them."""
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return at, self.keys[at] == keys


def candidates_of_texts(
    texts: Sequence[str],
    vectors: np.ndarray,
    hits: Sequence[Sequence[tuple[int, float]]],
    members: Mapping[int, HitMember],
    *,
    groups: GroupFacts | None = None,
    history: VerdictHistory | None = None,
    excluded: Sequence[frozenset[int] | set[int]] | None = None,
    per_matcher: int = 15,
    by_description: int = 5,
    own: Sequence[OwnVerdict | None] | None = None,
    lexical: LexicalCache | None = None,
) -> list[Candidates]:
    """The candidates of each text and their features, for a batch of texts at once.

    ``vectors``: the texts in the served embedding (Q, D), unit length; ``hits``: per text its
    nearest members (id, score), best first, of every source; ``members``: what each hit member
    is (hits not in it are members deleted since the index was built, and are dropped).
    ``excluded``: per text the groups never to offer (rejected for that very text). ``own``:
    per training example its own verdict, left out of ``history``. A text's candidates are its
    ``per_matcher`` best groups by taxonomy members and by curators' members, then its
    ``by_description`` nearest descriptions, in that order (equal scores keep it).
    """
    count = len(texts)
    lexical = lexical or LexicalCache()
    excluded = list(excluded) if excluded is not None else [frozenset()] * count
    own = list(own) if own is not None else [None] * count
    vectors = np.asarray(vectors, dtype=np.float32).reshape(count, -1)
    lengths = [len(row) for row in hits]
    total = sum(lengths)
    q = np.repeat(np.arange(count, dtype=np.int64), lengths)
    ids = np.fromiter((m for row in hits for m, _ in row), np.int64, count=total)
    scores = np.fromiter((s for row in hits for _, s in row), np.float64, count=total)
    unique_ids, inverse = np.unique(ids, return_inverse=True)
    found = [members.get(int(m)) for m in unique_ids.tolist()]
    group = np.array([f.group_id if f else -1 for f in found], np.int64)[inverse]
    known = np.array([f is not None for f in found], bool)[inverse]
    curator = np.array([bool(f and f.curator) for f in found], bool)[inverse]
    width = 1 + max(
        int(group.max(initial=0)),
        int(groups.ids.max(initial=0)) if groups is not None and len(groups.ids) else 0,
        max((g for ex in excluded for g in ex), default=0),
    )
    if any(excluded):
        ruled_out = np.array([i * width + g for i, ex in enumerate(excluded) for g in ex])
        known &= ~np.isin(q * width + group, ruled_out)
    sources = []
    for kept in (known & ~curator, known & curator):
        at = np.flatnonzero(kept)
        sources.append(_Source.fold(q[at], group[at], scores[at], ids[at], width, count))
    taxonomy, judged = sources

    description = None
    if groups is not None and len(groups.ids) and groups.vectors.shape[1] == vectors.shape[1]:
        description = vectors @ groups.vectors.T  # (Q, G)
        description[:, ~groups.has_description] = -1.0
    candidate_lists = []
    take = 0
    if description is not None:
        take = min(by_description, int(groups.has_description.sum()))
    if take:
        # Each text's ``take`` nearest descriptions, best first (ties: the partition's order),
        # chosen for the batch at once: per text it was a tenth of the ranking's time.
        allowed = description.copy()  # (Q, G)
        for i, ruled_out in enumerate(excluded):
            for g in ruled_out:
                row = groups.row_of.get(g)
                if row is not None:
                    allowed[i, row] = -np.inf
        nearest = np.argpartition(-allowed, take - 1, axis=1)[:, :take]  # (Q, take)
        values = np.take_along_axis(allowed, nearest, axis=1)
        best = np.argsort(-values, axis=1, kind="stable")
        nearest = np.take_along_axis(nearest, best, axis=1)
        finite = np.isfinite(np.take_along_axis(values, best, axis=1))
        described_ids = [
            [int(g) for g, ok in zip(row_ids, row_ok, strict=True) if ok]
            for row_ids, row_ok in zip(groups.ids[nearest].tolist(), finite.tolist(), strict=True)
        ]
    for i in range(count):
        order = dict.fromkeys(taxonomy.ranked[i][:per_matcher])
        order.update(dict.fromkeys(judged.ranked[i][:per_matcher]))
        if take:
            for group_id in described_ids[i]:
                order.setdefault(group_id, None)
        candidate_lists.append(list(order))

    sizes = [len(c) for c in candidate_lists]
    pq = np.repeat(np.arange(count, dtype=np.int64), sizes)  # each candidate's text
    pg = np.fromiter((g for c in candidate_lists for g in c), np.int64, count=sum(sizes))
    keys = pq * width + pg
    columns: dict[str, np.ndarray] = {}
    chosen_best = []
    for name, source in (("member", taxonomy), ("judged", judged)):
        at, present = source.lookup(keys)
        floor, top = source.floor[pq], source.top[pq]
        value = np.where(present, source.best[at], floor)
        columns[name] = value
        columns[f"{name}_gap"] = top - value
        columns[f"{name}_count"] = np.log1p(np.where(present, source.count[at], 0))
        columns[f"{name}_rank"] = np.log1p(
            np.where(present, source.rank[at], source.groups_of_text[pq])
        )
        columns[f"{name}_missing"] = (~present).astype(np.float64)
        member_ids = np.where(present, source.member[at], -1)
        chosen_best.append((np.where(present, value, -2.0), member_ids))
        if name == "member":
            second = source.second[at]
            columns["member_second"] = np.where(
                present & ~np.isnan(second), second, np.minimum(value, floor)
            )
        else:
            columns["judged_vote"] = np.where(present, source.vote[at], 0.0)
    (member_best, member_ids), (judged_best, judged_ids) = chosen_best
    columns["best"] = np.maximum(np.where(member_ids >= 0, member_best, -1.0),
                                 np.where(judged_ids >= 0, judged_best, -1.0))  # fmt: skip
    chosen = np.where(judged_best > member_best, judged_ids, member_ids)

    # String evidence, from each text's and member's words and trigrams (cached).
    queries = [lexical(text) for text in texts]
    member_text = {m: lexical(members[m].text) for m in set(member_ids.tolist()) - {-1}}
    judged_text = {m: lexical(members[m].text) for m in set(judged_ids.tolist()) - {-1}}
    dice_m, words_q, words_m, exact, dice_j = [], [], [], [], []
    for i, m, j in zip(pq.tolist(), member_ids.tolist(), judged_ids.tolist(), strict=True):
        query_words, query_grams, query_key = queries[i]
        if m >= 0:
            words_, grams_, key_ = member_text[m]
            shared = len(query_words & words_)
            dice_m.append(dice(query_grams, grams_))
            words_q.append(shared / max(len(query_words), 1))
            words_m.append(shared / max(len(words_), 1))
            exact.append(float(key_ == query_key))
        else:
            dice_m.append(0.0)
            words_q.append(0.0)
            words_m.append(0.0)
            exact.append(0.0)
        dice_j.append(dice(query_grams, judged_text[j][1]) if j >= 0 else 0.0)
    columns["member_dice"] = np.array(dice_m)
    columns["member_words_query"] = np.array(words_q)
    columns["member_words_member"] = np.array(words_m)
    columns["member_exact"] = np.array(exact)
    columns["judged_dice"] = np.array(dice_j)
    columns["query_words"] = np.array([len(queries[i][0]) for i in pq.tolist()], np.float64)

    rows = np.full(len(keys), -1, np.int64)
    if groups is not None:
        rows = np.array([groups.row_of.get(g, -1) for g in pg.tolist()], np.int64)
    safe = np.maximum(rows, 0)
    described = (rows >= 0) & (description is not None)
    if description is not None:
        described &= groups.has_description[safe]
        value = description[pq, safe].astype(np.float64)
        masked = np.where(groups.has_description[None, :], description, -np.inf)
        top = np.maximum(masked.max(axis=1, initial=-1.0), -1.0).astype(np.float64)
        columns["description"] = np.where(described, value, 0.0)
        columns["description_gap"] = np.where(described, top[pq] - value, 0.0)
    else:
        columns["description"] = columns["description_gap"] = np.zeros(len(keys))
    columns["description_missing"] = (~described).astype(np.float64)
    if groups is not None:
        grams, name_words = groups._name_grams, groups._name_words
        columns["name_dice"] = np.array([
            dice(queries[i][1], grams[r]) if r >= 0 else 0.0
            for i, r in zip(pq.tolist(), rows.tolist(), strict=True)
        ])  # fmt: skip
        columns["name_words"] = np.array([
            len(queries[i][0] & name_words[r]) / max(len(name_words[r]), 1) if r >= 0 else 0.0
            for i, r in zip(pq.tolist(), rows.tolist(), strict=True)
        ])  # fmt: skip
    else:
        columns["name_dice"] = columns["name_words"] = np.zeros(len(keys))
    _history_columns(columns, pq, pg, vectors, history, own)

    features = np.column_stack([columns[name] for name in FEATURES]).astype(np.float32)
    features = features.reshape(len(keys), len(FEATURES))
    similarity = np.maximum(columns["best"], 0.0).astype(np.float32)
    bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    return [
        Candidates(
            groups=pg[bounds[i] : bounds[i + 1]],
            features=features[bounds[i] : bounds[i + 1]],
            similarity=similarity[bounds[i] : bounds[i + 1]],
            members=chosen[bounds[i] : bounds[i + 1]].astype(np.int64),
        )
        for i in range(count)
    ]


def _history_columns(columns, pq, pg, vectors, history, own) -> None:
    """What verdicts said of each candidate's group, less each training example's own."""
    size = len(pq)
    if history is None:
        for name in ("verdicts", "verdict_share", "rejections"):
            columns[name] = np.zeros(size)
        columns["rejected_near"] = np.full(size, -1.0)
        return
    own_group = np.array([o.group_id if o and o.group_id is not None else -1 for o in own])
    confirmed = np.array([history.confirmed.get(g, 0) for g in pg.tolist()], np.float64)
    confirmed -= (own_group[pq] == pg) & (pg >= 0)
    totals = np.full(len(own), float(history.total)) - (own_group >= 0)
    rejected = np.array([history.rejected.get(g, 0) for g in pg.tolist()], np.float64)
    near = np.full(size, -1.0)
    if len(history.rejected_groups) and history.rejected_vectors.shape[1] == vectors.shape[1]:
        cosine = vectors @ history.rejected_vectors.T  # (Q, R)
        for i, o in enumerate(own):
            if o is not None and o.rejected_rows:
                rows = np.asarray(o.rejected_rows, np.int64)
                mine = np.flatnonzero(pq == i)
                for group in history.rejected_groups[rows].tolist():
                    rejected[mine] -= pg[mine] == group
                cosine[i, rows] = -1.0
        # Each rejected group's nearest text: its rows are one slice of the rows by group.
        order, sorted_groups = history.by_group()
        names, starts = np.unique(sorted_groups, return_index=True)
        nearest = np.maximum.reduceat(cosine[:, order], starts, axis=1)  # (Q, groups)
        at = np.minimum(np.searchsorted(names, pg), len(names) - 1)
        hit = names[at] == pg
        near[hit] = nearest[pq[hit], at[hit]]
    confirmed = np.maximum(confirmed, 0)
    columns["verdicts"] = np.log1p(confirmed)
    columns["verdict_share"] = np.log(
        (confirmed + 1) / (np.maximum(totals[pq], 0) + max(history.group_count, 1))
    )
    columns["rejections"] = np.log1p(np.maximum(rejected, 0))
    columns["rejected_near"] = near
