"""Member edits: a text added to a group, moved to another (its training pairs following), or
removed."""

from __future__ import annotations

from django.conf import settings
from django.db import IntegrityError, transaction

from annotations.models import FeedbackPair, Group, Member
from annotations.services.audit import audit_record
from annotations.services.taxonomy_edit.checks import TaxonomyEditError, clean, locked_group
from annotations.text_rule import comparison_key


@transaction.atomic
def member_add(*, group: Group, text: str, user) -> Member:
    """Add ``text`` to ``group`` as an admin member.

    The same text may also be in other groups of the taxonomy (real titles are ambiguous:
    "Server" is a waiter and a computer); that is allowed, and the returned member's
    ``also_in`` lists those groups so the caller can say so. The same text twice in one group
    is refused.
    """
    text = clean(text, "text", settings.SIAMWEB_MAX_TEXT_LENGTH)
    normalized = comparison_key(text)
    group = locked_group(group, "group")
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
      already stored;
    - the text's negative pairs for the new group are deleted: they contradict the move.

    The move belongs to the admin from now on: the member and the rewritten pairs are detached
    from the verdict that first placed the text, so undoing that verdict no longer takes them
    away. The member keeps its source and who added it.
    """
    if group.taxonomy_id != member.taxonomy_id:
        raise TaxonomyEditError("group", f"group {group.code} is in another taxonomy")
    # Groups before members, the order a merge takes its locks in, so the two never deadlock.
    group = locked_group(group, "group")
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
    # A pair saying the text is not in its new group (a verdict's false match there, say)
    # would teach the opposite of the move beside it: it goes, as a merge's do.
    contradicted, _ = FeedbackPair.objects.filter(
        taxonomy=taxonomy, text_a=member.text, label=False, group=group
    ).delete()
    added: list[FeedbackPair] = []
    if not rewritten and comparison_key(group.name) != member.normalized_text:
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
            "feedback_pairs_removed": contradicted,
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


def _already_in(text: str, group: Group) -> str:
    return f"{text!r} is already in {group.code} {group.name}"


def _evidence_of(group: Group, normalized_text: str) -> str | None:
    """A string standing for ``group`` other than the text itself: its name, else a member."""
    if comparison_key(group.name) != normalized_text:
        return group.name
    return (
        Member.objects.filter(group=group)
        .exclude(normalized_text=normalized_text)
        .order_by("id")
        .values_list("text", flat=True)
        .first()
    )


def _member_summary(member: Member) -> dict:
    return {
        "text": member.text,
        "group": member.group.code,
        "group_id": member.group_id,
        "source": member.source,
    }
