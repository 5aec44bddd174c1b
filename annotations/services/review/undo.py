"""Verdicts taken back (one, or a batch all or nothing) and conflicts between curators settled
by an admin."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from django.utils import timezone

from annotations.models import (
    AuditEvent,
    Group,
    Judgement,
    Member,
    ReviewItem,
)
from annotations.selectors.history import action_verdicts
from annotations.services.audit import audit_record
from annotations.services.review.auto_coding import auto_coding_audit_check
from annotations.services.review.leases import lease_expiry
from annotations.services.review.verdict_rules import VerdictError, final_outcomes
from annotations.services.review.verdicts import (
    item_top_now,
    judgement_record,
    judgement_summary,
    live_verdicts,
)


@transaction.atomic
def judgement_undo(*, judgement: Judgement, user) -> ReviewItem:
    """Take back the action a verdict finished: the verdict and each false match it completed
    (``selectors.history.action_verdicts``: a false match and the group then given the input are one
    correction, taken back together). Their feedback pairs and curator members go, the item
    reopens as it was before the action and returns to ``user``'s hands so the card can be
    judged again.

    Only the latest live verdict on an item can be undone, by its author or an admin.
    """
    judgement = (
        Judgement.objects.select_for_update(of=("self",))
        .select_related("review_item__input", "review_item__taxonomy")
        .get(id=judgement.id)
    )
    item = ReviewItem.objects.select_for_update(of=("self",)).get(id=judgement.review_item_id)
    if judgement.undone_at is not None:
        raise VerdictError("judgement", f"this verdict was already {_changed_by(judgement)}")
    if judgement.user_id != user.id and not user.is_staff:
        raise VerdictError(
            "judgement", "only its curator or an admin can undo a verdict", forbidden=True
        )
    latest = (
        Judgement.objects.live()
        .filter(review_item=item)
        .select_related("user")
        .order_by("-created_at", "-id")
        .first()
    )
    if latest is not None and latest.id != judgement.id:
        raise VerdictError(
            "judgement",
            "a later verdict on this item must be undone first: "
            f"{latest.user.username if latest.user else 'someone'} judged it later "
            f"({latest.get_verdict_display().lower()}, {_when(latest.created_at)})",
        )

    action = action_verdicts(judgement)
    now = timezone.now()
    for taken_back in action:
        taken_back.undone_at = now
        taken_back.save(update_fields=["undone_at"])
        taken_back.feedback_pairs.all().delete()
        removed = list(taken_back.members.filter(source=Member.Source.CURATOR))
        Member.objects.filter(id__in=[m.id for m in removed]).delete()

    item.status = action[-1].previous_status or ReviewItem.Status.PENDING
    item.conflict = len(set(final_outcomes(live_verdicts([item.id])[item.id]).values())) > 1
    item.leased_by, item.lease_expires_at = user, lease_expiry()
    item.top_group_id, item.top_score = item_top_now(item)
    item.save(
        update_fields=[
            *("status", "conflict", "leased_by", "lease_expires_at", "updated_at"),
            *("top_group", "top_score"),
        ]
    )
    for taken_back in action:
        taken_back.review_item = item
        audit_record(
            actor=user,
            action="judgement.undo",
            obj=taken_back,
            taxonomy=item.taxonomy,
            before=judgement_summary(taken_back),
            after={"review_item": item.id, "status": item.status},
        )
    return item


def _when(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M")


def _changed_by(judgement: Judgement) -> str:
    """Who took the verdict back and when, from the audit trail: a 409 names them."""
    event = (
        AuditEvent.objects.filter(
            action="judgement.undo", object_type="judgement", object_id=str(judgement.id)
        )
        .select_related("actor")
        .order_by("-id")
        .first()
    )
    who = event.actor.username if event is not None and event.actor else "someone"
    return f"undone by {who} at {_when(judgement.undone_at)}"


@transaction.atomic
def judgements_undo(*, judgement_ids: Sequence[int], user) -> list[ReviewItem]:
    """Take back a whole batch (the verdicts one batch-review submit recorded): all of them or,
    when one cannot be undone, none. The items reopen in ``user``'s hands, so the next batch
    shows them again."""
    found = {
        judgement.id: judgement
        for judgement in Judgement.objects.filter(id__in=judgement_ids).order_by("-id")
    }
    missing = sorted(set(judgement_ids) - found.keys())
    if missing:
        raise VerdictError("judgement", f"no verdicts {missing}")
    # Newest first, the order single undos must take when one item holds several verdicts.
    return [judgement_undo(judgement=judgement, user=user) for judgement in found.values()]


@transaction.atomic
def review_conflict_resolve(*, item: ReviewItem, user, group: Group | None) -> ReviewItem:
    """An admin settles curators' disagreement: ``group`` is where the input belongs (None:
    outside the taxonomy). Verdicts that said otherwise are undone; the admin's stands."""
    if not user.is_staff:
        raise VerdictError("user", "only an admin can settle a conflict")
    item = ReviewItem.objects.select_for_update(of=("self",)).get(id=item.id)
    if not item.conflict:
        raise VerdictError("review_item", "this item has no conflict to settle")
    if group is not None and group.taxonomy_id != item.taxonomy_id:
        raise VerdictError("group", f"group {group.code} is not in this taxonomy")
    wanted = "none" if group is None else group.id
    losing = [
        j
        for j in Judgement.objects.live()
        .filter(review_item=item, verdict__in=Judgement.FINAL_VERDICTS)
        .order_by("-created_at", "-id")
        if ("none" if j.verdict == Judgement.Verdict.NONE else j.group_id) != wanted
    ]
    now = timezone.now()
    for judgement in losing:
        judgement.undone_at = now
        judgement.settlement = Judgement.Settlement.OVERRULED
        judgement.save(update_fields=["undone_at", "settlement"])
        judgement.feedback_pairs.all().delete()
        judgement.members.filter(source=Member.Source.CURATOR).delete()
    kept = set(final_outcomes(live_verdicts([item.id])[item.id]).values())
    if wanted not in kept:
        item.status = ReviewItem.Status.PENDING
        item.reviews_required = 1
        item.save(update_fields=["status", "reviews_required"])
        verdict = Judgement.Verdict.NONE if group is None else Judgement.Verdict.REASSIGN
        settled = judgement_record(
            item_id=item.id,
            user=user,
            verdict=verdict,
            group=group,
            prediction_id=None,
            idempotency_key="",
        )
        Judgement.objects.filter(id=settled.id).update(settlement=Judgement.Settlement.SETTLED)
        item.refresh_from_db()
    item.conflict = False
    item.status = ReviewItem.Status.DONE
    item.top_group_id, item.top_score = item_top_now(item)  # the admin's settlement
    item.save(update_fields=["conflict", "status", "top_group", "top_score", "updated_at"])
    audit_record(
        actor=user,
        action="review_item.resolve_conflict",
        obj=item,
        taxonomy=item.taxonomy,
        before={"undone_judgements": [j.id for j in losing]},
        after={"group": group.id if group else None},
    )
    if item.audit:
        # A settled audit counts now: the audit may show the precision below the target.
        auto_coding_audit_check(taxonomy=item.taxonomy)
    return item
