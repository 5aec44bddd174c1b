"""The groups a person means by a few typed words: by code, by name, by member titles (an
abbreviation such as "RN" is a word of many titles, "Emergency Room Registered Nurse (ER RN)"),
and by meaning, the live encoder's nearest members for the words folded to their groups.

A word of the query matches a word of a name or title that starts with it, never a piece inside
one ("rn" finds "RN", not "Furniture"); the last word may be still being typed. Kept per process:
the words of every member, read once for each live index build (a taxonomy with no model yet:
whenever its revision moved), the members added since and the groups' names and codes read
again only when the taxonomy's revision moved. A member moved or removed since still counts where
it was for ordering until the next build (the scheduled reindex folds every change into one);
the member a result names is read by the caller.
"""

from __future__ import annotations

import dataclasses
import threading
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import numpy as np
from django.db import connection

from annotations.models import Group, Member
from models_app.serving.engines import LiveEngine, live_engine_ranker_and_revision
from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.text import comparison_key
from models_app.siamese.text_match import fold_word, plain_words

_MEMBER = Member._meta.db_table
_GROUP = Group._meta.db_table
# Members deeper than this in the encoder's answer rarely add a group the first ones did not.
MEANING_DEPTH = 60
# A group the encoder finds for a query is offered when its nearest member is this near, and as
# near as this share of the nearest member of all: a cosine under it is a guess in any encoder.
MEANING_FLOOR = 0.6
MEANING_SHARE = 0.9
# A word this short is a prefix of too many title words to say anything: names and codes only.
MEMBER_WORD_MIN = 2
# Titles kept per group found by them, for the caller to show one (the shortest, say).
TITLES_KEPT = 20


@dataclass(frozen=True)
class GroupMatch:
    """One group a query found. ``how``: "code", "name", "member" (titles hold every word of the
    query) or "meaning" (the encoder's nearest). ``member_ids``: the first titles that hold the
    words, or the nearest member; ``similarity``: the encoder's, for "meaning"."""

    group_id: int
    how: str
    member_ids: tuple[int, ...] = ()
    similarity: float | None = None


@dataclass
class _Words:
    """Words (case and accents folded) to the ids that hold them: sorted, for a word being typed
    (a prefix: "nurse" is the start of "nurses" and "nursery", "nurses" only of "nurses"), and by
    their folded form, for a whole word ("nurse" and "nurses" are one)."""

    ids: dict[str, np.ndarray]
    sorted_words: list[str]
    by_folded: dict[str, list[str]]

    @classmethod
    def build(cls, rows: list[tuple[int, set[str]]]) -> _Words:
        holders: dict[str, list[int]] = defaultdict(list)
        for row_id, row_words in rows:
            for word in row_words:
                holders[word].append(row_id)
        ids = {word: np.unique(np.asarray(found, np.int64)) for word, found in holders.items()}
        by_folded: dict[str, list[str]] = defaultdict(list)
        for word in ids:
            by_folded[fold_word(word)].append(word)
        return cls(ids, sorted(ids), dict(by_folded))

    def holding(self, word: str, *, whole: bool) -> np.ndarray:
        """Ids holding ``word`` (``whole``, plural or not) or a word starting with it."""
        if whole:
            found = [self.ids[form] for form in self.by_folded.get(fold_word(word), ())]
        else:
            found = []
            for candidate in self.sorted_words[bisect_left(self.sorted_words, word) :]:
                if not candidate.startswith(word):
                    break
                found.append(self.ids[candidate])
        if not found:
            return np.zeros(0, np.int64)
        return found[0] if len(found) == 1 else np.unique(np.concatenate(found))


@dataclass
class _Index:
    """A taxonomy's words as of one live index build (``build_id``; None: no model yet)."""

    build_id: int | None
    max_member_id: int
    member_ids: np.ndarray  # sorted
    member_groups: np.ndarray  # the group of each, in the same order
    member_words: _Words
    revision: int | None = None  # of what follows, read at this revision
    groups: dict[int, tuple[str, str]] = field(default_factory=dict)  # id → (code, name)
    folded: dict[int, tuple[str, str]] = field(default_factory=dict)  # casefolded, one space
    name_words: _Words | None = None
    newer: dict[int, tuple[int, set[str]]] = field(default_factory=dict)  # id → (group, words)

    def group_of(self, member_ids: np.ndarray) -> np.ndarray:
        """Each member's group (-1 when unknown), the members added since the build included."""
        found = np.full(len(member_ids), -1, np.int64)
        at = np.searchsorted(self.member_ids, member_ids)
        inside = at < len(self.member_ids)
        known = inside.copy()
        known[inside] = self.member_ids[at[inside]] == member_ids[inside]
        found[known] = self.member_groups[at[known]]
        for position in np.flatnonzero(~known):
            newer = self.newer.get(int(member_ids[position]))
            if newer is not None:
                found[position] = newer[0]
        return found


_lock = threading.Lock()
_indexes: dict[int, _Index] = {}  # by taxonomy id


def forget_group_search() -> None:
    with _lock:
        _indexes.clear()


def _rows(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _index(taxonomy_id: int, engine: LiveEngine | None, revision: int | None) -> _Index:
    build_id = engine.index_build_id if engine is not None else None
    with _lock:
        index = _indexes.get(taxonomy_id)
    stale = index is None or index.build_id != build_id
    # Without a model there is no build to keep the words of: they are read again whenever the
    # taxonomy changed.
    if not stale and build_id is None and (revision is None or index.revision != revision):
        stale = True
    if stale:
        rows = _rows(
            f"SELECT id, group_id, normalized_text FROM {_MEMBER} WHERE taxonomy_id = %s "
            "ORDER BY id",
            [taxonomy_id],
        )
        index = _Index(
            build_id=build_id,
            max_member_id=rows[-1][0] if rows else 0,
            member_ids=np.asarray([row[0] for row in rows], np.int64),
            member_groups=np.asarray([row[1] for row in rows], np.int64),
            member_words=_Words.build([(row[0], plain_words(row[2])) for row in rows]),
        )
    if revision is None or index.revision != revision:
        index = dataclasses.replace(index, revision=revision)
        index.groups = {
            group_id: (code, name)
            for group_id, code, name in _rows(
                f"SELECT id, code, name FROM {_GROUP} WHERE taxonomy_id = %s", [taxonomy_id]
            )
        }
        index.folded = {
            group_id: (_folded(code), _folded(name))
            for group_id, (code, name) in index.groups.items()
        }
        index.name_words = _Words.build(
            [(group_id, plain_words(name)) for group_id, (_, name) in index.groups.items()]
        )
        index.newer = {
            member_id: (group_id, plain_words(text))
            for member_id, group_id, text in _rows(
                f"SELECT id, group_id, normalized_text FROM {_MEMBER} "
                "WHERE taxonomy_id = %s AND id > %s",
                [taxonomy_id, index.max_member_id],
            )
        }
    if revision is not None:  # read inside a transaction: not kept, it may be rolled back
        with _lock:
            _indexes[taxonomy_id] = index
    return index


def _holding_all(words: _Words, query_words: list[str], *, whole: bool) -> np.ndarray:
    held = None
    for word in query_words:
        found = words.holding(word, whole=whole)
        held = found if held is None else np.intersect1d(held, found, assume_unique=True)
        if not len(held):
            break
    return held if held is not None else np.zeros(0, np.int64)


def _folded(text: str) -> str:
    return " ".join(text.casefold().split())


def taxonomy_groups_for_query(
    taxonomy,
    query: str,
    *,
    limit: int = 10,
    meaning: int = 3,
    exclude: Collection[int] = (),
    prefer: Mapping[int, float] | None = None,
) -> list[GroupMatch]:
    """Up to ``limit`` groups ``query`` names, best first: the groups its words find, then up
    to ``meaning`` of the encoder's nearest groups that no word found (a synonym, a
    misspelling, another language's word) and near enough (``_nearest_groups``), which always
    keep their places beside them.

    Word matches come in this order: the exact code or name; a title that is the query; codes
    starting with the query (shortest first); names holding every word, whole, then as the
    start of a word; titles holding every word, whole, then as the start of a word. Among
    equals: the group with more titles holding every word, then more holding any one of them
    (what the words are most about: "UX designer" finds two groups with the same three UX
    titles, and Web and Digital Interface Designers has many more designers), then
    ``prefer``'s score (the model's, for the input being judged), then the shorter name.
    ``exclude``: groups never offered."""
    folded_query = _folded(query)
    if not folded_query:
        return []
    engine, _, revision = live_engine_ranker_and_revision(taxonomy)
    index = _index(taxonomy.id, engine, revision)
    excluded = set(exclude)
    words = sorted(plain_words(query))
    prefer = prefer or {}
    # Per group found by words: its class (the lowest wins) and the titles holding the words.
    found: dict[int, tuple[int, list[int]]] = {}

    def offer(group_id: int, rank: int, member_id: int | None = None) -> None:
        if group_id in excluded or group_id not in index.groups:
            return
        known = found.get(group_id)
        if known is None or known[0] > rank:
            known = found[group_id] = (rank, [])
        if member_id is not None and known[0] == rank and len(known[1]) < TITLES_KEPT:
            known[1].append(member_id)

    # A code is asked for by its digits ("29-1141", "15-12"), never by a word's first letters.
    code_like = " " not in folded_query and any(ch.isdigit() for ch in folded_query)
    for group_id, (code, name) in index.folded.items():
        if folded_query in (code, name):
            offer(group_id, 0)
        elif code_like and code.startswith(folded_query):
            offer(group_id, 2)
    # A title that is the query itself ("lorry driver", a title of cargo vehicle driver in ESCO):
    # read now, by the (taxonomy, text) index.
    for member_id, group_id in _rows(
        f"SELECT id, group_id FROM {_MEMBER} WHERE taxonomy_id = %s AND normalized_text = %s",
        [taxonomy.id, comparison_key(query)],
    ):
        offer(group_id, 1, member_id)
    if words:
        for rank, whole in ((3, True), (4, False)):
            for group_id in _holding_all(index.name_words, words, whole=whole).tolist():
                offer(group_id, rank)
    support_all: dict[int, int] = defaultdict(int)
    support_any: dict[int, int] = defaultdict(int)
    if words and all(len(word) >= MEMBER_WORD_MIN for word in words):
        for rank, whole in ((5, True), (6, False)):
            holders = _holding_all(index.member_words, words, whole=whole)
            newer = [
                member_id
                for member_id, (_, member_words) in index.newer.items()
                if all(_holds(member_words, word, whole) for word in words)
            ]
            holders = np.concatenate([holders, np.asarray(newer, np.int64)])
            for member_id, group_id in zip(
                holders.tolist(), index.group_of(holders).tolist(), strict=True
            ):
                if group_id >= 0:
                    offer(group_id, rank, member_id)
                    if not whole:  # every holder, whole words included
                        support_all[group_id] += 1
    for word in words:
        if len(word) < MEMBER_WORD_MIN:
            continue
        holders = index.member_words.holding(word, whole=False)
        groups, counts = np.unique(index.group_of(holders), return_counts=True)
        for group_id, count in zip(groups.tolist(), counts.tolist(), strict=True):
            support_any[group_id] += count

    def order(group_id: int) -> tuple:
        rank = found[group_id][0]
        code, name = index.groups[group_id]
        if rank == 2:
            return (rank, len(code), code)
        score = prefer.get(group_id)
        return (rank, -support_all[group_id], -support_any[group_id], score is None,
                -(score or 0.0), len(name), name)  # fmt: skip

    how = ("code", "member", "code", "name", "name", "member", "member")
    by_words = [
        GroupMatch(group_id, how[found[group_id][0]], tuple(found[group_id][1]))
        for group_id in sorted(found, key=order)
    ]
    similar = _nearest_groups(
        engine, index, query, revision, excluded | found.keys(), meaning, support_any
    )
    return by_words[: max(limit - len(similar), 0)] + similar[:limit]


def _holds(member_words: set[str], word: str, whole: bool) -> bool:
    if whole:
        return any(fold_word(w) == fold_word(word) for w in member_words)
    return any(w.startswith(word) for w in member_words)


def _nearest_groups(
    engine: LiveEngine | None,
    index: _Index,
    query: str,
    revision: int | None,
    excluded: set[int],
    count: int,
    support: Mapping[int, int],
) -> list[GroupMatch]:
    """The groups of the live encoder's nearest members for ``query`` (none without a model),
    nearest first, as near as ``MEANING_SHARE`` of the nearest member of all (found by words or
    excluded included: a query that names a group plainly gets no distant guesses) and at least
    ``MEANING_FLOOR``. Groups as near as each other (one title, "Driver", in many groups) come
    in the order of how many of their titles hold the query's words (``support``)."""
    if engine is None or count <= 0:
        return []
    try:
        (hits,), _ = engine.search_texts([query], MEANING_DEPTH, revision=revision)
    except ArtifactError:
        return []
    if not hits:
        return []
    near_enough = max(MEANING_FLOOR, MEANING_SHARE * hits[0][1])
    member_ids = np.asarray([member_id for member_id, _ in hits], np.int64)
    nearest: dict[int, tuple[float, int]] = {}  # group → (similarity, member)
    for (member_id, score), group_id in zip(hits, index.group_of(member_ids).tolist(), strict=True):
        if score < near_enough:
            break
        if group_id in index.groups and group_id not in excluded and group_id not in nearest:
            nearest[group_id] = (float(score), int(member_id))
    ordered = sorted(
        nearest, key=lambda g: (-round(nearest[g][0], 3), -support.get(g, 0), index.groups[g][1])
    )
    return [
        GroupMatch(group_id, "meaning", (nearest[group_id][1],), nearest[group_id][0])
        for group_id in ordered[:count]
    ]
