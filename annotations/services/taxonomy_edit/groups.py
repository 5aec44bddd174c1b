"""Group edits: a group created, renamed, or merged into another with everything that named it."""

from __future__ import annotations

from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, OuterRef, Q

from annotations.importers import MAX_CODE_LENGTH, MAX_NAME_LENGTH, group_code_problem
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
from annotations.services.taxonomy_edit.checks import TaxonomyEditError, clean, locked_group


@transaction.atomic
def group_create(*, taxonomy: Taxonomy, code: str, name: str, user) -> Group:
    """Add an empty group to ``taxonomy``. Codes are unique within a taxonomy."""
    code = clean(code, "code", MAX_CODE_LENGTH)
    if problem := group_code_problem(code):
        raise TaxonomyEditError("code", problem)
    name = clean(name, "name", MAX_NAME_LENGTH)
    if Group.objects.filter(taxonomy=taxonomy, code=code).exists():
        raise TaxonomyEditError(
            "code", f"code {code} is already taken in {taxonomy.slug}", conflict=True
        )
    try:
        with transaction.atomic():
            group = Group.objects.create(taxonomy=taxonomy, code=code, name=name)
    except IntegrityError:
        # Created by someone else between the check and the insert.
        raise TaxonomyEditError(
            "code", f"code {code} is already taken in {taxonomy.slug}", conflict=True
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
    name = clean(name, "name", MAX_NAME_LENGTH)
    group = locked_group(group, "group")
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
    # The group an answer was vouched for moves too: an audit must not count it wrong.
    ReviewItem.objects.filter(vouched_group=source).update(vouched_group=target)
    # So does the answer a new model changed (the card's "it was …", the queue's badge).
    ReviewItem.objects.filter(changed_from=source).update(changed_from=target)
    Prediction.objects.filter(top_group=source).update(top_group=target)
    predictions_rewritten = _rewrite_predictions(taxonomy, source, target)

    pairs_moved = FeedbackPair.objects.filter(group=source).update(group=target)
    judgements_moved = Judgement.objects.filter(group=source).update(group=target)
    judgements_moved += Judgement.objects.filter(rejected_group=source).update(
        rejected_group=target
    )
    # A verdict that now rejects the group its own curator put the text in (a reassignment
    # between the merged groups, or a false match on one followed by a pick of the other)
    # would teach "X is not T" beside "X is T": its negative pair goes, and a reassignment's
    # rejection with it (a false match is its rejection, and stays on record).
    placed_by_same_curator = Judgement.objects.live().filter(
        review_item=OuterRef("review_item"), user=OuterRef("user"), group=target
    )
    self_rejecting = Judgement.objects.filter(rejected_group=target).filter(
        Q(group=target) | Exists(placed_by_same_curator)
    )
    FeedbackPair.objects.filter(judgement__in=self_rejecting, group=target, label=False).delete()
    self_rejecting.filter(verdict=Judgement.Verdict.REASSIGN).update(rejected_group=None)

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


def _rewrite_predictions(taxonomy: Taxonomy, source: Group, target: Group) -> int:
    """Point the ranked groups of items' predictions at ``target`` instead of ``source``: open
    items' for their cards, done ones' too, since an undo reads the answer from them again."""
    predictions = Prediction.objects.filter(
        id__in=ReviewItem.objects.filter(taxonomy=taxonomy).values("prediction_id")
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


def _group_summary(group: Group) -> dict:
    return {
        "id": group.id,
        "code": group.code,
        "name": group.name,
        "members": Member.objects.filter(group=group).count(),
    }
