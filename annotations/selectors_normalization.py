"""The rows a normalization reads besides the index: hit members with their groups, the groups
curators put these very texts in, and the groups they rejected for them.

Plain SQL: a one-text request ran three such reads through the ORM, whose building cost more
than the database (about 1 ms each on 2 cores, against 0.1 to 0.3 ms of query). A set of values is
one parameter, an array on PostgreSQL and a JSON list on SQLite, whatever its size: a bulk chunk
looks up tens of thousands of member ids.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection

from django.db import connection

from annotations.models import Group, Input, Judgement, Member, ReviewItem

_MEMBER = Member._meta.db_table
_GROUP = Group._meta.db_table
_JUDGEMENT = Judgement._meta.db_table
_ITEM = ReviewItem._meta.db_table
_INPUT = Input._meta.db_table

MemberRow = tuple[int, str, str, str]  # group id, text, group code, group name


def _one_of(column: str, values: Collection, kind: str) -> tuple[str, object]:
    """``column IN values`` as SQL with one parameter (``kind``: "bigint" or "text")."""
    if connection.vendor == "postgresql":
        if kind == "bigint":
            # An array literal: psycopg adapts a list value by value in Python.
            return f"{column} = ANY(%s::bigint[])", "{" + ",".join(map(str, values)) + "}"
        return f"{column} = ANY(%s::text[])", list(values)
    return f"{column} IN (SELECT value FROM json_each(%s))", json.dumps(list(values))


def _rows(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def members_by_id(taxonomy_id: int, member_ids: Collection[int]) -> dict[int, MemberRow]:
    """Each of these members that still exists, read now: a member moved or deleted since the
    index was built is ranked where it is today, or not at all."""
    if not member_ids:
        return {}
    condition, values = _one_of("m.id", member_ids, "bigint")
    rows = _rows(
        f"SELECT m.id, m.group_id, m.text, g.code, g.name FROM {_MEMBER} m "
        f"JOIN {_GROUP} g ON g.id = m.group_id WHERE {condition} AND m.taxonomy_id = %s",
        [values, taxonomy_id],
    )
    return {member_id: tuple(rest) for member_id, *rest in rows}


def curator_members(
    taxonomy_id: int, keys: Collection[str]
) -> tuple[dict[str, list[tuple[int, int]]], dict[int, MemberRow]]:
    """Per normalized text, the (group, member) pairs curators put it in, newest first; and
    those members' rows."""
    found: dict[str, list[tuple[int, int]]] = defaultdict(list)
    members: dict[int, MemberRow] = {}
    if not keys:
        return found, members
    condition, values = _one_of("m.normalized_text", keys, "text")
    rows = _rows(
        f"SELECT m.normalized_text, m.id, m.group_id, m.text, g.code, g.name FROM {_MEMBER} m "
        f"JOIN {_GROUP} g ON g.id = m.group_id "
        f"WHERE {condition} AND m.taxonomy_id = %s AND m.source = %s",
        [values, taxonomy_id, Member.Source.CURATOR.value],
    )
    # Newest first, sorted here: asked to sort by id, SQLite walks every member of the
    # taxonomy in id order instead of looking the texts up (33 ms, not 0.1, on O*NET).
    rows.sort(key=lambda row: row[1], reverse=True)
    for key, member_id, *member in rows:
        members[member_id] = tuple(member)
        found[key].append((member[0], member_id))
    return found, members


def rejected_groups(taxonomy_id: int, keys: Collection[str]) -> dict[str, set[int]]:
    """Per normalized text, the groups a live verdict said it is not in."""
    found: dict[str, set[int]] = defaultdict(set)
    if not keys:
        return found
    condition, values = _one_of("i.normalized_text", keys, "text")
    rows = _rows(
        f"SELECT i.normalized_text, j.rejected_group_id FROM {_JUDGEMENT} j "
        f"JOIN {_ITEM} r ON r.id = j.review_item_id JOIN {_INPUT} i ON i.id = r.input_id "
        f"WHERE {condition} AND r.taxonomy_id = %s AND j.undone_at IS NULL "
        f"AND j.rejected_group_id IS NOT NULL",
        [values, taxonomy_id],
    )
    for key, group_id in rows:
        found[key].add(group_id)
    return found
