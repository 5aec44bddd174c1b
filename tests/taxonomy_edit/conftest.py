"""What the taxonomy edit tests share: the tiny taxonomy's groups and members, what normalize
serves, the audit events, and everything an edit may touch (to show a refused one touched
nothing)."""

from __future__ import annotations

import pytest

from annotations.models import (
    AuditEvent,
    FeedbackPair,
    Group,
    GroupRelation,
    Judgement,
    Member,
    ReviewItem,
    Taxonomy,
)
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.models import TrainingRun
from models_app.serving.normalize import rank_taxonomy_groups

DEVS, NURSES, BARISTAS, DRIVERS, ACCOUNTANTS = (
    "15-1252",
    "29-1141",
    "35-3023",
    "53-3032",
    "13-2011",
)


def group(code: str, slug: str = "jobs") -> Group:
    return Group.objects.get(taxonomy__slug=slug, code=code)


def member(text: str) -> Member:
    return Member.objects.get(taxonomy__slug="jobs", text=text)


def texts_of(code: str) -> list[str]:
    return sorted(group(code).members.values_list("text", flat=True))


def events(action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action).order_by("id"))


def reindex_queued() -> bool:
    return TrainingRun.objects.filter(
        kind=TrainingRun.Kind.REINDEX, status=TrainingRun.Status.QUEUED
    ).exists()


def served(text: str) -> tuple[str, str]:
    """The top group's code and member string for ``text``, as normalize serves it now."""
    (result,) = rank_taxonomy_groups(Taxonomy.objects.get(slug="jobs"), [text], k=1)
    return result.groups[0].code, result.groups[0].member


def served_at_once_without_a_run() -> None:
    """An edit queues no run: it serves at once (group and members read at query time, new
    members from the live engine's delta) and the scheduled check reindexes what changed."""
    assert not reindex_queued()


def snapshot() -> tuple:
    """Everything an edit may touch, to show a refused edit touched nothing."""
    return (
        sorted(Group.objects.values_list("id", "code", "name")),
        sorted(Member.objects.values_list("id", "group_id", "text", "source", "judgement_id")),
        sorted(FeedbackPair.objects.values_list("id", "group_id", "text_a", "text_b", "label")),
        sorted(Judgement.objects.values_list("id", "group_id", "rejected_group_id")),
        sorted(ReviewItem.objects.values_list("id", "top_group_id")),
        sorted(GroupRelation.objects.values_list("group_id", "related_id")),
        AuditEvent.objects.exclude(action="taxonomy.import").count(),
        TrainingRun.objects.filter(kind=TrainingRun.Kind.REINDEX).count(),
    )


@pytest.fixture
def confirmed(tiny_taxonomy, curator):
    """ "Java Barista" put among the software developers by a curator's verdict."""
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")
    judgement = judgement_create(
        review_item=item, user=curator, verdict="reassign", group=group(DEVS)
    )
    return judgement


def member_in(text: str, code: str) -> Member:
    return Member.objects.get(group=group(code), text=text)
