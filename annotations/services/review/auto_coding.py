"""Auto-coding: answers the product can vouch for leave the review queue, proved by a blind
audit that pauses it.

An admin sets a taxonomy's target precision (off by default) and audit share. As inputs arrive,
an answer whose probability reaches the threshold the evidence shows for the target
(``serving.vouching``) is coded without review, except a random audit share of them, queued as
any other card and never shown as an audit. Each audited verdict is checked: when the audited
answers' precision is shown to be below the target (its one-sided 95% upper bound is), the
policy pauses itself, the admins are told, and nothing already coded is changed.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from annotations.models import AutoCodingPolicy, ReviewItem, Taxonomy
from annotations.services.audit import audit_record
from annotations.services.review.leases import lease_expiry
from models_app.serving.auto_coding_audits import audit_shortfall
from models_app.serving.normalize import Normalization
from models_app.serving.vouching import TARGET_RANGE, vouching_threshold_now

logger = logging.getLogger(__name__)

AUDIT_SHARE_RANGE = (0.0, 1.0)

# The audit draw: unpredictable, so no one can tell which cards are audits.
_draw = secrets.SystemRandom()


class AutoCodingError(Exception):
    """A refused setting, naming its field. A value out of range also carries the range and the
    value (fractions), so that the page can say them in percent as its form takes them."""

    def __init__(
        self,
        field: str,
        message: str,
        *,
        allowed: tuple[float, float] | None = None,
        got: float | None = None,
    ) -> None:
        super().__init__(message)
        self.field = field
        self.allowed = allowed
        self.got = got


@dataclass(frozen=True)
class Vouched:
    """An answer the product vouched for: coded without review, or drawn for the audit."""

    group_id: int
    threshold: float
    policy_version: int
    audit: bool


def drawn_for_audit(share: float) -> bool:
    """Whether an answer coded under a policy with this audit share goes to the audit."""
    return _draw.random() < share


def auto_coding_set(
    *, taxonomy: Taxonomy, target_precision: float | None, audit_share: float, user
) -> AutoCodingPolicy:
    """Set the policy (``target_precision`` None: off) and resume it if it had paused; a new
    version, audited. Answers coded before keep the version they were coded under."""
    low, high = TARGET_RANGE
    if target_precision is not None and not low <= target_precision <= high:
        raise AutoCodingError(
            "target_precision",
            f"a target precision is from {low} to {high} (or null: off), got {target_precision}",
            allowed=TARGET_RANGE,
            got=target_precision,
        )
    if not AUDIT_SHARE_RANGE[0] <= audit_share <= AUDIT_SHARE_RANGE[1]:
        raise AutoCodingError(
            "audit_share",
            f"an audit share is from 0 to 1, got {audit_share}",
            allowed=AUDIT_SHARE_RANGE,
            got=audit_share,
        )
    with transaction.atomic():
        Taxonomy.objects.select_for_update().filter(id=taxonomy.id).first()
        policy, _ = AutoCodingPolicy.objects.get_or_create(taxonomy=taxonomy)
        before = policy_summary(policy)
        policy.target_precision = target_precision
        policy.audit_share = audit_share
        policy.version += 1
        policy.paused_at, policy.paused_reason = None, ""
        policy.updated_by = user
        policy.save()
        audit_record(actor=user, action="auto_coding.set", obj=policy, taxonomy=taxonomy,
                     before=before, after=policy_summary(policy))  # fmt: skip
    return policy


def policy_summary(policy: AutoCodingPolicy) -> dict:
    return {
        "target_precision": policy.target_precision,
        "audit_share": policy.audit_share,
        "version": policy.version,
        "paused": policy.paused_at is not None,
        "paused_reason": policy.paused_reason,
    }


def vouched_answers(
    taxonomy: Taxonomy, normalizations: Mapping[str, Normalization]
) -> dict[str, Vouched]:
    """Which of these answers the policy codes by itself (by the normalizations' keys): those
    whose model answer's probability reaches the threshold the evidence shows now; each drawn
    for the audit with the policy's audit share."""
    policy = AutoCodingPolicy.objects.filter(taxonomy=taxonomy).first()
    if policy is None or not policy.active:
        return {}
    threshold = vouching_threshold_now(taxonomy, policy.target_precision)
    if threshold is None:
        return {}
    found = {}
    for key, normalization in normalizations.items():
        top = normalization.groups[0] if normalization.groups else None
        if top is None or top.source != "model" or top.probability is None:
            continue
        if top.probability >= threshold:
            audit = drawn_for_audit(policy.audit_share)
            found[key] = Vouched(top.group_id, threshold, policy.version, audit)
    return found


def auto_coded_reopen(*, item_id: int, user) -> ReviewItem:
    """A curator takes an answer the product coded by itself back into review, held for them:
    their verdict replaces it and teaches the ranker like any other."""
    with transaction.atomic():
        item = (
            ReviewItem.objects.select_for_update(of=("self",))
            .select_related("taxonomy", "input")
            .filter(id=item_id)
            .first()
        )
        if item is None or not item.auto_coded or item.status != ReviewItem.Status.DONE:
            raise AutoCodingError(
                "item", "only an answer the product coded by itself, not yet judged, reopens so"
            )
        item.status, item.auto_coded = ReviewItem.Status.PENDING, False
        item.leased_by, item.lease_expires_at = user, lease_expiry()
        item.save(update_fields=["status", "auto_coded", "leased_by", "lease_expires_at",
                                 "updated_at"])  # fmt: skip
        audit_record(actor=user, action="auto_coding.reopen", obj=item, taxonomy=item.taxonomy,
                     before={"status": "done", "auto_coded": True},
                     after={"status": item.status, "auto_coded": False})  # fmt: skip
    return item


def auto_coding_audit_check(*, taxonomy: Taxonomy) -> AutoCodingPolicy | None:
    """After a verdict on an audited answer: pause the policy when its audited answers'
    precision is shown below the target (one-sided 95% exact upper bound). Returns the policy
    when this call paused it."""
    with transaction.atomic():
        policy = AutoCodingPolicy.objects.select_for_update().filter(taxonomy=taxonomy).first()
        if policy is None or not policy.active:
            return None
        shortfall = audit_shortfall(policy)
        if shortfall is None:
            return None
        before = policy_summary(policy)
        policy.paused_at = timezone.now()
        policy.paused_version = policy.version
        policy.paused_reason = (
            f"{shortfall}: nothing more is coded by itself until an admin sets the policy again"
        )
        policy.save(update_fields=["paused_at", "paused_version", "paused_reason", "updated_at"])
        audit_record(actor=None, action="auto_coding.pause", obj=policy, taxonomy=taxonomy,
                     before=before, after=policy_summary(policy))  # fmt: skip
    logger.warning("auto-coding of %s paused: %s", taxonomy.slug, policy.paused_reason)
    return policy
