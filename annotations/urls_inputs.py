"""Inputs in: CSV upload and the playground."""

from __future__ import annotations

urlpatterns: list = []
