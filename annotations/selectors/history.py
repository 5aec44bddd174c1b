"""What curators did: an input's verdicts, a curator's latest verdicts and skips, their
batches, and the verdicts one correction made (what an undo takes back together)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from annotations.models import (
    Group,
    Input,
    Judgement,
    ReviewItem,
    Taxonomy,
)

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
    One query: the newest of each kind, each read down the curator's index as far as it needs
    (numbering every verdict of theirs cost a card 69 ms at 20,000 verdicts, 12 at 100)."""
    newest = ("-created_at", "-id")
    mine = Judgement.objects.live().filter(user=user)
    verdict_ids = mine.exclude(verdict=Judgement.Verdict.SKIP).order_by(*newest).values("id")
    skip_ids = mine.filter(verdict=Judgement.Verdict.SKIP).order_by(*newest).values("id")
    rows = list(
        Judgement.objects.filter(
            Q(id__in=verdict_ids[: max(limit * 3, skips)]) | Q(id__in=skip_ids[:skips])
        )
        .select_related("review_item__input", "group", "rejected_group")
        .order_by(*newest)
    )
    skipped = [j for j in rows if j.verdict == Judgement.Verdict.SKIP]
    lines: list[RecentVerdict] = []
    # By item: its line so far, and the oldest verdict on it.
    waiting: dict[int, tuple[RecentVerdict, Judgement]] = {}
    for judgement in (j for j in rows if j.verdict != Judgement.Verdict.SKIP):
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
