"""What the models API's views share: the choice fields of a training run, the querysets they read,
and the 409s they answer."""

from __future__ import annotations

from collections.abc import Callable

from django.db.models import QuerySet
from rest_framework import serializers, status
from rest_framework.response import Response

from annotations.models import Taxonomy
from models_app.models import Deployment, ModelVersion, TrainingRun
from models_app.training.promotion import RunStateError
from models_app.training.selectors.runs import active_run_refusal
from siamweb.web.api import object_or_404
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


def training_runs() -> QuerySet[TrainingRun]:
    return TrainingRun.objects.select_related(
        "taxonomy", "requested_by", "model_version__taxonomy"
    ).order_by("-created_at", "-id")


def active_run_conflict(taxonomy: Taxonomy) -> Response:
    return Response(
        {"taxonomy": [active_run_refusal(taxonomy=taxonomy)]},
        status=status.HTTP_409_CONFLICT,
    )


def run_action_response(
    action: Callable[[], TrainingRun | None],
    *,
    field: str,
    taxonomy: Taxonomy,
    output_serializer: type[serializers.Serializer],
    success_status: int,
) -> Response:
    """An admin's action that makes or changes a training run, answered: 409 under ``field`` when
    the run's state forbids it, 409 when ``taxonomy`` already has an active run (``action``
    returned None), else the run read again with what the action wrote."""
    try:
        run = action()
    except RunStateError as exc:
        return Response({field: [str(exc)]}, status=status.HTTP_409_CONFLICT)
    if run is None:
        return active_run_conflict(taxonomy)
    changed = object_or_404(training_runs(), run.id, "training run")
    return Response(output_serializer(changed).data, status=success_status)
