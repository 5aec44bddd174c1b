"""Bulk jobs' API routes (mounted at /api/v1/ by siamweb/api_urls.py)."""

from __future__ import annotations

from django.urls import path

from models_app.bulk.api import (
    BulkJobCancelApi,
    BulkJobCsvApi,
    BulkJobDetailApi,
    BulkJobJsonlApi,
    BulkJobListCreateApi,
    BulkJobRetryApi,
)

urlpatterns = [
    path("bulk-jobs", BulkJobListCreateApi.as_view(), name="api-bulk-jobs"),
    path("bulk-jobs/<int:job_id>", BulkJobDetailApi.as_view(), name="api-bulk-job"),
    path(
        "bulk-jobs/<int:job_id>/cancel",
        BulkJobCancelApi.as_view(),
        name="api-bulk-job-cancel",
    ),
    path(
        "bulk-jobs/<int:job_id>/retry",
        BulkJobRetryApi.as_view(),
        name="api-bulk-job-retry",
    ),
    path(
        "bulk-jobs/<int:job_id>/result.csv",
        BulkJobCsvApi.as_view(),
        name="api-bulk-job-csv",
    ),
    path(
        "bulk-jobs/<int:job_id>/result.jsonl",
        BulkJobJsonlApi.as_view(),
        name="api-bulk-job-jsonl",
    ),
]
