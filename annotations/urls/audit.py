"""The audit trail page (admins only)."""

from __future__ import annotations

from django.urls import path

from annotations.views import audit as views

urlpatterns = [
    path("", views.audit_log, name="audit-log"),
]
