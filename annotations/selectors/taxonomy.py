"""Reads for the taxonomy administration pages, the export and the audit trail."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.core.paginator import Page, Paginator
from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from annotations.models import AuditEvent, Group, Member, Taxonomy
from annotations.text_rule import comparison_key

CSV_EXPORT_COLUMNS = ("group_code", "group_name", "text", "description")


def _count_of(queryset: QuerySet) -> Subquery:
    return Coalesce(
        Subquery(
            queryset.order_by().values("taxonomy").annotate(n=Count("id")).values("n"),
            output_field=IntegerField(),
        ),
        0,
    )


def taxonomies_with_counts() -> list[Taxonomy]:
    """Every taxonomy with ``group_count`` and ``member_count``: one query, each count an index
    scan of one taxonomy's rows."""
    return list(
        Taxonomy.objects.annotate(
            group_count=_count_of(Group.objects.filter(taxonomy=OuterRef("pk"))),
            member_count=_count_of(Member.objects.filter(taxonomy=OuterRef("pk"))),
        ).order_by("slug")
    )


def taxonomy_counts(taxonomy: Taxonomy) -> dict[str, int]:
    return {
        "groups": Group.objects.filter(taxonomy=taxonomy).count(),
        "members": Member.objects.filter(taxonomy=taxonomy).count(),
    }


def group_get(*, taxonomy: Taxonomy, code: str) -> Group | None:
    return Group.objects.filter(taxonomy=taxonomy, code=code).select_related("taxonomy").first()


@dataclass(frozen=True)
class GroupMatches:
    groups: list[Group]  # each with ``member_count``
    more: bool  # more groups match than are shown: type more of the name


def taxonomy_group_search(
    *, taxonomy: Taxonomy, query: str, limit: int = 50, exclude: Group | None = None
) -> GroupMatches:
    """Groups matching ``query``, at most ``limit``, with their member counts.

    A group matches when its name contains every word or its code starts with them; groups
    holding the query as one of their strings exactly come first (an indexed lookup), then
    codes that start with the query, then the shortest names. An empty query lists groups by
    code. Candidates are capped before sorting, so a vague query over thousands of groups
    costs a bounded read.
    """
    words = query.split()[:6]
    groups = Group.objects.filter(taxonomy=taxonomy)
    if exclude is not None:
        groups = groups.exclude(id=exclude.id)
    if not words:
        found = list(groups.order_by("code")[: limit + 1])
        return GroupMatches(_with_member_counts(found[:limit]), more=len(found) > limit)

    by_member = list(
        groups.filter(
            id__in=Member.objects.filter(
                taxonomy=taxonomy, normalized_text=comparison_key(query)
            ).values("group_id")
        ).order_by("code")[:limit]
    )
    matching = groups
    for word in words:
        matching = matching.filter(Q(name__icontains=word) | Q(code__istartswith=word))
    cap = max(200, 4 * limit)
    candidates = list(matching.order_by("code")[: cap + 1])
    prefix = query.strip().casefold()
    candidates.sort(
        key=lambda g: (not g.code.casefold().startswith(prefix), len(g.name), g.name, g.code)
    )
    seen = {g.id for g in by_member}
    ordered = by_member + [g for g in candidates if g.id not in seen]
    more = len(ordered) > limit or len(candidates) > cap
    return GroupMatches(_with_member_counts(ordered[:limit]), more=more)


def _with_member_counts(groups: list[Group]) -> list[Group]:
    counts = dict(
        Member.objects.filter(group_id__in=[g.id for g in groups])
        .order_by()
        .values("group_id")
        .annotate(n=Count("id"))
        .values_list("group_id", "n")
    )
    for g in groups:
        g.member_count = counts.get(g.id, 0)
    return groups


MEMBERS_PER_PAGE = 100


def group_members_page(*, group: Group, page: int | str | None) -> Page:
    """One page of ``group``'s members, alphabetical, each with who added it and ``also_in``:
    the codes of the other groups that hold the same string (one query for the page)."""
    members = Member.objects.filter(group=group).select_related("added_by").order_by("text", "id")
    result = Paginator(members, MEMBERS_PER_PAGE).get_page(page)
    elsewhere: dict[str, list[str]] = defaultdict(list)
    rows = (
        Member.objects.filter(
            taxonomy_id=group.taxonomy_id,
            normalized_text__in={m.normalized_text for m in result.object_list},
        )
        .exclude(group=group)
        .order_by("group__code")
        .values_list("normalized_text", "group__code")
    )
    for normalized, code in rows:
        elsewhere[normalized].append(code)
    for m in result.object_list:
        m.also_in = elsewhere.get(m.normalized_text, [])
    return result


def taxonomy_export_rows(taxonomy: Taxonomy) -> Iterator[tuple[str, str, str, str]]:
    """Every member as a row the csv importer reads back: (group_code, group_name, text,
    description), by group code then text; a group's description on its first row only. After
    them each group without members, on one row with an empty text, so an import of the export
    has every group.

    Streamed from a server-side cursor, so a taxonomy of any size costs constant memory.
    """
    rows = (
        Member.objects.filter(taxonomy=taxonomy)
        .order_by("group__code", "text", "id")
        .values_list("group__code", "group__name", "text", "group__description")
        .iterator(chunk_size=2000)
    )
    previous = None
    for code, name, text, description in rows:
        yield code, name, text, (description if code != previous else "")
        previous = code
    memberless = (
        Group.objects.filter(taxonomy=taxonomy, members__isnull=True)
        .order_by("code")
        .values_list("code", "name", "description")
        .iterator(chunk_size=2000)
    )
    for code, name, description in memberless:
        yield code, name, "", description


AUDIT_PAGE_SIZE = 50


@dataclass(frozen=True)
class AuditPage:
    events: list[AuditEvent]
    next_before: int | None  # the ``before`` of the next (older) page; None on the last one


def audit_events_page(
    *,
    taxonomy: Taxonomy | None = None,
    actor: str = "",
    action: str = "",
    before: int | None = None,
    limit: int = AUDIT_PAGE_SIZE,
) -> AuditPage:
    """Audit events newest first, keyset-paginated from the event ``before`` names: a deep page
    costs what the first does.

    ``action`` is one action ("member.move") or, without a dot, every action of one entity
    ("member"). ``actor`` is a username; an unknown one matches nothing.
    """
    events = AuditEvent.objects.all()
    if taxonomy is not None:
        events = events.filter(taxonomy=taxonomy)
    if actor:
        user_id = (
            get_user_model().objects.filter(username=actor).values_list("id", flat=True).first()
        )
        if user_id is None:
            return AuditPage(events=[], next_before=None)
        events = events.filter(actor_id=user_id)
    if action:
        events = (
            events.filter(action=action)
            if "." in action
            else events.filter(action__startswith=f"{action}.")
        )
    # Within one taxonomy the (taxonomy, -created_at) index gives the order; across all of
    # them the primary key does. Either way a page starts where the last one ended.
    order = ("-created_at", "-id") if taxonomy is not None else ("-id",)
    if before is not None:
        if taxonomy is None:
            events = events.filter(id__lt=before)
        else:
            when = AuditEvent.objects.filter(id=before).values_list("created_at", flat=True).first()
            if when is None:
                return AuditPage(events=[], next_before=None)
            events = events.filter(Q(created_at__lt=when) | Q(created_at=when, id__lt=before))
    found = list(events.select_related("actor", "taxonomy").order_by(*order)[: limit + 1])
    page = found[:limit]
    return AuditPage(events=page, next_before=page[-1].id if len(found) > limit else None)
