"""The rows a normalization reads besides the index: hit members with their groups and
sources, the groups curators put these very texts in, the groups they rejected for them, and
the texts they said none of the groups fits.

Kept per process behind the taxonomy's revision (``TaxonomyRevision``, bumped by triggers on
every committed write of members, groups and verdicts, and deletion of review items): a
request reads that one row, and the rows only when it moved or for hit members this process has
not seen since. Read inside a transaction, nothing is kept or used: the transaction may see
its own writes, not yet committed and perhaps rolled back, under a revision others will reach
with other rows.

Plain SQL: run as four ORM queries they cost a one-text request more than the database did
(about 1 ms each on 2 cores), and as four plain ones still 1.4 ms against 0.7 ms as one. A set
of values is one parameter, an array on PostgreSQL and a JSON list on SQLite, whatever its size:
a bulk chunk looks up tens of thousands of member ids.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import NamedTuple

from django.db import connection

from annotations.models import Group, Input, Judgement, Member, ReviewItem, TaxonomyRevision
from siamweb.plain_sql import prepared_rows

_MEMBER = Member._meta.db_table
_GROUP = Group._meta.db_table
_JUDGEMENT = Judgement._meta.db_table
_ITEM = ReviewItem._meta.db_table
_INPUT = Input._meta.db_table
_REVISION_SQL = f"SELECT revision FROM {TaxonomyRevision._meta.db_table} WHERE taxonomy_id = %s"


class MemberRow(NamedTuple):
    """A member as normalizing reads it; also what the ranker reads of a hit member
    (``ranker.HitMember``'s fields), so rows kept across requests serve as they are."""

    group_id: int
    text: str
    code: str  # its group's
    name: str  # its group's
    curator: bool  # a curator's verdict put it there


def _one_of(column: str, values: Collection, kind: str) -> tuple[str, object]:
    """``column IN values`` as SQL with one parameter (``kind``: "bigint" or "text")."""
    if connection.vendor == "postgresql":
        if kind == "bigint":
            # An array literal: psycopg adapts a list value by value in Python.
            return f"{column} = ANY(%s::bigint[])", "{" + ",".join(map(str, values)) + "}"
        return f"{column} = ANY(%s::text[])", list(values)
    return f"{column} IN (SELECT value FROM json_each(%s))", json.dumps(list(values))


def _member_with_group() -> str:
    """The members ``m`` with their group's code and name as ``g``. PostgreSQL is made to look
    each group up: estimating a few dozen members, it read every group into a hash table
    instead."""
    if connection.vendor == "postgresql":
        return (
            f"{_MEMBER} m CROSS JOIN LATERAL "
            f"(SELECT code, name FROM {_GROUP} WHERE id = m.group_id OFFSET 0) g"
        )
    return f"{_MEMBER} m JOIN {_GROUP} g ON g.id = m.group_id"


@dataclass
class NormalizationRows:
    # Each hit member and curators' member that still exists, read now: a member moved or
    # deleted since the index was built is ranked where it is today, or not at all.
    members: dict[int, MemberRow] = field(default_factory=dict)
    # Per normalized text, the (group, member) pairs curators put it in, newest first.
    verdict_groups: dict[str, list[tuple[int, int]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    # Per normalized text, the groups a live verdict said it is not in.
    rejected: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    # The normalized texts whose latest live final verdict is "none of these".
    none_of_these: set[str] = field(default_factory=set)


def taxonomy_revision(taxonomy_id: int) -> int | None:
    """The taxonomy's revision, read now (0 before its first write since the revision was
    added); None inside a transaction, where nothing read is kept."""
    if connection.in_atomic_block:
        return None
    with connection.cursor() as cursor:
        cursor.execute(_REVISION_SQL, [taxonomy_id])
        row = cursor.fetchone()
    return row[0] if row is not None else 0


@dataclass
class _VerdictState:
    """What one process keeps of a taxonomy at one revision: every curator's verdict and
    rejected group (a few thousand rows, read whole), and the hit members and groups read so
    far (None: no longer in the taxonomy)."""

    revision: int
    curators: dict[str, list[tuple[int, int]]]  # by normalized text: (group, member), newest first
    curator_members: dict[int, MemberRow]
    rejected: dict[str, frozenset[int]]
    none_of_these: frozenset[str] = frozenset()
    members: dict[int, MemberRow | None] = field(default_factory=dict)
    groups: dict[int, tuple[str, str] | None] = field(default_factory=dict)


_lock = threading.Lock()
_states: dict[int, _VerdictState] = {}  # by taxonomy id


def normalization_rows(
    taxonomy_id: int,
    member_ids: Collection[int],
    keys: Collection[str],
    *,
    revision: int | None = None,
) -> NormalizationRows:
    """What normalizing texts (``keys``: normalized) with these hit members reads. With the
    ``revision`` read before (``taxonomy_revision``), from what this process keeps at it, reading
    only hit members it has not seen; without, one query."""
    if revision is None:
        return _read_rows(taxonomy_id, member_ids, keys)
    state = _state(taxonomy_id, revision)
    unseen = [m for m in member_ids if m not in state.members]
    if unseen:
        read = _member_rows(taxonomy_id, unseen)
        state.members.update({m: read.get(m) for m in unseen})
    found = NormalizationRows()
    for member_id in member_ids:
        row = state.members[member_id]
        if row is not None:
            found.members[member_id] = row
    for key in keys:
        said = state.curators.get(key)
        if said:
            found.verdict_groups[key] = list(said)
            for _, member_id in said:
                found.members[member_id] = state.curator_members[member_id]
        rejected = state.rejected.get(key)
        if rejected:
            found.rejected[key] = set(rejected)
        if key in state.none_of_these:
            found.none_of_these.add(key)
    return found


def group_names(
    taxonomy_id: int, group_ids: Collection[int], *, revision: int | None = None
) -> dict[int, tuple[str, str]]:
    """Code and name of each of these groups that exists; kept as ``normalization_rows`` keeps
    its rows."""
    state = _state(taxonomy_id, revision) if revision is not None else None
    unseen = [g for g in group_ids if state is None or g not in state.groups]
    read = {}
    if unseen:
        read = {
            group_id: (code, name)
            for group_id, code, name in Group.objects.filter(
                taxonomy_id=taxonomy_id, id__in=unseen
            ).values_list("id", "code", "name")
        }
    if state is None:
        return read
    state.groups.update({g: read.get(g) for g in unseen})
    return {g: state.groups[g] for g in group_ids if state.groups[g] is not None}


def forget_verdict_states() -> None:
    with _lock:
        _states.clear()


def _state(taxonomy_id: int, revision: int) -> _VerdictState:
    with _lock:
        state = _states.get(taxonomy_id)
    if state is not None and state.revision == revision:
        return state
    read = _read_rows(taxonomy_id, (), None)
    state = _VerdictState(
        revision=revision,
        curators={key: list(said) for key, said in read.verdict_groups.items()},
        curator_members=read.members,
        rejected={key: frozenset(groups) for key, groups in read.rejected.items()},
        none_of_these=frozenset(read.none_of_these),
    )
    with _lock:
        current = _states.get(taxonomy_id)
        # Two threads that read two revisions keep the newer.
        if current is None or current.revision <= revision:
            _states[taxonomy_id] = state
    return state


def _member_rows(taxonomy_id: int, member_ids: Collection[int]) -> dict[int, MemberRow]:
    hit, hit_ids = _one_of("m.id", member_ids, "bigint")
    rows = prepared_rows(
        f"SELECT m.id, m.group_id, m.text, g.code, g.name, m.source "
        f"FROM {_member_with_group()} WHERE {hit} AND m.taxonomy_id = %s",
        [hit_ids, taxonomy_id],
    )
    curator = Member.Source.CURATOR.value
    return {
        member_id: MemberRow(group_id, text, code, name, source == curator)
        for member_id, group_id, text, code, name, source in rows
    }


def _read_rows(
    taxonomy_id: int, member_ids: Collection[int], keys: Collection[str] | None
) -> NormalizationRows:
    """``normalization_rows`` in one query; ``keys`` None: every text curators said anything
    of, with no hit members (what ``_VerdictState`` keeps)."""
    hit, hit_ids = _one_of("m.id", member_ids, "bigint")
    if keys is None:
        said, said_keys, rejected, rejected_keys = "true", None, "true", None
    else:
        said, said_keys = _one_of("m.normalized_text", keys, "text")
        rejected, rejected_keys = _one_of("i.normalized_text", keys, "text")
    number, text = "CAST(NULL AS BIGINT)", "CAST(NULL AS TEXT)"
    members = _member_with_group()
    final = ", ".join(f"'{verdict}'" for verdict in Judgement.FINAL_VERDICTS)
    params = [hit_ids, taxonomy_id, said_keys, taxonomy_id, Member.Source.CURATOR.value,
              rejected_keys, taxonomy_id, rejected_keys, taxonomy_id]  # fmt: skip
    rows = prepared_rows(
        f"SELECT 0, m.id, m.group_id, m.text, g.code, g.name, m.source "
        f"FROM {members} WHERE {hit} AND m.taxonomy_id = %s "
        "UNION ALL "
        f"SELECT 1, m.id, m.group_id, m.text, g.code, g.name, m.normalized_text "
        f"FROM {members} "
        f"WHERE {said} AND m.taxonomy_id = %s AND m.source = %s "
        "UNION ALL "
        f"SELECT 2, {number}, j.rejected_group_id, {text}, {text}, {text}, i.normalized_text "
        f"FROM {_JUDGEMENT} j JOIN {_ITEM} r ON r.id = j.review_item_id "
        f"JOIN {_INPUT} i ON i.id = r.input_id WHERE {rejected} AND r.taxonomy_id = %s "
        "AND j.undone_at IS NULL AND j.rejected_group_id IS NOT NULL "
        "UNION ALL "
        # Texts whose latest live final verdict is "none of these": the curators' answer too.
        f"SELECT 3, {number}, {number}, {text}, {text}, {text}, i.normalized_text "
        f"FROM {_JUDGEMENT} j JOIN {_ITEM} r ON r.id = j.review_item_id "
        f"JOIN {_INPUT} i ON i.id = r.input_id WHERE {rejected} AND r.taxonomy_id = %s "
        "AND j.undone_at IS NULL AND j.verdict = 'none' AND NOT EXISTS ("
        f"SELECT 1 FROM {_JUDGEMENT} later WHERE later.review_item_id = j.review_item_id "
        f"AND later.undone_at IS NULL AND later.verdict IN ({final}) AND later.id > j.id)",
        [p for p in params if p is not None],
    )
    found = NormalizationRows()
    curators = []
    curator = Member.Source.CURATOR.value
    for kind, member_id, group_id, member_text, code, name, last in rows:
        if kind == 0:
            found.members[member_id] = MemberRow(group_id, member_text, code, name, last == curator)
        elif kind == 1:
            found.members[member_id] = MemberRow(group_id, member_text, code, name, True)
            curators.append((member_id, group_id, last))
        elif kind == 2:
            found.rejected[last].add(group_id)
        else:
            found.none_of_these.add(last)
    # Newest first, sorted here: asked to sort by id, SQLite walks every member of the
    # taxonomy in id order instead of looking the texts up.
    for member_id, group_id, key in sorted(curators, reverse=True):
        found.verdict_groups[key].append((group_id, member_id))
    return found
