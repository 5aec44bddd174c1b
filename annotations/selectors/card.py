"""What the review card shows: the groups still offered, their members, descriptions and
probabilities, and the card a curator holds."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from django.db.models import (
    Case,
    Count,
    F,
    Value,
    When,
    Window,
)
from django.db.models.functions import RowNumber
from django.utils import timezone

from annotations.models import (
    Group,
    Judgement,
    Member,
    ReviewItem,
)
from annotations.services.review.verdict_rules import LiveVerdict, rejected_group_ids
from annotations.text_rule import comparison_key
from models_app.serving.normalize import LOW_CONFIDENCE, tied_as_shown
from models_app.siamese.text_match import matched_parts, nearest, words


def rejected_groups_for(item: ReviewItem, *, user=None) -> set[int]:
    """Groups already rejected for this item's input. On an item sampled for double review,
    only ``user``'s own rejections count, so the second curator judges independently."""
    rows = (
        Judgement.objects.live()
        .filter(review_item=item, rejected_group__isnull=False)
        .values_list("user_id", "verdict", "group_id", "rejected_group_id")
    )
    return rejected_group_ids(
        [LiveVerdict(*row) for row in rows],
        reviews_required=item.reviews_required,
        user_id=user.id if user is not None else None,
    )


def rejected_group_names(item: ReviewItem, *, user=None) -> list[str]:
    """The names of the groups ``rejected_groups_for`` returns, alphabetically."""
    ids = rejected_groups_for(item, user=user)
    return list(Group.objects.filter(id__in=ids).order_by("name").values_list("name", flat=True))


def review_card_groups(item: ReviewItem, *, user=None) -> list[dict]:
    """The prediction's ranked groups, less those already rejected for this input; a group is
    tied with the first one left when their probabilities, as the card shows them, are too
    close to tell apart (``tied_as_shown``; a partner rejected leaves no tie behind)."""
    rejected = rejected_groups_for(item, user=user)
    groups = [dict(g) for g in item.prediction.ranked_groups if g["group_id"] not in rejected]
    if not rejected or not groups or groups[0].get("probability") is None:
        return groups
    top = groups[0]["probability"]
    for group in groups:
        probability = group.get("probability")
        group["tied"] = probability is not None and bool(tied_as_shown(top, probability))
    groups[0]["tied"] = len(groups) > 1 and groups[1]["tied"]
    return groups


def review_item_held(*, user, item_id: int) -> ReviewItem | None:
    """The open card ``item_id`` if ``user`` holds its lease now, ready to show; else None.

    The pages show this one again after a refused verdict or an undo, rather than whichever
    held card comes first in the queue."""
    return (
        ReviewItem.objects.filter(
            id=item_id,
            leased_by=user,
            lease_expires_at__gt=timezone.now(),
            status__in=[*ReviewItem.OPEN_STATUSES, ReviewItem.Status.SKIPPED],
        )
        .select_related("input__taxonomy", "prediction__model_version__taxonomy", "top_group")
        .first()
    )


def review_card_members(
    *, groups: Sequence[dict], text: str = "", per_group: int = 3, scan: int = 200
) -> dict[int, list[str]]:
    """Up to ``per_group`` member strings of each shown group, besides the one its prediction
    matched (``groups`` are ranked-group dicts): the members nearest ``text`` by character
    trigrams, what the group means as seen from the input. One query for all groups; a group
    with more than ``scan`` members is read in part (taxonomy titles, then admin and curator
    members, oldest first)."""
    group_ids = [g["group_id"] for g in groups]
    if not group_ids:
        return {}
    matched = [g["member_id"] for g in groups if g.get("member_id")]
    # Taxonomy titles first: they say what the group is; curator members follow.
    source_rank = Case(
        When(source=Member.Source.TAXONOMY, then=Value(0)),
        When(source=Member.Source.ADMIN, then=Value(1)),
        default=Value(2),
    )
    shown = Member.objects.filter(group_id__in=group_ids).exclude(id__in=matched)
    if text:
        # The input's own text as a member is a curator's verdict on it (a double review's
        # first): shown, it would tell the next curator where the first put it.
        shown = shown.exclude(normalized_text=comparison_key(text))
    rows = (
        shown.annotate(
            rank=Window(RowNumber(), partition_by=[F("group_id")], order_by=[source_rank, F("id")])
        )
        .filter(rank__lte=scan if text else per_group)
        .order_by("group_id", "rank")
        .values_list("group_id", "text")
    )
    members: dict[int, list[str]] = defaultdict(list)
    for group_id, member in rows:
        members[group_id].append(member)
    if text:
        # Stable sort: equally near members keep the taxonomy-titles-first order.
        for group_id, texts in members.items():
            members[group_id] = nearest(text, texts, per_group)
    return dict(members)


def group_members_sample(*, group: Group, limit: int = 8) -> list[str]:
    """A few member strings of ``group``, taxonomy titles first: what the group stands for."""
    return list(
        Member.objects.filter(group=group)
        .order_by(Case(When(source=Member.Source.TAXONOMY, then=Value(0)), default=Value(1)), "id")
        .values_list("text", flat=True)[:limit]
    )


def low_confidence(probability: float | None) -> bool:
    """Whether a card or tile is marked low: its top group less likely right than not."""
    return probability is not None and probability < LOW_CONFIDENCE


def member_marker(text: str) -> Callable[[str], list[tuple[str, bool]]]:
    """A function that cuts a member string into parts, marking the words of ``text`` it holds:
    the card marks them (escaped as any text)."""
    input_words = words(text)
    return lambda member: matched_parts(member, input_words)


def review_items_probability(items) -> dict[int, float]:
    """The chance each item's top group is right, as the ranker said when it predicted the item
    (by item id; review items with their prediction loaded). Items predicted before the
    taxonomy's ranker was calibrated have none, nor items whose top group is the curators'
    answer now, not the prediction's first (the chance was said of another group)."""
    found = {}
    for item in items:
        groups = item.prediction.ranked_groups
        if not groups or groups[0].get("group_id") != item.top_group_id:
            continue
        probability = groups[0].get("probability")
        if probability is not None:
            found[item.id] = float(probability)
    return found


def group_descriptions(group_ids) -> dict[int, str]:
    """Each group's description (blank ones left out), for the card to show what it means."""
    rows = Group.objects.filter(id__in=list(group_ids)).exclude(description="")
    return dict(rows.values_list("id", "description"))


def group_curator_counts(group_ids) -> dict[int, int]:
    """How many texts curators put in each group (its curator members): evidence the card
    names beside a group's probability. Groups with none are left out."""
    rows = (
        Member.objects.filter(group_id__in=list(group_ids), source=Member.Source.CURATOR)
        .order_by()
        .values_list("group_id")
        .annotate(n=Count("id"))
    )
    return dict(rows)
