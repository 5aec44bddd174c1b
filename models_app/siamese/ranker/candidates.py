"""A text's candidate groups and the evidence of each: the ranker's features.

Retrieval proposes, the ranker decides. A text's candidates are the union of each matcher's best
groups: the served embedding's nearest taxonomy members, curators' members (texts judged before),
and the groups whose description is nearest. Each (text, group) candidate gets a row of features
(``features.FEATURES``): how well each matcher's best member of the group scores and ranks, how
far it is behind the text's best, the words and trigrams the text shares with it, the
description's similarity, and what verdicts said of the group before. Serving and fitting
compute them with the same function, ``candidates_of_texts``.

A batch is computed as arrays, never candidate by candidate in Python: a request of 500 texts
has some 12,000 candidates. Words and trigrams are read from a ``lexical.LexicalCache``, what
verdicts said from a ``verdict_history.VerdictHistory``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from operator import attrgetter, is_
from typing import NamedTuple

import numpy as np

from models_app.siamese.configs import ConfigError
from models_app.siamese.ranker.features import FEATURES
from models_app.siamese.ranker.lexical import LexicalCache
from models_app.siamese.ranker.verdict_history import OwnVerdict, VerdictHistory, history_columns

# A curator's judged texts vote for their groups with weight exp((cosine - best) / this).
_VOTE_TEMPERATURE = 0.05


class HitMember(NamedTuple):
    """What a hit member is: its group, its text, and whether a curator's verdict put it there.
    A tuple: a batch's hits make tens of thousands."""

    group_id: int
    text: str
    curator: bool = False


# What a hit member that is no longer in ``members`` reads as (deleted since the build).
_ABSENT = HitMember(-1, "", False)
# Description cosines are compared to this many decimals when choosing a text's nearest
# descriptions; _DESCRIPTION_SLACK more are looked at so that ties at the edge are seen.
DESCRIPTION_DIGITS = 6
_DESCRIPTION_SLACK = 8


@dataclass
class GroupFacts:
    """Each group's name and description vector (in the served embedding): ``ids`` (G,),
    ``vectors`` (G, D) unit rows, zero where the group has no description."""

    ids: np.ndarray
    names: list[str]
    vectors: np.ndarray
    has_description: np.ndarray

    def __post_init__(self) -> None:
        # The rows by group id, for looking a batch's groups up at once; names as an array to
        # pick them by row.
        self._rows_by_id = np.argsort(self.ids, kind="stable")
        self._sorted_ids = self.ids[self._rows_by_id]
        self._names = np.array(self.names, dtype=object).reshape(len(self.names))

    def rows(self, group_ids: np.ndarray) -> np.ndarray:
        """Each group's row, -1 for a group these facts do not hold."""
        if not len(self._sorted_ids):
            return np.full(len(group_ids), -1, np.int64)
        at = np.minimum(np.searchsorted(self._sorted_ids, group_ids), len(self._sorted_ids) - 1)
        return np.where(self._sorted_ids[at] == group_ids, self._rows_by_id[at], -1)

    def names_at(self, rows: np.ndarray) -> list[str]:
        return self._names[rows].tolist()

    @classmethod
    def build(cls, ids, names, vectors, has_description) -> GroupFacts:
        ids = np.asarray(ids, dtype=np.int64)
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(ids) or len(names) != len(ids):
            raise ConfigError("group facts need one name and one vector a group")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        return cls(ids, list(names), vectors, np.asarray(has_description, dtype=bool))


@dataclass(frozen=True)
class SearchedTexts:
    """A batch of texts as the engine searched them: ``vectors``, the texts in the served
    embedding (Q, D), unit length; ``hits``, per text its nearest members (id, score), best
    first, of every source; ``members``, what each hit member is (hits not in it are members
    deleted since the index was built, and are dropped)."""

    texts: Sequence[str]
    vectors: np.ndarray
    hits: Sequence[Sequence[tuple[int, float]]]
    members: Mapping[int, HitMember]

    def at(self, rows: Sequence[int]) -> SearchedTexts:
        """The texts at ``rows``, in that order."""
        texts = [self.texts[row] for row in rows]
        return SearchedTexts(
            texts, self.vectors[rows], [self.hits[row] for row in rows], self.members
        )


@dataclass(frozen=True)
class TaxonomyEvidence:
    """What the taxonomy gives every text's candidates besides its hits: its groups' names and
    descriptions (``groups``), what verdicts said of each group (``history``), and the words and
    trigrams of its texts, worked out once a text (``lexical``; a fresh cache when None)."""

    groups: GroupFacts | None = None
    history: VerdictHistory | None = None
    lexical: LexicalCache | None = None


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

    def without_last(self) -> Candidates:
        return Candidates(self.groups[:-1], self.features[:-1], self.similarity[:-1],
                          self.members[:-1])  # fmt: skip


@dataclass
class CandidateBatch(Sequence[Candidates]):
    """The candidates of a batch of texts as ``Candidates``' arrays for the whole batch, text
    after text: text ``i``'s are rows ``starts[i]:starts[i + 1]`` (``batch[i]``), ``text``
    (N,) says whose each row is. As a sequence, one ``Candidates`` a text."""

    starts: np.ndarray  # (Q + 1,)
    text: np.ndarray
    groups: np.ndarray
    features: np.ndarray
    similarity: np.ndarray
    members: np.ndarray
    # Per text: whether its last row is a ``required`` group no matcher proposed (fitting only).
    added: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.starts) - 1

    def added_for(self, index: int) -> bool:
        """Whether text ``index``'s last candidate was added only because it was required."""
        return bool(self.added is not None and self.added[index])

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        start, end = self.starts[index % len(self)], self.starts[index % len(self) + 1]
        return Candidates(
            groups=self.groups[start:end],
            features=self.features[start:end],
            similarity=self.similarity[start:end],
            members=self.members[start:end],
        )


def candidate_features(
    text: str,
    vector: np.ndarray,
    hits: Sequence[tuple[int, float]],
    members: Mapping[int, HitMember],
    evidence: TaxonomyEvidence | None = None,
    *,
    excluded: frozenset[int] | set[int] = frozenset(),
    own: OwnVerdict | None = None,
    **options,
) -> Candidates:
    """``candidates_of_texts`` for one text."""
    searched = SearchedTexts([text], np.asarray(vector)[None, :], [hits], members)
    evidence = evidence or TaxonomyEvidence()
    return candidates_of_texts(searched, evidence, excluded=[excluded], own=[own], **options)[0]


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

    @classmethod
    def fold(cls, q, group, score, member, width: int, texts: int) -> _Source:
        if not len(q):
            # One pair no key matches (keys are never negative), so lookups need no special case.
            zero, none = np.zeros(texts), np.zeros(texts, np.int64)
            return cls(np.array([-1]), np.zeros(1), np.array([-1]), np.full(1, np.nan),
                       np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1), zero, zero,
                       none)  # fmt: skip
        key = q * width + group
        # Each pair's hits in their order (hits come best first): its first is its best.
        order = np.argsort(key, kind="stable")
        sorted_keys = key[order]
        starts_here = _firsts(sorted_keys)
        starts = starts_here.nonzero()[0]
        keys = sorted_keys[starts]
        first = order[starts]
        count = np.diff(starts, append=len(key))
        second = np.where(count > 1, score[order[np.minimum(starts + 1, len(key) - 1)]], np.nan)
        # A text's first hit is its top, its last its floor (``q`` ascends).
        text_first = _firsts(q).nonzero()[0]
        top, floor = np.zeros(texts), np.zeros(texts)
        top[q[text_first]] = score[text_first]
        floor[q[text_first]] = score[np.append(text_first[1:], len(q)) - 1]
        weight = np.exp((score - top[q]) / _VOTE_TEMPERATURE)
        totals = np.bincount(q, weights=weight, minlength=texts)
        totals[totals == 0] = 1.0
        # Each pair's votes summed in the hits' order, as over the hits unsorted.
        pair_of_sorted = starts_here.cumsum() - 1
        votes = np.bincount(pair_of_sorted, weights=weight[order], minlength=len(keys))
        text_of = keys // width
        vote = votes / totals[text_of]
        # Rank: a text's groups in the order of their best (first) hit; hits are text after
        # text, so that is the order of the first hits' positions.
        by_rank = np.argsort(first)
        groups_of_text = np.bincount(text_of, minlength=texts)
        block = groups_of_text.cumsum() - groups_of_text
        rank = np.empty(len(keys), np.int64)
        rank[by_rank] = np.arange(len(keys)) - block[text_of[by_rank]]
        return cls(keys, score[first], member[first], second, count, rank, vote, top, floor,
                   groups_of_text)  # fmt: skip

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where each key sits among this source's pairs, and whether it is one of them."""
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return at, self.keys[at] == keys

    def proposed(self, per_text: int) -> tuple[np.ndarray, np.ndarray]:
        """The keys of each text's ``per_text`` best groups, and their ranks."""
        chosen = (self.rank < per_text) & (self.keys >= 0)
        return self.keys[chosen], self.rank[chosen]


def candidates_of_texts(
    searched: SearchedTexts,
    evidence: TaxonomyEvidence,
    *,
    excluded: Sequence[frozenset[int] | set[int]] | None = None,
    own: Sequence[OwnVerdict | None] | None = None,
    required: Sequence[int | None] | None = None,
    per_matcher: int = 15,
    by_description: int = 5,
) -> CandidateBatch:
    """The candidates of each searched text and their features, for a batch of texts at once.

    Per text: ``excluded``, the groups never to offer (rejected for that very text); ``own``,
    a training example's own verdict, left out of ``evidence.history``; ``required``, a group
    added as its last candidate where no matcher proposed it (``CandidateBatch.added``): a
    verdict's group as a fit example. The product's fits do not add them (they cost accuracy:
    bench/ranker_added_groups.py). A text's candidates are its ``per_matcher`` best groups by
    taxonomy members and by curators' members, then its ``by_description`` nearest descriptions,
    in that order (descriptions' cosines equal to the millionth by group row).
    """
    texts = list(searched.texts)
    hits, members = searched.hits, searched.members
    groups, history = evidence.groups, evidence.history
    count = len(texts)
    lexical = evidence.lexical or LexicalCache()
    excluded = list(excluded) if excluded is not None else [frozenset()] * count
    vectors = np.asarray(searched.vectors, dtype=np.float32).reshape(count, -1)
    lengths = np.fromiter(map(len, hits), np.int64, count)
    total = int(lengths.sum())
    q = np.arange(count, dtype=np.int64).repeat(lengths)
    # Every hit's (id, score), flattened in C: ids are integers well below 2**53.
    flat = np.fromiter(chain.from_iterable(chain.from_iterable(hits)), np.float64, 2 * total)
    ids, scores = flat[0::2].astype(np.int64), flat[1::2]
    # What each distinct hit member is (a member is hit by many texts of a batch).
    unique_ids, inverse = np.unique(ids, return_inverse=True)
    found = list(map(members.get, unique_ids.tolist(), repeat(_ABSENT)))
    group = np.fromiter(map(attrgetter("group_id"), found), np.int64, len(found))[inverse]
    known = ~np.fromiter(map(is_, found, repeat(_ABSENT)), bool, len(found))[inverse]
    curator = np.fromiter(map(attrgetter("curator"), found), bool, len(found))[inverse]
    ruled_out_text, ruled_out_group = _ruled_out(excluded)
    width = 1 + max(
        int(group.max(initial=0)),
        int(groups.ids.max(initial=0)) if groups is not None and len(groups.ids) else 0,
        int(ruled_out_group.max(initial=0)),
        max((g for g in required or () if g is not None), default=0),
    )
    if len(ruled_out_text):
        known &= ~np.isin(q * width + group, ruled_out_text * width + ruled_out_group)
    sources = []
    for kept in (known & ~curator, known & curator):
        at = kept.nonzero()[0]
        sources.append(_Source.fold(q[at], group[at], scores[at], ids[at], width, count))
    taxonomy, judged = sources

    description = None
    if groups is not None and len(groups.ids) and groups.vectors.shape[1] == vectors.shape[1]:
        description = vectors @ groups.vectors.T  # (Q, G)
        description[:, ~groups.has_description] = -1.0
    proposals = [taxonomy.proposed(per_matcher), judged.proposed(per_matcher)]
    take = 0
    if description is not None:
        take = min(by_description, int(groups.has_description.sum()))
    if take:
        # Each text's ``take`` nearest descriptions, best first (ties: the partition's order).
        allowed = description
        if len(ruled_out_text):
            allowed = description.copy()  # (Q, G)
            rows = groups.rows(ruled_out_group)
            allowed[ruled_out_text[rows >= 0], rows[rows >= 0]] = -np.inf
        # Cosines equal to the millionth are equal: a float32 product's last bits depend on the
        # batch's shape, so ties go to the group's row, not to the partition's order. The
        # partition takes a few more than needed so that a tie straddling its edge is inside.
        key = np.round(allowed, DESCRIPTION_DIGITS)
        wide = min(take + _DESCRIPTION_SLACK, key.shape[1])
        nearest = np.argpartition(-key, wide - 1, axis=1)[:, :wide]  # (Q, wide)
        each = np.arange(count)[:, None]
        values = key[each, nearest]
        best = np.lexsort((nearest, -values), axis=1)[:, :take]
        nearest = nearest[each, best]
        finite = np.isfinite(values[each, best])
        text_of, place = np.nonzero(finite)
        proposals.append((text_of * width + groups.ids[nearest[text_of, place]], place))
    added = None
    if required is not None:
        added, proposal = _required(required, proposals, width, per_matcher, ruled_out_text,
                                    ruled_out_group)  # fmt: skip
        proposals.append(proposal)
    pq, pg = _chosen(proposals, per_matcher, width)
    sizes = np.bincount(pq, minlength=count)
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

    rows = groups.rows(pg) if groups is not None else np.full(len(keys), -1, np.int64)
    _string_columns(columns, lexical, texts, pq, member_ids, judged_ids, members, groups, rows)
    safe = np.maximum(rows, 0)
    described = (rows >= 0) & (description is not None)
    if description is not None:
        described &= groups.has_description[safe]
        value = description[pq, safe].astype(np.float64)
        # Groups without a description read -1 here, which no maximum from -1 up can pass.
        top = description.max(axis=1, initial=-1.0).astype(np.float64)
        columns["description"] = np.where(described, value, 0.0)
        columns["description_gap"] = np.where(described, top[pq] - value, 0.0)
    else:
        columns["description"] = columns["description_gap"] = np.zeros(len(keys))
    columns["description_missing"] = (~described).astype(np.float64)
    history_columns(columns, pq, pg, width, vectors, history, own)

    # One feature a row, then one candidate a row: one pass where stacking columns takes two.
    features = np.ascontiguousarray(np.array([columns[name] for name in FEATURES], np.float32).T)
    return CandidateBatch(
        starts=np.concatenate([[0], sizes.cumsum()]),
        text=pq,
        groups=pg,
        features=features.reshape(len(keys), len(FEATURES)),
        similarity=np.maximum(columns["best"], 0.0).astype(np.float32),
        members=chosen.astype(np.int64),
        added=added,
    )


def _required(required, proposals, width: int, per_matcher: int, ruled_out_text,
              ruled_out_group) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:  # fmt: skip
    """Per text whether its required group is added (no matcher proposed it, and it is not
    ruled out for the text), and those groups as one more proposal, ranked after every other."""
    text = np.array([i for i, g in enumerate(required) if g is not None], np.int64)
    group = np.array([g for g in required if g is not None], np.int64)
    key = text * width + group
    proposed = np.concatenate([k for k, _ in proposals]) if proposals else np.zeros(0, np.int64)
    new = ~np.isin(key, proposed)
    if len(ruled_out_text):
        new &= ~np.isin(key, ruled_out_text * width + ruled_out_group)
    added = np.zeros(len(required), bool)
    added[text[new]] = True
    # Ranked after every matcher's proposals (ranks below per_matcher each, up to 3 of them).
    return added, (key[new], np.full(int(new.sum()), per_matcher, np.int64))


def _firsts(values: np.ndarray) -> np.ndarray:
    """Where each run of equal values starts, in sorted ``values``."""
    first = np.ones(len(values), bool)
    first[1:] = values[1:] != values[:-1]
    return first


def _ruled_out(excluded) -> tuple[np.ndarray, np.ndarray]:
    """The (text, group) pairs never to offer, as two arrays."""
    if not any(excluded):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    sizes = np.fromiter(map(len, excluded), np.int64, len(excluded))
    text = np.repeat(np.arange(len(excluded)), sizes)
    return text, np.fromiter(chain.from_iterable(excluded), np.int64, int(sizes.sum()))


def _chosen(proposals, per_matcher: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Each text's candidates in the order they were proposed: the taxonomy members' groups by
    rank, then the curators' members', then the descriptions', each (text, group) at its first
    proposal. ``proposals``: per matcher the keys (text * width + group) and their ranks."""
    keys = np.concatenate([key for key, _ in proposals])
    place = np.concatenate([rank + i * per_matcher for i, (_, rank) in enumerate(proposals)])
    order = np.lexsort((place, keys))
    sorted_keys = keys[order]
    first = order[_firsts(sorted_keys)]
    keys, place = keys[first], place[first]
    order = np.lexsort((place, keys // width))
    return keys[order] // width, keys[order] % width


def _string_columns(columns, lexical, texts, pq, member_ids, judged_ids, members, groups, rows):
    """The words and trigrams each candidate's best members and group name share with the text
    (Dice of trigram sets, shares of word sets), all pairs counted at once."""
    size = len(pq)
    member_at, judged_at = (member_ids >= 0).nonzero()[0], (judged_ids >= 0).nonzero()[0]
    name_at = (rows >= 0).nonzero()[0]
    hit_texts = list(
        map(
            attrgetter("text"),
            map(members.__getitem__, chain(member_ids[member_at].tolist(),
                                           judged_ids[judged_at].tolist())),
        )
    )  # fmt: skip
    names = groups.names_at(rows[name_at]) if groups is not None else []
    found = lexical.lookup(texts + hit_texts + names)
    query_rows, member_row, judged_row, name_row = _pieces(
        found.rows, len(texts), len(member_at), len(judged_at)
    )
    query = query_rows[pq]
    grams = found.gram_counts(query)
    word_counts = found.word_counts(query)
    shared_grams = found.shared_grams(
        query_rows,
        np.concatenate([pq[member_at], pq[judged_at], pq[name_at]]),
        np.concatenate([member_row, judged_row, name_row]),
    )
    shared_words = found.shared_words(
        query_rows, np.concatenate([pq[member_at], pq[name_at]]),
        np.concatenate([member_row, name_row]),
    )  # fmt: skip
    member_shared, judged_shared, name_shared = _pieces(
        shared_grams, len(member_at), len(judged_at)
    )
    member_words, name_words = _pieces(shared_words, len(member_at))

    def dice_of(at, shared, other_rows):
        value = np.zeros(size)
        both = grams[at] + found.gram_counts(other_rows)
        value[at] = np.divide(2 * shared, both, out=np.zeros(len(at)), where=both > 0)
        return value

    columns["member_dice"] = dice_of(member_at, member_shared, member_row)
    columns["judged_dice"] = dice_of(judged_at, judged_shared, judged_row)
    columns["name_dice"] = dice_of(name_at, name_shared, name_row)
    for name, at, shared, denominator in (
        ("member_words_query", member_at, member_words, word_counts[member_at]),
        ("member_words_member", member_at, member_words, found.word_counts(member_row)),
        ("name_words", name_at, name_words, found.word_counts(name_row)),
    ):
        columns[name] = np.zeros(size)
        columns[name][at] = shared / np.maximum(denominator, 1)
    columns["member_exact"] = np.zeros(size)
    columns["member_exact"][member_at] = query[member_at] == member_row
    columns["query_words"] = word_counts.astype(np.float64)


def _pieces(values: np.ndarray, *sizes: int) -> list[np.ndarray]:
    """``values`` cut into pieces of these sizes one after another, and the rest."""
    pieces, start = [], 0
    for size in sizes:
        pieces.append(values[start : start + size])
        start += size
    return [*pieces, values[start:]]
