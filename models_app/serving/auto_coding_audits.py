"""What a taxonomy's auto-coding policy does now and has done: the threshold it codes from (or
why it codes nothing), answers coded by itself, answers audited, and the audited precision with
its interval."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.db.models import Count
from django.db.models.functions import TruncDate
from django.utils import timezone

from annotations.models import AutoCodingPolicy, Input, Judgement, ReviewItem, Taxonomy
from models_app.serving.vouching import vouching_now
from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.vouching import precision_exact_lower_bound, precision_exact_upper_bound
from siamweb.humanize import percent_text


class _Audited:
    """The audited precision of anything that counts ``audited`` answers, ``audited_right`` of
    them right."""

    audited: int
    audited_right: int

    @property
    def audited_precision(self) -> float | None:
        return self.audited_right / self.audited if self.audited else None

    @property
    def audited_interval(self) -> tuple[float, float] | None:
        """One-sided 95% exact lower and upper bounds of the audited precision (the upper is
        what pauses a policy)."""
        if not self.audited:
            return None
        return (
            precision_exact_lower_bound(self.audited_right, self.audited),
            precision_exact_upper_bound(self.audited_right, self.audited),
        )


@dataclass(frozen=True)
class AutoCodingState(_Audited):
    policy: AutoCodingPolicy | None  # None: never set (off)
    coded: int  # answers coded by itself under the current version
    audited: int  # audited answers with a curator's final verdict, current version
    audited_right: int
    # The probability from which answers are coded now: the vouching threshold at the target.
    # None: nothing is coded, for the reason given, even while the policy is on (active).
    threshold: float | None = None
    not_coding_reason: str = "auto-coding is off"
    verdicts_needed: int | None = None  # without a threshold: verdicts more that could show one

    @property
    def coding(self) -> bool:
        return self.threshold is not None


def audited_answers(policy: AutoCodingPolicy) -> tuple[int, int]:
    """(audited answers the curators settled, how many of them were right) under the policy's
    current version: an audit counts once its item is done and not in conflict (a double
    review waits for its second curator), right when the curators' answer is the group the
    product vouched for."""
    rows = ReviewItem.objects.filter(
        taxonomy_id=policy.taxonomy_id,
        audit=True,
        vouched_policy_version=policy.version,
        status=ReviewItem.Status.DONE,
        conflict=False,
    ).values_list("top_group_id", "vouched_group_id")
    settled = list(rows)
    right = sum(1 for answer, vouched in settled if answer is not None and answer == vouched)
    return len(settled), right


def audit_shortfall(policy: AutoCodingPolicy) -> str | None:
    """How the audit shows the policy's answers below its target precision (a one-sided 95%
    exact upper bound under it), said for an admin; None while it does not."""
    answers, right = audited_answers(policy)
    # Exact, not Wilson's: checked after every audit, Wilson's bound paused a policy on its
    # first wrong audit (bench/audit_pause.py).
    upper = precision_exact_upper_bound(right, answers)  # 1 without answers
    if upper >= policy.target_precision:
        return None
    return (
        f"the audit found {right} of {answers} audited answers right "
        f"({right / answers:.1%}; at least {precision_exact_lower_bound(right, answers):.1%}, "
        f"at most {upper:.1%} at 95% confidence), below the "
        f"{percent_text(policy.target_precision)} target"
    )


def auto_coding_policy_set(taxonomy: Taxonomy) -> bool:
    """Whether an admin ever set the taxonomy's auto-coding policy (on, off or paused now)."""
    return AutoCodingPolicy.objects.filter(taxonomy=taxonomy).exists()


def auto_coding_state(taxonomy: Taxonomy) -> AutoCodingState:
    policy = AutoCodingPolicy.objects.filter(taxonomy=taxonomy).first()
    if policy is None:
        return AutoCodingState(None, 0, 0, 0)
    coded = ReviewItem.objects.filter(
        taxonomy=taxonomy, auto_coded=True, vouched_policy_version=policy.version
    ).count()
    audited, right = audited_answers(policy)
    if policy.target_precision is None:
        now = (None, "auto-coding is off", None)
    elif policy.paused_at is not None:
        now = (None, "auto-coding is paused by its audit", None)
    else:
        now = _coding_now(taxonomy, policy.target_precision)
    return AutoCodingState(policy, coded, audited, right, *now)


def _coding_now(taxonomy: Taxonomy, target: float) -> tuple[float | None, str, int | None]:
    """An active policy's threshold now, or why it has none, and the verdicts more that could
    show one: a policy that is on may still code nothing, and must say so."""
    try:
        now = vouching_now(taxonomy, target=target)
    except ArtifactError as exc:
        return None, f"the live model cannot be loaded: {exc}", None
    if now is None:
        return None, "the taxonomy has no live model yet", None
    if now.found.threshold is not None:
        return now.found.threshold, "", None
    reason = f"no probability is shown to reach {percent_text(target)} by {now.evidence}; "
    if now.verdicts_needed is None:
        reason += "more verdicts like today's would not show one (a lower target might)"
    else:
        reason += f"about {now.verdicts_needed} verdicts more could show one"  # as the table
    return None, reason, now.verdicts_needed


@dataclass(frozen=True)
class AutoCodingDay(_Audited):
    day: date
    received: int  # inputs first seen that day
    coded: int  # of them, coded by the product
    reviewed: int  # final verdicts that day
    audited: int  # of them, on audited answers
    audited_right: int


def auto_coding_days(taxonomy: Taxonomy, *, days: int = 14) -> list[AutoCodingDay]:
    """Per day of the last ``days``, newest first: inputs received, coded by the product,
    reviewed (final verdicts), audited, and the audited answers right."""
    today = timezone.localdate()
    since = today - timedelta(days=days - 1)
    start = timezone.make_aware(datetime.combine(since, time.min))
    received = dict(
        Input.objects.filter(taxonomy=taxonomy, created_at__gte=start)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(n=Count("id"))
        .values_list("day", "n")
    )
    coded = dict(
        ReviewItem.objects.filter(taxonomy=taxonomy, auto_coded=True, created_at__gte=start)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(n=Count("id"))
        .values_list("day", "n")
    )
    reviewed: dict[date, int] = {}
    audited: dict[date, list[bool]] = {}
    rows = (
        Judgement.objects.live()
        .filter(review_item__taxonomy=taxonomy, verdict__in=Judgement.FINAL_VERDICTS,
                created_at__gte=start)
        .values_list("created_at", "review_item__audit", "group_id",
                     "review_item__vouched_group_id")
    )  # fmt: skip
    for created, audit, group_id, vouched_group_id in rows:
        day = timezone.localdate(created)
        reviewed[day] = reviewed.get(day, 0) + 1
        if audit:
            audited.setdefault(day, []).append(group_id == vouched_group_id)
    found = []
    for offset in range(days):
        day = today - timedelta(days=offset)
        outcomes = audited.get(day, [])
        found.append(AutoCodingDay(day, received.get(day, 0), coded.get(day, 0),
                                   reviewed.get(day, 0), len(outcomes), sum(outcomes)))  # fmt: skip
    return found


@dataclass(frozen=True)
class AutoCodingWeek(_Audited):
    first_day: date
    received: int
    coded: int
    audited: int
    audited_right: int


def auto_coding_weeks(taxonomy: Taxonomy, *, weeks: int = 8) -> list[AutoCodingWeek]:
    """The last ``weeks`` weeks of ``auto_coding_days``, newest first, each seven days ending on
    the newest day: the audited precision over time, with its interval."""
    days = auto_coding_days(taxonomy, days=7 * weeks)
    found = []
    for start in range(0, len(days), 7):
        week = days[start : start + 7]
        found.append(AutoCodingWeek(
            first_day=week[-1].day,
            received=sum(d.received for d in week),
            coded=sum(d.coded for d in week),
            audited=sum(d.audited for d in week),
            audited_right=sum(d.audited_right for d in week),
        ))  # fmt: skip
    return found
