"""An admin's edits to a taxonomy: groups created, renamed and merged; members added, moved and
removed.

Each edit records an audit event with the values before and after, in the transaction that makes
the change. Searches see a change at once (new members are searched live from the engine's
delta, removed ones are dropped at query time, and a member's group is read from its row), so
an edit queues no run: the scheduled check folds changed members into the next index build.

Every function raises ``TaxonomyEditError`` for bad input, naming the field, and changes nothing
when it does.
"""

from __future__ import annotations

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q

from annotations.importers import MAX_CODE_LENGTH, MAX_NAME_LENGTH
from annotations.models import (
    FeedbackPair,
    Group,
    GroupRelation,
    Judgement,
    Member,
    Prediction,
    ReviewItem,
    Taxonomy,
)
from annotations.services.audit import audit_record
from models_app.siamese.text import TextError, clean_text, normalize_text


class TaxonomyEditError(ValueError):
    """An edit that cannot be made; ``field`` names the input that was wrong."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


# --- groups ---------------------------------------------------------------------------------


@transaction.atomic
def group_create(*, taxonomy: Taxonomy, code: str, name: str, user) -> Group:
    """Add an empty group to ``taxonomy``. Codes are unique within a taxonomy."""
    code = _clean(code, "code", MAX_CODE_LENGTH)
    if "/" in code:
        # Codes are a path segment of the group's page.
        raise TaxonomyEditError("code", "code may not contain '/'")
    name = _clean(name, "name", MAX_NAME_LENGTH)
    if Group.objects.filter(taxonomy=taxonomy, code=code).exists():
        raise TaxonomyEditError("code", f"code {code} is already taken in {taxonomy.slug}")
    try:
        with transaction.atomic():
            group = Group.objects.create(taxonomy=taxonomy, code=code, name=name)
    except IntegrityError:
        # Created by someone else between the check and the insert.
        raise TaxonomyEditError(
            "code", f"code {code} is already taken in {taxonomy.slug}"
        ) from None
    audit_record(
        actor=user,
        action="group.create",
        obj=group,
        taxonomy=taxonomy,
        after={"code": group.code, "name": group.name},
    )
    return group


@transaction.atomic
def group_rename(*, group: Group, name: str, user) -> Group:
    """Give ``group`` a new name; the same name again changes nothing and records nothing."""
    name = _clean(name, "name", MAX_NAME_LENGTH)
    group = _locked_group(group, "group")
    if name == group.name:
        return group
    before = {"code": group.code, "name": group.name}
    group.name = name
    group.save(update_fields=["name"])
    audit_record(
        actor=user,
        action="group.rename",
        obj=group,
        taxonomy=group.taxonomy,
        before=before,
        after={"code": group.code, "name": group.name},
    )
    return group


@transaction.atomic
def group_merge(*, source: Group, target: Group, user) -> Group:
    """Fold ``source`` into ``target`` and delete ``source``; returns ``target``.

    - Members move to ``target``; one whose normalized text ``target`` already has is dropped.
    - Review items and predictions whose top group was ``source`` now name ``target``, and the
      ranked groups of open items' predictions say ``target`` where they said ``source`` (the
      card offers groups by code, and ``source``'s code is gone).
    - Feedback pairs and verdicts (``group`` and ``rejected_group``) move to ``target``. A
      reassignment from ``target`` to ``source`` would now reject the group it chose: its
      rejected group is cleared and its hard-negative pair against ``target`` goes.
    - Group relations move to ``target``, less those that would relate it to itself or repeat
      one it already has.
    """
    if source.pk == target.pk:
        raise TaxonomyEditError("target", "a group cannot be merged into itself")
    if source.taxonomy_id != target.taxonomy_id:
        raise TaxonomyEditError(
            "target",
            f"{target.code} is in another taxonomy than {source.code}; merge within one taxonomy",
        )
    # Both rows locked, in id order, so two merges of the same pair cannot deadlock.
    locked = {
        g.id: g
        for g in Group.objects.select_for_update(of=("self",))
        .select_related("taxonomy")
        .filter(id__in=[source.pk, target.pk])
        .order_by("id")
    }
    if source.pk not in locked:
        raise TaxonomyEditError("source", "this group no longer exists")
    if target.pk not in locked:
        raise TaxonomyEditError("target", "the group to merge into no longer exists")
    source, target = locked[source.pk], locked[target.pk]
    taxonomy = target.taxonomy
    before = {"source": _group_summary(source), "target": _group_summary(target)}

    duplicates = Member.objects.filter(
        group=source,
        normalized_text__in=Member.objects.filter(group=target).values("normalized_text"),
    )
    # The audit names a bounded sample of the dropped texts: a merge can drop thousands.
    dropped_sample = list(duplicates.order_by("text").values_list("text", flat=True)[:50])
    members_dropped, _ = duplicates.delete()
    members_moved = Member.objects.filter(group=source).update(group=target)

    review_items = ReviewItem.objects.filter(top_group=source).update(top_group=target)
    Prediction.objects.filter(top_group=source).update(top_group=target)
    predictions_rewritten = _rewrite_open_predictions(taxonomy, source, target)

    pairs_moved = FeedbackPair.objects.filter(group=source).update(group=target)
    judgements_moved = Judgement.objects.filter(group=source).update(group=target)
    judgements_moved += Judgement.objects.filter(rejected_group=source).update(
        rejected_group=target
    )
    self_rejecting = Judgement.objects.filter(group=target, rejected_group=target)
    FeedbackPair.objects.filter(judgement__in=self_rejecting, group=target, label=False).delete()
    self_rejecting.update(rejected_group=None)

    relations_moved, relations_dropped = _move_relations(source, target)

    source_id = source.id
    source.delete()
    after = {
        "target": _group_summary(target),
        "merged_group": {"id": source_id, "code": before["source"]["code"]},
        "members_moved": members_moved,
        "members_dropped": members_dropped,
        "dropped_texts": dropped_sample,
        "review_items": review_items,
        "predictions_rewritten": predictions_rewritten,
        "feedback_pairs": pairs_moved,
        "judgements": judgements_moved,
        "relations_moved": relations_moved,
        "relations_dropped": relations_dropped,
    }
    audit_record(
        actor=user, action="group.merge", obj=target, taxonomy=taxonomy, before=before, after=after
    )
    return target


def _rewrite_open_predictions(taxonomy: Taxonomy, source: Group, target: Group) -> int:
    """Point the ranked groups of open items' predictions at ``target`` instead of ``source``."""
    predictions = Prediction.objects.filter(
        id__in=ReviewItem.objects.filter(
            taxonomy=taxonomy, status__in=ReviewItem.OPEN_STATUSES
        ).values("prediction_id")
    )
    if connection.features.supports_json_field_contains:
        predictions = predictions.filter(ranked_groups__contains=[{"group_id": source.id}])
    changed = []
    for prediction in predictions.only("id", "ranked_groups").iterator(chunk_size=500):
        if not any(entry.get("group_id") == source.id for entry in prediction.ranked_groups):
            continue
        prediction.ranked_groups = _ranked_merged(prediction.ranked_groups, source, target)
        changed.append(prediction)
    Prediction.objects.bulk_update(changed, ["ranked_groups"], batch_size=500)
    return len(changed)


def _ranked_merged(ranked: list[dict], source: Group, target: Group) -> list[dict]:
    """Best first, so where both groups were ranked the better of the two entries stays."""
    merged, seen = [], set()
    for entry in ranked:
        if entry.get("group_id") == source.id:
            entry = {**entry, "group_id": target.id, "code": target.code, "name": target.name}
        if entry.get("group_id") in seen:
            continue
        seen.add(entry.get("group_id"))
        merged.append(entry)
    return merged


def _move_relations(source: Group, target: Group) -> tuple[int, int]:
    relations = list(GroupRelation.objects.filter(Q(group=source) | Q(related=source)))
    kept = set(
        GroupRelation.objects.filter(Q(group=target) | Q(related=target))
        .exclude(id__in=[relation.id for relation in relations])
        .values_list("group_id", "related_id")
    )
    moved = dropped = 0
    for relation in relations:
        pair = tuple(
            target.id if group_id == source.id else group_id
            for group_id in (relation.group_id, relation.related_id)
        )
        if pair[0] == pair[1] or pair in kept:
            relation.delete()
            dropped += 1
            continue
        relation.group_id, relation.related_id = pair
        relation.save(update_fields=["group", "related"])
        kept.add(pair)
        moved += 1
    return moved, dropped


# --- members --------------------------------------------------------------------------------


@transaction.atomic
def member_add(*, group: Group, text: str, user) -> Member:
    """Add ``text`` to ``group`` as an admin member.

    The same text may also be in other groups of the taxonomy (real titles are ambiguous:
    "Server" is a waiter and a computer); that is allowed, and the returned member's
    ``also_in`` lists those groups so the caller can say so. The same text twice in one group
    is refused.
    """
    text = _clean(text, "text", settings.SIAMWEB_MAX_TEXT_LENGTH)
    normalized = normalize_text(text)
    group = _locked_group(group, "group")
    if Member.objects.filter(group=group, normalized_text=normalized).exists():
        raise TaxonomyEditError("text", _already_in(text, group))
    try:
        with transaction.atomic():
            member = Member.objects.create(
                taxonomy_id=group.taxonomy_id,
                group=group,
                text=text,
                normalized_text=normalized,
                source=Member.Source.ADMIN,
                added_by=user if user is not None and user.is_authenticated else None,
            )
    except IntegrityError:
        raise TaxonomyEditError("text", _already_in(text, group)) from None
    member.also_in = list(
        Group.objects.filter(taxonomy_id=group.taxonomy_id, members__normalized_text=normalized)
        .exclude(id=group.id)
        .distinct()
        .order_by("code")
    )
    audit_record(
        actor=user,
        action="member.add",
        obj=member,
        taxonomy=group.taxonomy,
        after=_member_summary(member),
    )
    return member


@transaction.atomic
def member_move(*, member: Member, group: Group, user) -> Member:
    """Move ``member`` to ``group``: an admin's correction of where the text belongs.

    Training data follows the correction. FeedbackPair has no origin for admin edits, so the
    curator ones are reused, with no verdict attached:

    - the text's positive pairs for the old group (``text_a`` is the member's text, label True)
      now say the new group: their group, and their ``text_b`` (the evidence string of that
      group) becomes the new group's name;
    - a positive ``reassign`` pair (text, new group's name) is added when no such pair existed;
    - a ``reassign_negative`` hard negative (text, an old group's string) is added, unless one is
      already stored.

    The move belongs to the admin from now on: the member and the rewritten pairs are detached
    from the verdict that first placed the text, so undoing that verdict no longer takes them
    away. The member keeps its source and who added it.
    """
    if group.taxonomy_id != member.taxonomy_id:
        raise TaxonomyEditError("group", f"group {group.code} is in another taxonomy")
    # Groups before members, the order a merge takes its locks in, so the two never deadlock.
    group = _locked_group(group, "group")
    locked = Member.objects.select_for_update().filter(id=member.pk).first()
    if locked is None:
        raise TaxonomyEditError("member", "this member no longer exists")
    member = locked
    if group.pk == member.group_id:
        raise TaxonomyEditError("group", f"{member.text!r} is already in {group.code}")
    if Member.objects.filter(group=group, normalized_text=member.normalized_text).exists():
        raise TaxonomyEditError("group", _already_in(member.text, group))
    old_group = Group.objects.get(id=member.group_id)
    before = _member_summary(member)

    member.group = group
    member.judgement = None
    member.save(update_fields=["group", "judgement"])

    taxonomy = group.taxonomy
    rewritten = FeedbackPair.objects.filter(
        taxonomy=taxonomy, text_a=member.text, label=True, group=old_group
    ).update(group=group, text_b=group.name, judgement=None)
    added: list[FeedbackPair] = []
    if not rewritten and normalize_text(group.name) != member.normalized_text:
        added.append(
            FeedbackPair(
                taxonomy=taxonomy,
                text_a=member.text,
                text_b=group.name,
                group=group,
                label=True,
                origin=FeedbackPair.Origin.REASSIGN,
            )
        )
    negative_exists = FeedbackPair.objects.filter(
        taxonomy=taxonomy, text_a=member.text, label=False, group=old_group
    ).exists()
    evidence = None if negative_exists else _evidence_of(old_group, member.normalized_text)
    if evidence is not None:
        added.append(
            FeedbackPair(
                taxonomy=taxonomy,
                text_a=member.text,
                text_b=evidence,
                group=old_group,
                label=False,
                origin=FeedbackPair.Origin.REASSIGN_NEGATIVE,
            )
        )
    FeedbackPair.objects.bulk_create(added)

    audit_record(
        actor=user,
        action="member.move",
        obj=member,
        taxonomy=taxonomy,
        before=before,
        after={
            **_member_summary(member),
            "feedback_pairs_rewritten": rewritten,
            "feedback_pairs_added": len(added),
        },
    )
    return member


@transaction.atomic
def member_remove(*, member: Member, user) -> None:
    """Remove ``member``, and the positive pairs that put this exact text in its group: they
    would teach the model what the admin just undid. Negative pairs stay true and stay."""
    locked = Member.objects.select_for_update(of=("self",)).select_related("group", "taxonomy")
    member = locked.filter(id=member.pk).first()
    if member is None:
        raise TaxonomyEditError("member", "this member no longer exists")
    taxonomy = member.taxonomy
    pairs_removed, _ = FeedbackPair.objects.filter(
        taxonomy=taxonomy, text_a=member.text, label=True, group_id=member.group_id
    ).delete()
    audit_record(
        actor=user,
        action="member.remove",
        obj=member,
        taxonomy=taxonomy,
        before=_member_summary(member),
        after={"feedback_pairs_removed": pairs_removed},
    )
    member.delete()


# --- helpers --------------------------------------------------------------------------------


def _clean(value: object, field: str, max_length: int) -> str:
    try:
        return clean_text(value, max_length=max_length)
    except TextError as exc:
        raise TaxonomyEditError(field, f"{field} {exc}") from None


def _locked_group(group: Group, field: str) -> Group:
    locked = (
        Group.objects.select_for_update(of=("self",))
        .select_related("taxonomy")
        .filter(id=group.pk)
        .first()
    )
    if locked is None:
        raise TaxonomyEditError(field, "this group no longer exists")
    return locked


def _already_in(text: str, group: Group) -> str:
    return f"{text!r} is already in {group.code} {group.name}"


def _evidence_of(group: Group, normalized_text: str) -> str | None:
    """A string standing for ``group`` other than the text itself: its name, else a member."""
    if normalize_text(group.name) != normalized_text:
        return group.name
    return (
        Member.objects.filter(group=group)
        .exclude(normalized_text=normalized_text)
        .order_by("id")
        .values_list("text", flat=True)
        .first()
    )


def _group_summary(group: Group) -> dict:
    return {
        "id": group.id,
        "code": group.code,
        "name": group.name,
        "members": Member.objects.filter(group=group).count(),
    }


def _member_summary(member: Member) -> dict:
    return {
        "text": member.text,
        "group": member.group.code,
        "group_id": member.group_id,
        "source": member.source,
    }
