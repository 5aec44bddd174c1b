"""Taxonomy administration pages (admins only)."""

from __future__ import annotations

urlpatterns: list = []
