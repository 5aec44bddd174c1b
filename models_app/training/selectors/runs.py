"""Reads of training runs: the recent ones of a taxonomy with their progress, the active one,
one by id."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet
from django.utils import timezone

from annotations.models import Taxonomy
from models_app.models import TrainingRun
from siamweb.humanize import duration_text

RECENT_RUNS = 20


def _runs() -> QuerySet[TrainingRun]:
    return TrainingRun.objects.select_related(
        "taxonomy",
        "requested_by",
        "model_version__taxonomy",
        "parent_version__taxonomy",
        "retry_of",
    )


# What each stage a run reports is doing, as its page says it beside the stage: a fine-tune
# trains, measures and trains again, and each step reads as progress, not as a run going back.
STAGE_MEANINGS = {
    "start": "starting",
    "pairs": "gathering the pairs to learn from: the taxonomy's strings and the curators' verdicts",
    "teacher": "encoding the taxonomy with the teacher the student learns from",
    "train": "training the encoder",
    "distil": "training the student to answer as its teacher does",
    "evaluate": "measuring: the model on pairs it does not learn from, every so many steps of "
    "training; then, for a fine-tune, the candidate against the live model on verdicts held "
    "out of its training and on the frozen test suites (the gate)",
    "catch up": "training again on every verdict, the held-out ones the gate's check just used "
    "included, so the candidate learns them now rather than in the next fine-tune",
    "encode": "encoding every member with the new model",
    "index": "building the new model's search index",
    "promote": "making the new model live",
    "repredict": "answering the open review items again with the live model",
    "done": "finished",
}


@dataclass(frozen=True)
class RunRow:
    """A run with what the page shows of its progress."""

    run: TrainingRun

    @property
    def active(self) -> bool:
        return run_is_active(self.run)

    @property
    def percent(self) -> int:
        return round(min(max(self.run.progress or 0.0, 0.0), 1.0) * 100)

    @property
    def seconds_left(self) -> float | None:
        """The time left the run's last report gave, less the time since that report: a stage
        that reports rarely (the gate's measuring) counts down instead of standing still."""
        if not self.active or self.run.eta_seconds is None:
            return None
        if self.run.heartbeat_at is None:
            return self.run.eta_seconds
        since = (timezone.now() - self.run.heartbeat_at).total_seconds()
        return self.run.eta_seconds - max(since, 0.0)

    @property
    def eta(self) -> str:
        left = self.seconds_left
        return duration_text(left) if left is not None and left >= 1 else ""

    @property
    def overdue(self) -> bool:
        """Still running past the time its last report gave: the page says so rather than
        showing a time left it no longer believes."""
        left = self.seconds_left
        return left is not None and left < 1

    @property
    def stage_meaning(self) -> str:
        return STAGE_MEANINGS.get(self.run.stage, "") if self.active else ""


def training_runs_recent(*, taxonomy: Taxonomy, limit: int = RECENT_RUNS) -> list[RunRow]:
    runs = _runs().filter(taxonomy=taxonomy).order_by("-created_at", "-id")[:limit]
    return [RunRow(run) for run in runs]


def training_run_active(*, taxonomy: Taxonomy) -> TrainingRun | None:
    """The taxonomy's active run; a constraint allows at most one."""
    return _runs().filter(taxonomy=taxonomy, status__in=TrainingRun.ACTIVE_STATUSES).first()


def active_run_refusal(*, taxonomy: Taxonomy) -> str:
    """Why another run is refused now, naming the taxonomy's active run: the pages' and the
    API's words alike."""
    active = training_run_active(taxonomy=taxonomy)
    if active is None:  # it finished in between; asking again will work
        return f"{taxonomy.slug} had a run active a moment ago; try again"
    return (
        f"{taxonomy.slug} already has an active run (#{active.id}, {active.kind}, "
        f"{active.status}); wait for it to finish"
    )


def training_run_get(*, run_id: int) -> TrainingRun | None:
    return _runs().filter(id=run_id).first()


def run_is_active(run: TrainingRun) -> bool:
    return run.status in TrainingRun.ACTIVE_STATUSES


def run_retried_as(run: TrainingRun) -> TrainingRun | None:
    """The newest retry of ``run``, if it was retried."""
    return TrainingRun.objects.filter(retry_of=run).order_by("-id").first()
