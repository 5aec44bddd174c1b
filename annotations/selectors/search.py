"""The reassign search: the groups a curator may mean by what they type."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from django.db.models.functions import Length

from annotations.models import (
    Group,
    Member,
    Taxonomy,
)
from annotations.text_rule import TextError, clean_text
from models_app.serving.group_search import taxonomy_groups_for_query


@dataclass(frozen=True)
class GroupFound:
    group: Group
    why: str  # "name" (its name or code), a member's text that holds the query, or "similar"


# Of the groups a reassign search offers, this many at most are the encoder's nearest for the
# query that no word found: a synonym or a misspelling is always answered beside the words.
SIMILAR_OFFERED = 3


def reassign_group_search(
    *,
    taxonomy: Taxonomy,
    query: str,
    exclude: Collection[int] = (),
    scores: Mapping[int, float] | None = None,
    limit: int = 10,
) -> list[GroupFound]:
    """The groups a curator reassigning an input may mean by ``query``, best first, by code,
    name, member titles (an abbreviation: "RN" finds Registered Nurses by its titles "ER RN",
    "Dialysis RN") and meaning (``group_search.taxonomy_groups_for_query``); ``scores``, the
    model's for the input, orders groups the words find equally well. A group found by a title
    names its shortest title holding the words."""
    try:
        query = clean_text(query, max_length=200)
    except TextError:
        return []
    matches = taxonomy_groups_for_query(
        taxonomy, query, limit=limit, meaning=SIMILAR_OFFERED, exclude=exclude, prefer=scores
    )
    groups = Group.objects.in_bulk([match.group_id for match in matches])
    # The titles named are read now: one moved or removed since the index was built is not shown.
    titles: dict[int, str] = {}
    for group_id, text in (
        Member.objects.filter(
            id__in=[m for match in matches if match.how == "member" for m in match.member_ids]
        )
        .order_by(Length("text"), "id")
        .values_list("group_id", "text")
    ):
        titles.setdefault(group_id, text)
    found = []
    for match in matches:
        group = groups.get(match.group_id)
        if group is None:  # deleted since the groups were read
            continue
        if match.how == "meaning":
            why = "similar"
        elif match.how == "member":
            why = titles.get(group.id, "name")
        else:
            why = "name"
        found.append(GroupFound(group, why))
    return found
