"""Inputs in: each text normalized, its prediction stored, and a review item queued (or
updated) with a priority; the open items predicted again after another model goes live."""

from __future__ import annotations

import math
import secrets
import zlib
from collections.abc import Mapping, Sequence

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from annotations.models import (
    Input,
    Judgement,
    Prediction,
    ReviewItem,
    Taxonomy,
)
from annotations.services.review.auto_coding import Vouched, vouched_answers
from annotations.text_rule import comparison_key
from models_app.serving.normalize import Normalization, rank_taxonomy_groups
from models_app.siamese.ranker.active import spread_near_copies, verdict_worth

# An answer a new model version changed before anyone judged it goes ahead of every other:
# the rest of the priority stays within a few units.
CHANGED_ANSWER_PRIORITY = 10.0
# An audit's place in the queue is drawn unpredictably, as the audit itself is, so that no one
# can tell the audited cards by where they sit.
_audit_place = secrets.SystemRandom()


def review_priority(
    normalization: Normalization, occurrences: int, *, changed: bool, audit: bool = False
) -> float:
    """Most worth a look first: an answer a new model version changed, then what a verdict
    teaches most (``verdict_worth``: the live ranker's doubt times the text's traffic). Without
    a probability (no calibrated ranker can be read): a small margin between the top two
    groups, a low top score and a frequent input. An audit: ``audit_priority``."""
    if audit:
        return audit_priority(occurrences)
    bonus = CHANGED_ANSWER_PRIORITY if changed else 0.0
    return float(review_priorities([normalization], [occurrences])[0]) + bonus


def review_priorities(normalizations: Sequence[Normalization], occurrences) -> np.ndarray:
    """``review_priority`` of many answers none of which a new model version changed, (N,):
    one ``verdict_worth`` for all, as a reorder of 20,000 items needs."""
    probabilities = np.array(
        [np.nan if n.probability is None else n.probability for n in normalizations], np.float64
    )
    worth = verdict_worth(np.nan_to_num(probabilities), np.asarray(occurrences))
    for at in np.flatnonzero(np.isnan(probabilities)).tolist():
        scores = [group.score for group in normalizations[at].groups] + [0.0, 0.0]
        margin = scores[0] - scores[1]
        worth[at] = (1.0 - margin) + (1.0 - scores[0]) + 0.1 * math.log1p(occurrences[at])
    return worth


def audit_priority(occurrences: int) -> float:
    """The queue priority of an audited answer: what a verdict on an answer of a probability
    drawn at random would be worth, so audits spread through the queue like other cards. Its
    answer is sure: ordered by it, an audit would sink to the bottom of the queue, unjudged and
    told apart by its place. Drawn again whenever the queue is ordered again."""
    worth = verdict_worth(np.array([_audit_place.random()]), np.array([occurrences]))
    return float(worth[0])


def review_priorities_spread(
    normalizations: Sequence[Normalization],
    occurrences,
    changed: Sequence[bool],
    audits: Sequence[bool],
) -> np.ndarray:
    """``review_priority`` of many open answers at once (``changed``: a new model version
    changed the answer; ``audits``: drawn to audit), spread so that near-copies of one title,
    predicted into one group, do not come in a row (``spread_near_copies``): the order a
    reorder writes, (N,)."""
    worth = review_priorities(normalizations, occurrences)
    groups = np.array([n.groups[0].group_id if n.groups else -1 for n in normalizations])
    spread = spread_near_copies(worth, groups) + np.where(changed, CHANGED_ANSWER_PRIORITY, 0.0)
    for at in np.flatnonzero(audits).tolist():
        spread[at] = audit_priority(occurrences[at])
    return spread


class ReviewQueueFull(ValueError):
    """More review items than ``SIAMWEB_REVIEW_PENDING_PER_USER`` would wait for one user's
    sends; the message says how many wait and what to do."""


def pending_review_room(*, user) -> int:
    """How many more items ``user``'s sends may queue for review now: the setting less the
    items they queued that are still open. Locks the user's row until the transaction ends, so
    that two sends at once cannot both take the last room."""
    list(get_user_model().objects.select_for_update().filter(id=user.id).values_list("id"))
    waiting = ReviewItem.objects.filter(queued_by=user, status__in=ReviewItem.OPEN_STATUSES).count()
    return max(settings.SIAMWEB_REVIEW_PENDING_PER_USER - waiting, 0)


def _reviews_required(normalized_text: str) -> int:
    """Two curators for a fixed, reproducible share of inputs; one for the rest."""
    share = settings.SIAMWEB_DOUBLE_REVIEW_PERCENT
    return 2 if zlib.crc32(normalized_text.encode()) % 100 < share else 1


@transaction.atomic
def inputs_submit(
    *,
    taxonomy: Taxonomy,
    texts: Sequence[str],
    source: str,
    k: int = 5,
    count_occurrence: bool = True,
    queued_by=None,
    auto_coding: bool = True,
    bulk_job_id: int | None = None,
    audits: Mapping[str, Vouched] | None = None,
) -> list[ReviewItem]:
    """Store cleaned texts as inputs with a prediction each, and queue them for review; one
    item per distinct text, in the order given.

    A text already known counts one more occurrence; its open review item keeps its verdicts
    and takes the new prediction, ranked higher when the new model disagrees with the old.
    A handful of queries per call, not per text: uploads and re-predictions send thousands.

    ``queued_by``, the user whose send this is, may have at most
    ``SIAMWEB_REVIEW_PENDING_PER_USER`` new items waiting: past it ``ReviewQueueFull`` is raised
    and nothing is stored. Items a user's send merely updates are not new. ``bulk_job_id``:
    the bulk job sending them for review; its open items are marked as its own. ``audits``:
    answers a bulk job coded under the policy it started with and drew for the audit, by text;
    each new one is queued as an audit, blind as any other.
    """
    unique: dict[str, str] = {}
    for text in texts:
        unique.setdefault(comparison_key(text), text)
    if not unique:
        return []
    normalizations = dict(
        zip(unique, rank_taxonomy_groups(taxonomy, list(unique.values()), k=k), strict=True)
    )
    # ``auto_coding`` False: the caller decided these need a person (a bulk job's review rows).
    vouched = vouched_answers(taxonomy, normalizations) if auto_coding else {}
    vouched |= {comparison_key(text): found for text, found in (audits or {}).items()}
    # The same new text sent by two requests at once: both find it unknown, one stores it and
    # the other's insert fails on the unique text. That one is tried again in its savepoint,
    # now finding the text known, so both callers get the one input and its item.
    for attempt in range(STORE_ATTEMPTS):
        try:
            with transaction.atomic():
                return _inputs_store(
                    taxonomy=taxonomy,
                    unique=unique,
                    normalizations=normalizations,
                    vouched=vouched,
                    source=source,
                    count_occurrence=count_occurrence,
                    queued_by=queued_by,
                    bulk_job_id=bulk_job_id,
                )
        except IntegrityError:
            if attempt == STORE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


# A text another request stores at the same moment fails this one's insert at most once per
# text; a few tries cover several texts racing in one batch.
STORE_ATTEMPTS = 4


def _inputs_store(
    *,
    taxonomy: Taxonomy,
    unique: dict[str, str],
    normalizations: dict[str, Normalization],
    vouched: dict[str, Vouched],
    source: str,
    count_occurrence: bool,
    queued_by,
    bulk_job_id: int | None,
) -> list[ReviewItem]:
    known = {
        row.normalized_text: row
        for row in Input.objects.filter(taxonomy=taxonomy, normalized_text__in=list(unique))
    }
    if count_occurrence:
        Input.objects.filter(id__in=[row.id for row in known.values()]).update(
            occurrences=F("occurrences") + 1
        )
        for row in known.values():
            row.occurrences += 1
    created = Input.objects.bulk_create(
        [
            Input(taxonomy=taxonomy, normalized_text=key, text=text, source=source)
            for key, text in unique.items()
            if key not in known
        ]
    )
    inputs = {**known, **{row.normalized_text: row for row in created}}

    predictions = {}
    for key, normalization in normalizations.items():
        groups = normalization.groups
        predictions[key] = Prediction(
            input=inputs[key],
            model_version_id=normalization.model_version_id,
            ranked_groups=normalization.as_dict()["groups"],
            top_group_id=groups[0].group_id if groups else None,
            top_score=groups[0].score if groups else None,
            margin=(groups[0].score - groups[1].score) if len(groups) > 1 else None,
        )
    Prediction.objects.bulk_create(predictions.values())

    existing = {
        item.input_id: item
        for item in ReviewItem.objects.filter(input__in=list(known.values())).select_related(
            "prediction"
        )
    }
    # An open item with a verdict keeps the ranking its curator judged: a double review's
    # second curator judges it blind to the first (the text's new ranking would put the first
    # curator's group on top), as ``live_ranking`` keeps it.
    judged = set(
        Judgement.objects.live()
        .filter(review_item__in=[item for item in existing.values()
                                 if item.status in ReviewItem.OPEN_STATUSES])
        .exclude(verdict=Judgement.Verdict.SKIP)
        .values_list("review_item_id", flat=True)
    )  # fmt: skip
    new_items, updated_items = [], []
    if queued_by is not None:
        # Answers coded without review never wait: they take no room.
        new = sum(
            1
            for key in predictions
            if inputs[key].id not in existing and (key not in vouched or vouched[key].audit)
        )
        room = pending_review_room(user=queued_by)
        if new > room:
            limit = settings.SIAMWEB_REVIEW_PENDING_PER_USER
            raise ReviewQueueFull(
                f"{limit - room:,} items you sent are waiting for review and {new:,} more would "
                f"pass the {limit:,} one user may have waiting (SIAMWEB_REVIEW_PENDING_PER_USER); "
                "nothing was stored: send them once curators have judged some, or fewer at once"
            )
    for key, prediction in predictions.items():
        input_row = inputs[key]
        item = existing.get(input_row.id)
        changed = (
            item is not None
            and item.status in ReviewItem.OPEN_STATUSES
            and item.prediction.model_version_id != prediction.model_version_id
            and item.top_group_id != prediction.top_group_id
        )
        found = vouched.get(key) if item is None else None
        priority = review_priority(
            normalizations[key],
            input_row.occurrences,
            changed=changed or (item is not None and item.changed_from_id is not None),
            audit=item.audit if item is not None else bool(found and found.audit),
        )
        if item is None:
            new_items.append(
                ReviewItem(
                    input=input_row,
                    taxonomy=taxonomy,
                    prediction=prediction,
                    top_group_id=prediction.top_group_id,
                    top_score=prediction.top_score,
                    priority=priority,
                    reviews_required=_reviews_required(key),
                    queued_by=queued_by,
                    bulk_job_id=bulk_job_id,
                    # An audit is queued as any other item; the rest are coded and done.
                    status=ReviewItem.Status.DONE
                    if found and not found.audit
                    else ReviewItem.Status.PENDING,
                    auto_coded=bool(found and not found.audit),
                    audit=bool(found and found.audit),
                    vouched_group_id=found.group_id if found else None,
                    vouched_threshold=found.threshold if found else None,
                    vouched_policy_version=found.policy_version if found else None,
                )
            )
        elif item.status in ReviewItem.OPEN_STATUSES and item.id not in judged:
            if changed and item.changed_from_id is None:
                item.changed_from_id = item.top_group_id
            item.prediction = prediction
            item.top_group_id, item.top_score = prediction.top_group_id, prediction.top_score
            item.priority = priority
            item.updated_at = timezone.now()
            if bulk_job_id is not None:
                item.bulk_job_id = bulk_job_id  # the latest job to send it opens it
            updated_items.append(item)
    ReviewItem.objects.bulk_create(new_items)
    ReviewItem.objects.bulk_update(
        updated_items,
        ["prediction", "top_group", "top_score", "changed_from", "priority", "updated_at",
         "bulk_job_id"],
    )  # fmt: skip
    by_input = {item.input_id: item for item in [*new_items, *existing.values()]}
    return [by_input[inputs[key].id] for key in unique]


def review_items_repredict(*, taxonomy: Taxonomy, chunk_size: int = 500) -> int:
    """After a new model goes live: predict every open item again with it. Items whose top
    group changed rank higher (model versions disagree); cards shown before are refused as
    stale, so nobody judges the old prediction. Returns how many items were re-predicted."""
    open_statuses = [*ReviewItem.OPEN_STATUSES, ReviewItem.Status.SKIPPED]
    texts = list(
        ReviewItem.objects.filter(taxonomy=taxonomy, status__in=open_statuses)
        .order_by("id")
        .values_list("input__text", flat=True)
    )
    for start in range(0, len(texts), chunk_size):
        inputs_submit(
            taxonomy=taxonomy,
            texts=texts[start : start + chunk_size],
            source=Input.Source.API,
            count_occurrence=False,
        )
    return len(texts)
