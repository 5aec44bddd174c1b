"""REST API, version 1 (mounted at /api/v1/). Every endpoint needs a token or a session."""

from __future__ import annotations

from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.permissions import IsAuthenticated

from annotations.api.account import AccountSignedInApi, AccountTokenApi, AccountTokenRotateApi
from annotations.api.flags import (
    ReviewFlagListApi,
    ReviewFlagResolveApi,
    ReviewItemFlagCreateApi,
)
from annotations.api.inputs import InputListSubmitApi
from annotations.api.review import (
    FeedbackPairListApi,
    JudgementDetailApi,
    JudgementListCreateApi,
    JudgementUndoApi,
    ReviewItemClaimApi,
    ReviewItemDetailApi,
    ReviewItemListApi,
    ReviewItemReleaseApi,
)
from annotations.api.taxonomies import (
    AutoCodingApi,
    GroupDetailApi,
    GroupListCreateApi,
    GroupMergeApi,
    MemberDetailApi,
    MemberListCreateApi,
    TaxonomyDetailApi,
    TaxonomyListApi,
    TaxonomyVouchingApi,
)
from models_app.bulk.api import (
    BulkJobCancelApi,
    BulkJobCsvApi,
    BulkJobDetailApi,
    BulkJobJsonlApi,
    BulkJobListCreateApi,
    BulkJobRetryApi,
)
from models_app.serving.api import NormalizeApi
from models_app.training.api.runs import (
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
from siamweb.web.api import ApiNotFoundApi

urlpatterns = [
    # taxonomies, their groups and member strings
    path("taxonomies", TaxonomyListApi.as_view(), name="api-taxonomies"),
    path("taxonomies/<slug:slug>", TaxonomyDetailApi.as_view(), name="api-taxonomy"),
    path("taxonomies/<slug:slug>/groups", GroupListCreateApi.as_view(), name="api-groups"),
    path("taxonomies/<slug:slug>/members", MemberListCreateApi.as_view(), name="api-members"),
    path("groups/<int:group_id>", GroupDetailApi.as_view(), name="api-group"),
    path("groups/<int:group_id>/merge", GroupMergeApi.as_view(), name="api-group-merge"),
    path("members/<int:member_id>", MemberDetailApi.as_view(), name="api-member"),
    # inputs in, predictions out
    path("taxonomies/<slug:slug>/normalize", NormalizeApi.as_view(), name="api-normalize"),
    path("taxonomies/<slug:slug>/vouching", TaxonomyVouchingApi.as_view(), name="api-vouching"),
    path("taxonomies/<slug:slug>/auto-coding", AutoCodingApi.as_view(), name="api-auto-coding"),
    path("taxonomies/<slug:slug>/inputs", InputListSubmitApi.as_view(), name="api-inputs"),
    # the review queue and verdicts
    path("review-items", ReviewItemListApi.as_view(), name="api-review-items"),
    path("review-items/claim", ReviewItemClaimApi.as_view(), name="api-review-item-claim"),
    path("review-items/<int:item_id>", ReviewItemDetailApi.as_view(), name="api-review-item"),
    path(
        "review-items/<int:item_id>/release",
        ReviewItemReleaseApi.as_view(),
        name="api-review-item-release",
    ),
    path("judgements", JudgementListCreateApi.as_view(), name="api-judgements"),
    path("judgements/<int:judgement_id>", JudgementDetailApi.as_view(), name="api-judgement"),
    path(
        "judgements/<int:judgement_id>/undo",
        JudgementUndoApi.as_view(),
        name="api-judgement-undo",
    ),
    path(
        "review-items/<int:item_id>/flags",
        ReviewItemFlagCreateApi.as_view(),
        name="api-review-item-flags",
    ),
    path("review-flags", ReviewFlagListApi.as_view(), name="api-review-flags"),
    path(
        "review-flags/<int:flag_id>/resolve",
        ReviewFlagResolveApi.as_view(),
        name="api-review-flag-resolve",
    ),
    path("feedback-pairs", FeedbackPairListApi.as_view(), name="api-feedback-pairs"),
    # models
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
    # bulk normalization jobs
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
    # whether the caller is signed in (nginx asks before it reads an upload)
    path("account/signed-in", AccountSignedInApi.as_view(), name="api-account-signed-in"),
    # the caller's own API token
    path("account/token", AccountTokenApi.as_view(), name="api-account-token"),
    path(
        "account/token/rotate",
        AccountTokenRotateApi.as_view(),
        name="api-account-token-rotate",
    ),
    # the OpenAPI description and its docs page (Swagger UI from static files, no CDN)
    path(
        "schema",
        SpectacularAPIView.as_view(permission_classes=[IsAuthenticated]),
        name="api-schema",
    ),
    path(
        "docs",
        # Split: Swagger UI's start-up script is served from this address too (?script), not
        # inlined in the page, which the Content-Security-Policy would refuse to run.
        SpectacularSwaggerSplitView.as_view(
            url_name="api-schema",
            permission_classes=[IsAuthenticated],
            # Swagger UI with a link back to the app above it.
            template_name="api_docs.html",
        ),
        name="api-docs",
    ),
    # Last: any other path under the API is a JSON 404, not Django's HTML page.
    re_path(r"", ApiNotFoundApi.as_view(), name="api-not-found"),
]
