"""The same roles for the REST API."""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission

from annotations.decorators import is_admin, is_curator


class IsCurator(BasePermission):
    message = "curators only"

    def has_permission(self, request, view) -> bool:
        return is_curator(request.user)


class IsAdmin(BasePermission):
    message = "admins only"

    def has_permission(self, request, view) -> bool:
        return is_admin(request.user)


class CuratorReadsAdminWrites(BasePermission):
    """Curators may read (taxonomies, groups, members, models); only admins change them."""

    message = "admins only"

    def has_permission(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return is_curator(request.user)
        return is_admin(request.user)
