"""The Models API routes (mounted at /api/v1/ by siamweb/api_urls.py): model versions and
training runs."""

from __future__ import annotations

from django.urls import path

from models_app.training.api.runs import (
    TrainingRunCancelApi,
    TrainingRunDetailApi,
    TrainingRunListRequestApi,
    TrainingRunPromoteApi,
    TrainingRunRetryApi,
)
from models_app.training.api.versions import (
    ModelVersionActivateApi,
    ModelVersionDetailApi,
    ModelVersionListApi,
    ModelVersionRollbackApi,
)

urlpatterns = [
    path("model-versions", ModelVersionListApi.as_view(), name="api-model-versions"),
    path(
        "model-versions/<int:version_id>",
        ModelVersionDetailApi.as_view(),
        name="api-model-version",
    ),
    path(
        "model-versions/<int:version_id>/activate",
        ModelVersionActivateApi.as_view(),
        name="api-model-version-activate",
    ),
    path(
        "model-versions/<int:version_id>/rollback",
        ModelVersionRollbackApi.as_view(),
        name="api-model-version-rollback",
    ),
    path(
        "training-runs",
        TrainingRunListRequestApi.as_view(),
        name="api-training-runs",
    ),
    path(
        "training-runs/<int:run_id>",
        TrainingRunDetailApi.as_view(),
        name="api-training-run",
    ),
    path(
        "training-runs/<int:run_id>/promote",
        TrainingRunPromoteApi.as_view(),
        name="api-training-run-promote",
    ),
    path(
        "training-runs/<int:run_id>/retry",
        TrainingRunRetryApi.as_view(),
        name="api-training-run-retry",
    ),
    path(
        "training-runs/<int:run_id>/cancel",
        TrainingRunCancelApi.as_view(),
        name="api-training-run-cancel",
    ),
]
