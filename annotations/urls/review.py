"""The review pages: the card, batch review by group, the queue, conflicts."""

from __future__ import annotations

from django.urls import path

from annotations.views import batch as views_batch
from annotations.views import flags as views_flags
from annotations.views import queue as views_queue
from annotations.views import review as views

urlpatterns = [
    path("review/", views.review, name="review"),
    path("review/items/<int:item_id>/judge", views.review_item_judge, name="review-item-judge"),
    path(
        "review/items/<int:item_id>/groups",
        views.review_item_group_search,
        name="review-item-group-search",
    ),
    path(
        "review/judgements/<int:judgement_id>/undo",
        views.review_judgement_undo,
        name="review-judgement-undo",
    ),
    path("review/items/<int:item_id>/flag", views.review_item_flag, name="review-item-flag"),
    path("review/flags/", views_flags.review_flags_page, name="review-flags"),
    path(
        "review/flags/<int:flag_id>/resolve",
        views_flags.review_flag_resolve_view,
        name="review-flag-resolve",
    ),
    path("review/progress/", views.review_progress, name="review-progress"),
    path("review/queue/", views_queue.review_queue_list, name="review-queue"),
    path("review/batch/<slug:slug>/", views_batch.review_batch_groups, name="review-batch-groups"),
    # Group codes hold dots ("15-1252.00") and, from a generic CSV, even slashes.
    path(
        "review/batch/<slug:slug>/<path:code>/undo",
        views_batch.review_batch_undo,
        name="review-batch-undo",
    ),
    path("review/batch/<slug:slug>/<path:code>/", views_batch.review_batch, name="review-batch"),
    path("review/conflicts/", views_queue.review_conflicts_page, name="review-conflicts"),
    path("review/curators/", views_queue.review_curators_page, name="review-curators"),
    path(
        "review/conflicts/<int:item_id>/resolve",
        views_queue.review_conflict_resolve_view,
        name="review-conflict-resolve",
    ),
]
