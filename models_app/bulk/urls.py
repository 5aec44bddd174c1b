"""The Bulk pages (mounted at "bulk/"): upload a file to normalize, follow its job, download."""

from __future__ import annotations

from django.urls import path

from models_app.bulk import views as views_bulk

urlpatterns = [
    path("", views_bulk.bulk_list, name="bulk"),
    path("<int:job_id>/", views_bulk.bulk_job, name="bulk-job"),
    path("<int:job_id>/cancel", views_bulk.bulk_job_cancel_view, name="bulk-job-cancel"),
    path("<int:job_id>/retry", views_bulk.bulk_job_retry_view, name="bulk-job-retry"),
    path("<int:job_id>/delete", views_bulk.bulk_job_delete_view, name="bulk-job-delete"),
    path(
        "<int:job_id>/result.<str:kind>",
        views_bulk.bulk_job_download,
        name="bulk-job-download",
    ),
]
