"""The review pages: the card, batch review by group, the queue, conflicts."""

from __future__ import annotations

from django.urls import path

from annotations import views

urlpatterns = [
    path("review/", views.review, name="review"),
    path("review/items/<int:item_id>/judge", views.review_item_judge, name="review-item-judge"),
    path(
        "review/items/<int:item_id>/groups",
        views.review_item_group_search,
        name="review-item-group-search",
    ),
]
