"""The audit trail page (admins only)."""

from __future__ import annotations

urlpatterns: list = []
