"""What a taxonomy's auto-coding policy has done: answers coded by itself, answers audited, and
the audited precision with its interval."""

from __future__ import annotations

from dataclasses import dataclass

from annotations.models import AutoCodingPolicy, Judgement, ReviewItem, Taxonomy
from models_app.siamese.vouching import precision_lower_bound, precision_upper_bound


@dataclass(frozen=True)
class AutoCodingState:
    policy: AutoCodingPolicy | None  # None: never set (off)
    coded: int  # answers coded by itself under the current version
    audited: int  # audited answers with a curator's final verdict, current version
    audited_right: int

    @property
    def audited_precision(self) -> float | None:
        return self.audited_right / self.audited if self.audited else None

    @property
    def audited_interval(self) -> tuple[float, float] | None:
        """One-sided 95% lower and upper bounds of the audited precision."""
        if not self.audited:
            return None
        return (
            precision_lower_bound(self.audited_right, self.audited),
            precision_upper_bound(self.audited_right, self.audited),
        )


def audited_answers(policy: AutoCodingPolicy) -> tuple[int, int]:
    """(audited answers a curator gave a final verdict, how many of them were right) under the
    policy's current version: right when the final answer is the group the product vouched
    for."""
    vouched = dict(
        ReviewItem.objects.filter(
            taxonomy_id=policy.taxonomy_id, audit=True, vouched_policy_version=policy.version
        ).values_list("id", "vouched_group_id")
    )
    if not vouched:
        return 0, 0
    final: dict[int, int | None] = {}
    rows = (
        Judgement.objects.live()
        .filter(review_item_id__in=list(vouched), verdict__in=Judgement.FINAL_VERDICTS)
        .order_by("created_at", "id")
        .values_list("review_item_id", "group_id")
    )
    for item_id, group_id in rows:
        final[item_id] = group_id  # the latest final verdict decides
    right = sum(group_id == vouched[item_id] for item_id, group_id in final.items())
    return len(final), right


def auto_coding_state(taxonomy: Taxonomy) -> AutoCodingState:
    policy = AutoCodingPolicy.objects.filter(taxonomy=taxonomy).first()
    if policy is None:
        return AutoCodingState(None, 0, 0, 0)
    coded = ReviewItem.objects.filter(
        taxonomy=taxonomy, auto_coded=True, vouched_policy_version=policy.version
    ).count()
    audited, right = audited_answers(policy)
    return AutoCodingState(policy, coded, audited, right)
