"""What the product can vouch for on a taxonomy: the probability above which its answers meet a
target precision (``siamese.vouching``, a one-sided lower bound on evidence), and the share of
the last 30 days' inputs whose answer reaches it.

While the starter ranks, the evidence is the starter's: its answers on real vacancy titles whose
labels agree with themselves (``bench/starter_ranker.py``). Once the taxonomy's own ranker
ranks, only its own speaks for its probabilities: each verdict's top answer by weights that
never saw it (the fit's folds), from ``MIN_OWN_EVIDENCE`` verdicts on. Both travel inside the
ranker's file, numbers only.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone

from annotations.models import ReviewItem, Taxonomy
from models_app.serving.engines import live_engine_and_ranker
from models_app.serving.rankers import serving_ranker
from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.ranker.files import cold_start_ranker
from models_app.siamese.vouching import MIN_OWN_EVIDENCE, VouchingThreshold, vouching_threshold

RECENT_DAYS = 30
# Targets an admin may ask for: below 0.5 an answer is more likely wrong than right; at 1 no
# finite evidence shows it.
TARGET_RANGE = (0.5, 0.999)
SUGGESTED_TARGETS = (0.95, 0.90)


@dataclass(frozen=True)
class VouchingReport:
    target: float
    found: VouchingThreshold
    evidence: str  # what the evidence is, in words
    source: str  # "starter", "verdicts" (the live ranker's own), or "none" (too few of them)
    recent_inputs: int  # inputs of the last RECENT_DAYS answered by the model
    recent_vouched: int  # of them, answers at or above the threshold
    verdicts_needed: int | None  # without a threshold: verdicts more that could show one

    @property
    def recent_share(self) -> float | None:
        return self.recent_vouched / self.recent_inputs if self.recent_inputs else None

    def as_dict(self) -> dict:
        found = self.found
        return {
            "target": self.target,
            "threshold": found.threshold,
            "lower_bound": round(found.lower_bound, 4) if found.threshold is not None else None,
            "evidence": {
                "source": self.source,
                "description": self.evidence,
                "answers": found.evidence,
                "at_or_above_threshold": found.answers,
                "right": found.right,
            },
            "recent_days": RECENT_DAYS,
            "recent_inputs": self.recent_inputs,
            "recent_vouched": self.recent_vouched,
            "recent_share": None if self.recent_share is None else round(self.recent_share, 4),
            "verdicts_needed": self.verdicts_needed,
        }


def vouching_report(taxonomy: Taxonomy, *, target: float) -> VouchingReport | None:
    """What the taxonomy's live model and ranker can vouch for at ``target`` precision; None
    without a live model."""
    reports = vouching_reports(taxonomy, targets=(target,))
    return reports[0] if reports else None


def vouching_reports(taxonomy: Taxonomy, *, targets) -> list[VouchingReport] | None:
    """``vouching_report`` at each of ``targets``, reading the evidence and recent inputs
    once; None without a live model."""
    low, high = TARGET_RANGE
    for target in targets:
        if not low <= target <= high:
            raise ValueError(f"a target precision is from {low} to {high}, got {target}")
    evidence = _evidence(taxonomy)
    if evidence is None:
        return None
    source = "verdicts" if evidence.own_enough else ("none" if evidence.own_ranker else "starter")
    recent = _recent_top_probabilities(taxonomy)
    reports = []
    for target in targets:
        found, needed = evidence.shown(target)
        vouched = sum(p >= found.threshold for p in recent) if found.threshold is not None else 0
        reports.append(VouchingReport(target, found, evidence.described, source, len(recent),
                                      vouched, needed))  # fmt: skip
    return reports


def suggested_vouching(taxonomy: Taxonomy) -> tuple[list[VouchingReport] | None, str]:
    """``vouching_reports`` at the suggested targets, as the taxonomy's page shows them, and why
    none can be read while the live model's files cannot be loaded ("" when they can)."""
    try:
        return vouching_reports(taxonomy, targets=SUGGESTED_TARGETS), ""
    except ArtifactError as exc:
        return None, str(exc)


@dataclass(frozen=True)
class VouchingNow:
    """What the live ranker's evidence shows at one target, without the recent inputs."""

    target: float
    found: VouchingThreshold
    evidence: str  # what the evidence is, in words
    verdicts_needed: int | None  # without a threshold: verdicts more that could show one


def vouching_now(taxonomy: Taxonomy, *, target: float) -> VouchingNow | None:
    """``vouching_report``'s threshold and verdicts needed at ``target``, without reading the
    last days' inputs; None without a live model."""
    evidence = _evidence(taxonomy)
    if evidence is None:
        return None
    found, needed = evidence.shown(target)
    return VouchingNow(target, found, evidence.described, needed)


@dataclass(frozen=True)
class _Evidence:
    probabilities: tuple[float, ...]
    right: tuple[bool, ...]
    described: str
    own_count: int  # verdicts the live ranker's own evidence holds
    own_enough: bool  # and whether it is the evidence
    own_ranker: bool = False  # the taxonomy's own ranker serves (not the starter)

    def threshold(self, target: float) -> VouchingThreshold:
        return vouching_threshold(self.probabilities, self.right, target=target)

    def shown(self, target: float) -> tuple[VouchingThreshold, int | None]:
        """The threshold at ``target`` and, without one, about how many verdicts more could
        show one: those its own evidence lacks until it counts, else what the bound needs."""
        found = self.threshold(target)
        if found.threshold is not None:
            return found, None
        needed = found.more_needed if self.own_enough else MIN_OWN_EVIDENCE - self.own_count
        return found, needed


def _evidence(taxonomy: Taxonomy) -> _Evidence | None:
    """The evidence the live ranker vouches with: the starter's while the starter serves; once
    the taxonomy's own ranker serves, its verdicts' out-of-fold answers, and none until there
    are ``MIN_OWN_EVIDENCE``; None without a live model."""
    engine, ranker_id = live_engine_and_ranker(taxonomy)
    if engine is None:
        return None
    serving = serving_ranker(engine, ranker_id)
    if serving.version_id is not None:
        # The taxonomy's own ranker serves: only its own evidence speaks for its probabilities.
        own = (serving.ranker.metrics or {}).get("evidence") or {"probabilities": [], "right": []}
        own_count = len(own["right"])
        if own_count >= MIN_OWN_EVIDENCE:
            described = (
                f"the top answers of the live ranker's {own_count:,} verdicts, each by weights "
                "fitted without it"
            )
            return _Evidence(tuple(own["probabilities"]), tuple(own["right"]), described,
                             own_count, True, True)  # fmt: skip
        described = (
            f"the live ranker's own {own_count:,} verdicts, too few to vouch with (it takes "
            f"{MIN_OWN_EVIDENCE}); the starter's evidence measured the starter's probabilities, "
            "not this ranker's"
        )
        return _Evidence((), (), described, own_count, False, True)
    starter = (cold_start_ranker().metrics or {}).get("evidence") or {
        "probabilities": [], "right": []
    }  # fmt: skip
    described = (
        f"the starter ranker's top answers on {len(starter['right']):,} real vacancy titles "
        "whose labels agree with themselves"
    )
    return _Evidence(tuple(starter["probabilities"]), tuple(starter["right"]), described, 0, False)


def vouching_threshold_now(taxonomy: Taxonomy, target: float) -> float | None:
    """The probability from which the live ranker's answers show ``target`` precision now;
    None without a live model or where the evidence shows it at no probability."""
    evidence = _evidence(taxonomy)
    return None if evidence is None else evidence.threshold(target).threshold


def _recent_top_probabilities(taxonomy: Taxonomy) -> list[float]:
    """The top answer's probability of each input of the last ``RECENT_DAYS`` days, as its
    item last stored it (when it arrived, or when it was shown since; answers curators gave,
    and answers without a probability, are left out)."""
    since = timezone.now() - timezone.timedelta(days=RECENT_DAYS)
    # The top answer's two keys read in the database: a page view must not load every recent
    # prediction's whole ranking.
    rows = ReviewItem.objects.filter(taxonomy=taxonomy, input__created_at__gte=since).values_list(
        "prediction__ranked_groups__0__source", "prediction__ranked_groups__0__probability"
    )
    return [
        float(probability)
        for source, probability in rows.iterator(chunk_size=5000)
        if source == "model" and probability is not None
    ]
