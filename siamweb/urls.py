from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from annotations import api, views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("review/", views.review, name="review"),
    path("review/items/<int:item_id>/judge", views.review_item_judge, name="review-item-judge"),
    path(
        "review/items/<int:item_id>/groups",
        views.review_item_group_search,
        name="review-item-group-search",
    ),
    path(
        "api/v1/taxonomies/<slug:slug>/normalize",
        api.NormalizeApi.as_view(),
        name="api-normalize",
    ),
    path("admin/", admin.site.urls),
]
