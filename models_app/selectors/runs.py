"""Reads of training runs: the recent ones of a taxonomy with their progress, the active one,
one by id."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

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
    def eta(self) -> str:
        return duration_text(self.run.eta_seconds) if self.active else ""


def training_runs_recent(*, taxonomy: Taxonomy, limit: int = RECENT_RUNS) -> list[RunRow]:
    runs = _runs().filter(taxonomy=taxonomy).order_by("-created_at", "-id")[:limit]
    return [RunRow(run) for run in runs]


def training_run_active(*, taxonomy: Taxonomy) -> TrainingRun | None:
    """The taxonomy's active run; a constraint allows at most one."""
    return _runs().filter(taxonomy=taxonomy, status__in=TrainingRun.ACTIVE_STATUSES).first()


def training_run_get(*, run_id: int) -> TrainingRun | None:
    return _runs().filter(id=run_id).first()


def run_is_active(run: TrainingRun) -> bool:
    return run.status in TrainingRun.ACTIVE_STATUSES
