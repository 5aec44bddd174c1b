"""The rows a normalization reads besides the index, in one query: hit members with their
groups and sources, the groups curators put these very texts in, and the groups they rejected
for them.

Plain SQL: run as four ORM queries they cost a one-text request more than the database did
(about 1 ms each on 2 cores), and as four plain ones still 1.4 ms against 0.7 ms as one. A set
of values is one parameter, an array on PostgreSQL and a JSON list on SQLite, whatever its size:
a bulk chunk looks up tens of thousands of member ids.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field

from django.db import connection

from annotations.models import Group, Input, Judgement, Member, ReviewItem
from siamweb.plain_sql import prepared_rows

_MEMBER = Member._meta.db_table
_GROUP = Group._meta.db_table
_JUDGEMENT = Judgement._meta.db_table
_ITEM = ReviewItem._meta.db_table
_INPUT = Input._meta.db_table

# group id, text, group code, group name, whether a curator's verdict put it there
MemberRow = tuple[int, str, str, str, bool]


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


def normalization_rows(
    taxonomy_id: int, member_ids: Collection[int], keys: Collection[str]
) -> NormalizationRows:
    """What normalizing texts (``keys``: normalized) with these hit members reads, one query."""
    hit, hit_ids = _one_of("m.id", member_ids, "bigint")
    said, said_keys = _one_of("m.normalized_text", keys, "text")
    rejected, rejected_keys = _one_of("i.normalized_text", keys, "text")
    number, text = "CAST(NULL AS BIGINT)", "CAST(NULL AS TEXT)"
    members = _member_with_group()
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
        "AND j.undone_at IS NULL AND j.rejected_group_id IS NOT NULL",
        [hit_ids, taxonomy_id, said_keys, taxonomy_id, Member.Source.CURATOR.value,
         rejected_keys, taxonomy_id],
    )  # fmt: skip
    found = NormalizationRows()
    curators = []
    curator = Member.Source.CURATOR.value
    for kind, member_id, group_id, member_text, code, name, last in rows:
        if kind == 0:
            found.members[member_id] = (group_id, member_text, code, name, last == curator)
        elif kind == 1:
            found.members[member_id] = (group_id, member_text, code, name, True)
            curators.append((member_id, group_id, last))
        else:
            found.rejected[last].add(group_id)
    # Newest first, sorted here: asked to sort by id, SQLite walks every member of the
    # taxonomy in id order instead of looking the texts up.
    for member_id, group_id, key in sorted(curators, reverse=True):
        found.verdict_groups[key].append((group_id, member_id))
    return found
