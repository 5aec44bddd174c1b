"""The same roles for the REST API."""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission

from siamweb.web.decorators import is_admin, is_curator


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
            # The refusal names the role a read needs.
            self.message = "curators only"
            return is_curator(request.user)
        self.message = "admins only"
        return is_admin(request.user)
