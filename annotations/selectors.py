"""Reads for the review pages and the API."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Value,
    When,
    Window,
)
from django.db.models.functions import Length, RowNumber, TruncDate
from django.utils import timezone

from annotations.models import (
    Group,
    Input,
    Judgement,
    Member,
    ReviewFlag,
    ReviewItem,
    Taxonomy,
)
from models_app.serving.group_search import taxonomy_groups_for_query
from models_app.siamese.text import TextError, clean_text
from models_app.siamese.text_match import nearest


@dataclass(frozen=True)
class QueueFilters:
    """What a curator narrows the queue to. ``status`` None means every open item, then the
    skipped ones once those are done."""

    taxonomy: Taxonomy | None = None
    group: Group | None = None
    score_min: float | None = None
    score_max: float | None = None
    status: str | None = None
    include_skipped: bool = True

    def statuses_in_order(self) -> list[str]:
        """One status per pass, so each pass is an index scan in priority order. Items left
        waiting for the right group after a false match come first: they are half done."""
        if self.status:
            return [self.status]
        order = [ReviewItem.Status.AWAITING_GROUP, ReviewItem.Status.PENDING]
        return [*order, ReviewItem.Status.SKIPPED] if self.include_skipped else order


def review_queue(
    *, filters: QueueFilters, user=None, status: str | None = None
) -> QuerySet[ReviewItem]:
    """Items matching ``filters``, most worth a look first; with ``user``, less the items that
    curator already judged (double review asks a *second* curator)."""
    statuses = [status] if status else filters.statuses_in_order()
    items = ReviewItem.objects.filter(status__in=statuses)
    taxonomy = filters.group.taxonomy if filters.group is not None else filters.taxonomy
    if taxonomy is not None:
        items = items.filter(taxonomy=taxonomy)
    if filters.group is not None:
        items = items.filter(top_group=filters.group)
    if filters.score_min is not None:
        items = items.filter(top_score__gte=filters.score_min)
    if filters.score_max is not None:
        items = items.filter(top_score__lte=filters.score_max)
    if user is not None:
        judged = Judgement.objects.live().filter(
            review_item=OuterRef("pk"), user=user, verdict__in=Judgement.FINAL_VERDICTS
        )
        items = items.exclude(Exists(judged))
    return items.order_by("-priority", "id")


def review_queue_page(
    *, filters: QueueFilters, user=None, after: tuple[float, int] | None = None, limit: int = 50
) -> list[ReviewItem]:
    """One page of one status of the queue (pending unless the filters say otherwise),
    keyset-paginated on (priority, id): a deep page costs what the first one does."""
    items = review_queue(
        filters=filters, user=user, status=filters.status or ReviewItem.Status.PENDING
    )
    if after is not None:
        priority, item_id = after
        # ``priority <= p`` on its own lets PostgreSQL start the index scan at the cursor; the OR
        # alone would be a filter, and a deep page would walk every row before it.
        items = items.filter(priority__lte=priority).filter(
            Q(priority__lt=priority) | Q(id__gt=item_id)
        )
    return list(items.select_related("input", "top_group", "leased_by")[:limit])


def rejected_groups_for(item: ReviewItem, *, user=None) -> set[int]:
    """Groups already rejected for this item's input. On an item sampled for double review,
    only ``user``'s own rejections count, so the second curator judges independently."""
    judgements = Judgement.objects.live().filter(review_item=item, rejected_group__isnull=False)
    if item.reviews_required > 1 and user is not None:
        judgements = judgements.filter(user=user)
    return set(judgements.values_list("rejected_group_id", flat=True))


def rejected_group_names(item: ReviewItem, *, user=None) -> list[str]:
    """The names of the groups ``rejected_groups_for`` returns, alphabetically."""
    ids = rejected_groups_for(item, user=user)
    return list(Group.objects.filter(id__in=ids).order_by("name").values_list("name", flat=True))


def review_card_groups(item: ReviewItem, *, user=None) -> list[dict]:
    """The prediction's ranked groups, less those already rejected for this input."""
    rejected = rejected_groups_for(item, user=user)
    return [g for g in item.prediction.ranked_groups if g["group_id"] not in rejected]


def review_counts(*, filters: QueueFilters | None = None) -> dict[str, int]:
    """How many items are open, skipped, done and in conflict, within the filters' taxonomy."""
    filters = filters or QueueFilters()
    items = ReviewItem.objects.all()
    taxonomy = filters.group.taxonomy if filters.group is not None else filters.taxonomy
    if taxonomy is not None:
        items = items.filter(taxonomy=taxonomy)
    if filters.group is not None:
        items = items.filter(top_group=filters.group)
    by_status = dict(
        items.order_by().values_list("status").annotate(n=Count("id")).values_list("status", "n")
    )
    return {
        "open": sum(by_status.get(s, 0) for s in ReviewItem.OPEN_STATUSES),
        "skipped": by_status.get(ReviewItem.Status.SKIPPED, 0),
        "done": by_status.get(ReviewItem.Status.DONE, 0),
        "conflicts": items.filter(conflict=True).count(),
    }


def review_batch_queue(*, user, taxonomy: Taxonomy, group: Group | None = None):
    """The pending items ``user`` can judge in batch review now (of ``group``, or of every group
    of the taxonomy), most worth a look first.

    The groups list counts these, the batch page counts and leases them: one definition, so the
    two pages cannot disagree. Left out: items another curator holds, items ``user`` already
    judged (double review waits for someone else), and items whose predicted group was rejected
    in a way that counts for ``user`` (see ``rejected_groups_for``): neither verdict of a batch
    could be recorded on those, so they are the single card's to settle.
    """
    now = timezone.now()
    items = review_queue(
        filters=QueueFilters(
            taxonomy=taxonomy, group=group, status=ReviewItem.Status.PENDING, include_skipped=False
        ),
        user=user,
    ).exclude(top_group=None)
    items = items.filter(
        Q(leased_by__isnull=True) | Q(lease_expires_at__lte=now) | Q(leased_by=user)
    )
    rejected_here = Judgement.objects.live().filter(
        review_item=OuterRef("pk"), rejected_group=OuterRef("top_group")
    )
    return items.exclude(Exists(rejected_here.filter(user=user))).exclude(
        Exists(rejected_here), reviews_required__lte=1
    )


def review_groups_pending(*, taxonomy: Taxonomy, user, limit: int = 100) -> list[dict]:
    """Groups with the most items ``user`` can batch-review now: where batch review pays most."""
    rows = (
        review_batch_queue(user=user, taxonomy=taxonomy)
        .order_by()
        .values("top_group")
        .annotate(pending=Count("id"))
        .order_by("-pending", "top_group")[:limit]
    )
    groups = Group.objects.in_bulk([row["top_group"] for row in rows])
    return [{"group": groups[row["top_group"]], "pending": row["pending"]} for row in rows]


def review_conflicts(*, taxonomy: Taxonomy | None = None) -> QuerySet[ReviewItem]:
    items = ReviewItem.objects.filter(conflict=True)
    if taxonomy is not None:
        items = items.filter(taxonomy=taxonomy)
    return items.select_related("input", "taxonomy").prefetch_related(
        Prefetch(
            "judgements",
            queryset=Judgement.objects.live()
            .filter(verdict__in=Judgement.FINAL_VERDICTS)
            .select_related("user", "group"),
            to_attr="final_judgements",
        )
    )


def curator_stats(*, taxonomy: Taxonomy | None = None) -> list[dict]:
    """Per curator: live verdicts (today, the last seven days, a day on the days they worked),
    items also judged by someone else and the share of those where both put the input in the
    same place, and the share of their verdicts taken back since (undone or changed)."""
    every = Judgement.objects.all()
    if taxonomy is not None:
        every = every.filter(review_item__taxonomy=taxonomy)
    judgements = every.filter(undone_at__isnull=True)
    today = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    standing = Q(undone_at__isnull=True)
    figures = {
        row["user__username"]: row
        for row in every.order_by()
        .values("user__username")
        .annotate(
            given=Count("id"),
            verdicts=Count("id", filter=standing),
            today=Count("id", filter=standing & Q(created_at__gte=today)),
            week=Count("id", filter=standing & Q(created_at__gte=today - timedelta(days=6))),
            days=Count(TruncDate("created_at"), distinct=True, filter=standing),
            taken_back=Count("id", filter=Q(undone_at__isnull=False)),
        )
        if row["verdicts"]
    }
    shared_items = (
        judgements.filter(verdict__in=Judgement.FINAL_VERDICTS)
        .order_by()
        .values("review_item")
        .annotate(curators=Count("user", distinct=True))
        .filter(curators__gte=2)
        .values("review_item")
    )
    outcomes: dict[int, dict[str, object]] = defaultdict(dict)
    for item_id, username, verdict, group_id in judgements.filter(
        review_item__in=shared_items, verdict__in=Judgement.FINAL_VERDICTS
    ).values_list("review_item", "user__username", "verdict", "group"):
        outcomes[item_id][username] = "none" if verdict == Judgement.Verdict.NONE else group_id
    seen_twice: dict[str, int] = defaultdict(int)
    agreed: dict[str, int] = defaultdict(int)
    for per_user in outcomes.values():
        unanimous = len(set(per_user.values())) == 1
        for username in per_user:
            seen_twice[username] += 1
            agreed[username] += unanimous
    return [
        {
            "username": username,
            "verdicts": row["verdicts"],
            "today": row["today"],
            "last_7_days": row["week"],
            "per_day": row["verdicts"] / max(row["days"], 1),
            "reversal_rate": row["taken_back"] / row["given"],
            "seen_twice": seen_twice[username],
            "agreement": (agreed[username] / seen_twice[username])
            if seen_twice[username]
            else None,
        }
        for username, row in sorted(figures.items())
    ]


# Batches stay undoable from the batch pages for this long after they were submitted.
BATCH_UNDO_HOURS = 24


def recent_batches(*, user, taxonomy: Taxonomy, limit: int = 5) -> list[dict]:
    """``user``'s latest batches on ``taxonomy`` that still have verdicts standing, newest
    first: when, which group, how many confirmed and rejected, and those verdicts' ids."""
    since = timezone.now() - timedelta(hours=BATCH_UNDO_HOURS)
    rows = list(
        Judgement.objects.live()
        .filter(user=user, batch__isnull=False, review_item__taxonomy=taxonomy)
        .filter(created_at__gte=since)
        .order_by("-created_at", "-id")
        .values_list(
            "batch", "id", "verdict", "created_at",
            "group__code", "group__name", "rejected_group__code", "rejected_group__name",
        )
    )  # fmt: skip
    batches: dict = {}
    for batch, judgement_id, verdict, created_at, code, name, rejected_code, rejected in rows:
        entry = batches.setdefault(
            batch,
            {"batch": batch, "at": created_at, "code": code or rejected_code,
             "group": name or rejected, "ids": [], "confirmed": 0, "rejected": 0},
        )  # fmt: skip
        entry["ids"].append(judgement_id)
        entry["confirmed" if verdict == Judgement.Verdict.CONFIRM else "rejected"] += 1
    return list(batches.values())[:limit]


def completes_false_match(later: Judgement, earlier: Judgement) -> bool:
    """Whether ``later`` gave the group (or "none of these") to the input that ``earlier``, a
    false match by the same curator on the same item, left waiting for it: the two are one
    correction on the card, listed and taken back together."""
    return (
        later.previous_status == ReviewItem.Status.AWAITING_GROUP
        and later.verdict != Judgement.Verdict.SKIP
        and earlier.verdict == Judgement.Verdict.FALSE_MATCH
        and earlier.review_item_id == later.review_item_id
        and earlier.user_id == later.user_id
    )


def action_verdicts(judgement: Judgement) -> list[Judgement]:
    """The live verdicts one correction made, newest first: ``judgement`` and each false match
    it completed (``completes_false_match``), the item's verdict just before it each time."""
    found = [judgement]
    while True:
        earlier = (
            Judgement.objects.live()
            .filter(review_item_id=judgement.review_item_id)
            .filter(
                Q(created_at__lt=found[-1].created_at)
                | Q(created_at=found[-1].created_at, id__lt=found[-1].id)
            )
            .order_by("-created_at", "-id")
            .first()
        )
        if earlier is None or not completes_false_match(found[-1], earlier):
            return found
        found.append(earlier)


@dataclass(frozen=True)
class RecentVerdict:
    """A line of the curator's last verdicts: the verdict its Undo takes back, and the groups
    the false matches it completed ruled out, oldest first."""

    judgement: Judgement
    ruled_out: list[Group]


RECENT_SKIPS = 5


def recent_verdicts_and_skips(
    *, user, limit: int = 10, skips: int = RECENT_SKIPS
) -> tuple[list[RecentVerdict], list[Judgement]]:
    """Shown beside the card, each undoable: the curator's latest verdicts that still count, a
    false match and the verdict that completed it on one line; and apart, their latest skips
    still standing (a skip decides nothing, and would push the verdicts out of their list).
    One query: the newest of each kind, numbered apart."""
    is_skip = Case(When(verdict=Judgement.Verdict.SKIP, then=Value(1)), default=Value(0))
    newest = [F("created_at").desc(), F("id").desc()]
    rows = list(
        Judgement.objects.live()
        .filter(user=user)
        .select_related("review_item__input", "group", "rejected_group")
        .annotate(
            is_skip=is_skip, rank=Window(RowNumber(), partition_by=[is_skip], order_by=newest)
        )
        .filter(rank__lte=max(limit * 3, skips))
        .order_by("-created_at", "-id")
    )
    skipped = [j for j in rows if j.is_skip][:skips]
    lines: list[RecentVerdict] = []
    # By item: its line so far, and the oldest verdict on it.
    waiting: dict[int, tuple[RecentVerdict, Judgement]] = {}
    for judgement in (j for j in rows if not j.is_skip):
        held = waiting.pop(judgement.review_item_id, None)
        if held is not None and completes_false_match(held[1], judgement):
            held[0].ruled_out.insert(0, judgement.rejected_group)
            waiting[judgement.review_item_id] = (held[0], judgement)
            continue
        if len(lines) == limit:
            break
        line = RecentVerdict(judgement, [])
        lines.append(line)
        waiting[judgement.review_item_id] = (line, judgement)
    return lines, skipped


def latest_of(verdicts: list[RecentVerdict], skips: list[Judgement]) -> int | None:
    """The id of the latest of the curator's last verdicts and skips
    (``recent_verdicts_and_skips``): what the card's ``u`` undoes."""
    heads = [line.judgement for line in verdicts[:1]] + skips[:1]
    latest = max(heads, key=lambda j: (j.created_at, j.id), default=None)
    return latest.id if latest is not None else None


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


@dataclass(frozen=True)
class InputHistory:
    input: Input
    item: ReviewItem | None
    # Every verdict on it, oldest first, undone ones included (``undone_at`` set).
    judgements: list[Judgement]
    # The verdict that can be taken back and judged again now: the latest live one.
    latest: Judgement | None


def input_history(*, input_id: int) -> InputHistory | None:
    """An input with its review item and every verdict it got, for its page."""
    found = Input.objects.select_related("taxonomy").filter(id=input_id).first()
    if found is None:
        return None
    item = (
        ReviewItem.objects.select_related("top_group", "prediction__model_version")
        .filter(input=found)
        .first()
    )
    judgements = (
        list(
            Judgement.objects.filter(review_item=item)
            .select_related("user", "group", "rejected_group")
            .order_by("created_at", "id")
        )
        if item is not None
        else []
    )
    live = [j for j in judgements if j.undone_at is None]
    return InputHistory(found, item, judgements, live[-1] if live else None)


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
    rows = (
        Member.objects.filter(group_id__in=group_ids)
        .exclude(id__in=matched)
        .annotate(
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


def judgements_today_count(*, user) -> int:
    """The curator's verdicts since local midnight that still count."""
    midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    return Judgement.objects.live().filter(user=user, created_at__gte=midnight).count()


def group_members_sample(*, group: Group, limit: int = 8) -> list[str]:
    """A few member strings of ``group``, taxonomy titles first: what the group stands for."""
    return list(
        Member.objects.filter(group=group)
        .order_by(Case(When(source=Member.Source.TAXONOMY, then=Value(0)), default=Value(1)), "id")
        .values_list("text", flat=True)[:limit]
    )


def review_flags(*, kind: str | None = None, resolved: bool | None = False) -> QuerySet[ReviewFlag]:
    """Curators' flags, newest first: open ones only by default (``resolved=None``: all)."""
    flags = ReviewFlag.objects.select_related(
        "review_item__input",
        "review_item__taxonomy",
        "review_item__top_group",
        "user",
        "resolved_by",
    )
    if kind:
        flags = flags.filter(kind=kind)
    if resolved is not None:
        flags = flags.filter(resolved_at__isnull=not resolved)
    return flags.order_by("-id")


def review_items_probability(items) -> dict[int, float]:
    """The chance each item's top group is right, as the ranker said when it predicted the item
    (by item id; review items with their prediction loaded). Items predicted before the
    taxonomy's ranker was calibrated have none."""
    found = {}
    for item in items:
        groups = item.prediction.ranked_groups
        probability = groups[0].get("probability") if groups else None
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
