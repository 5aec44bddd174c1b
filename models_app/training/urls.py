"""The Models pages (mounted at "models/"): curators read, admins act."""

from __future__ import annotations

from django.urls import path

from models_app.training import views

urlpatterns = [
    path("", views.models_overview, name="models"),
    path("<slug:slug>/finetune", views.models_finetune, name="models-finetune"),
    path(
        "versions/<int:version_id>/rollback",
        views.models_version_rollback,
        name="models-version-rollback",
    ),
    path("runs/<int:run_id>/", views.models_run, name="models-run"),
    path("runs/<int:run_id>/promote", views.models_run_promote, name="models-run-promote"),
    path("runs/<int:run_id>/retry", views.models_run_retry, name="models-run-retry"),
    path("runs/<int:run_id>/cancel", views.models_run_cancel, name="models-run-cancel"),
]
