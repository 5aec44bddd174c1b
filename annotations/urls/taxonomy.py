"""Taxonomy administration pages (admins only).

Group codes are path segments that may hold dots ("15-1252.00"), hence ``str``.
"""

from __future__ import annotations

from django.urls import path

from annotations.views import taxonomy as views
from annotations.views import taxonomy_groups as groups

_GROUP = "<slug:slug>/groups/<str:code>/"

urlpatterns = [
    path("", views.taxonomy_list, name="taxonomy-list"),
    path("<slug:slug>/", views.taxonomy_detail, name="taxonomy-detail"),
    path("<slug:slug>/export.csv", views.taxonomy_export, name="taxonomy-export"),
    path("<slug:slug>/guidelines", views.taxonomy_guidelines, name="taxonomy-guidelines"),
    path("<slug:slug>/auto-coding", views.taxonomy_auto_coding, name="taxonomy-auto-coding"),
    path("<slug:slug>/groups/new", groups.taxonomy_group_create, name="taxonomy-group-create"),
    path(_GROUP, groups.taxonomy_group, name="taxonomy-group"),
    path(f"{_GROUP}rename", groups.taxonomy_group_rename, name="taxonomy-group-rename"),
    path(f"{_GROUP}merge", groups.taxonomy_group_merge, name="taxonomy-group-merge"),
    path(f"{_GROUP}targets", groups.taxonomy_group_targets, name="taxonomy-group-targets"),
    path(f"{_GROUP}members/add", groups.taxonomy_member_add, name="taxonomy-member-add"),
    path(
        f"{_GROUP}members/<int:member_id>/move",
        groups.taxonomy_member_move,
        name="taxonomy-member-move",
    ),
    path(
        f"{_GROUP}members/<int:member_id>/remove",
        groups.taxonomy_member_remove,
        name="taxonomy-member-remove",
    ),
]
