"""The audit trail page (admins only)."""

from __future__ import annotations

from django.urls import path

from annotations import views_audit as views

urlpatterns = [
    path("", views.audit_log, name="audit-log"),
]
