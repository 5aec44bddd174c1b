"""Fold nearest-member hits into a ranked list of groups."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class GroupHit:
    group_id: int
    score: float
    member_id: int  # the member that gave the group its score: the evidence a curator sees


def rank_groups(
    hits: Iterable[tuple[int, float]],
    group_of_member: Mapping[int, int],
    *,
    k: int,
    excluded_groups: frozenset[int] = frozenset(),
) -> list[GroupHit]:
    """A group scores as its best member; members with no known group are ignored.

    Ties keep the order of first appearance, so a stable hit order gives a stable ranking.
    """
    best: dict[int, GroupHit] = {}
    for member_id, score in hits:
        group_id = group_of_member.get(member_id)
        if group_id is None or group_id in excluded_groups:
            continue
        current = best.get(group_id)
        if current is None or score > current.score:
            best[group_id] = GroupHit(group_id, float(score), member_id)
    return sorted(best.values(), key=lambda hit: -hit.score)[:k]
