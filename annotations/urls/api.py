"""Curation's API routes (mounted at /api/v1/ by siamweb/api_urls.py): taxonomies, inputs,
the review queue and verdicts, flags, the caller's account."""

from __future__ import annotations

from django.urls import path

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
    GroupDetailApi,
    GroupListCreateApi,
    GroupMergeApi,
    MemberDetailApi,
    MemberListCreateApi,
    TaxonomyDetailApi,
    TaxonomyListApi,
)

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
    # whether the caller is signed in (nginx asks before it reads an upload)
    path("account/signed-in", AccountSignedInApi.as_view(), name="api-account-signed-in"),
    # the caller's own API token
    path("account/token", AccountTokenApi.as_view(), name="api-account-token"),
    path(
        "account/token/rotate",
        AccountTokenRotateApi.as_view(),
        name="api-account-token-rotate",
    ),
]
