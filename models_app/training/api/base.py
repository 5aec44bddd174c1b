"""What the models API's views share: the choice fields of a training run, the querysets they read,
and the 409s they answer."""

from __future__ import annotations

from django.db.models import QuerySet
from rest_framework import status
from rest_framework.response import Response

from annotations.models import Taxonomy
from models_app.models import Deployment, IndexBuild, ModelVersion, TrainingRun
from models_app.training.promotion import RunStateError
from siamweb.web.fields import named_choice_field

TrainingRunKindField = named_choice_field("TrainingRunKind", TrainingRun.Kind.choices)
# A rollback is asked for on the version to go back to (model-versions/<id>/rollback).
TrainingRunRequestKindField = named_choice_field(
    "TrainingRunRequestKind",
    [
        (kind, label)
        for kind, label in TrainingRun.Kind.choices
        if kind != TrainingRun.Kind.ROLLBACK
    ],
)
TrainingRunStatusField = named_choice_field("TrainingRunStatus", TrainingRun.Status.choices)
TrainingRunTriggerField = named_choice_field("TrainingRunTrigger", TrainingRun.Trigger.choices)

# --- reads ---------------------------------------------------------------------------------


def model_versions() -> QuerySet[ModelVersion]:
    return ModelVersion.objects.select_related("taxonomy")


def live_version_ids() -> set[int]:
    """One small query: a taxonomy has at most one deployment."""
    return set(Deployment.objects.values_list("index_build__model_version_id", flat=True))


def newest_index_build(version: ModelVersion) -> IndexBuild | None:
    return IndexBuild.objects.filter(model_version=version).order_by("-created_at", "-id").first()


def training_runs() -> QuerySet[TrainingRun]:
    return TrainingRun.objects.select_related(
        "taxonomy", "requested_by", "model_version__taxonomy"
    ).order_by("-created_at", "-id")


def active_run_conflict(taxonomy: Taxonomy) -> Response:
    return Response(
        {"taxonomy": [f"{taxonomy.slug} already has a queued or running training run"]},
        status=status.HTTP_409_CONFLICT,
    )


def state_conflict(field: str, exc: RunStateError) -> Response:
    return Response({field: [str(exc)]}, status=status.HTTP_409_CONFLICT)
