"""Access rules for the pages: curators review, admins also edit taxonomies and models."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied

from annotations.services.accounts import CURATORS


def is_curator(user) -> bool:
    """Admins curate too; everyone else needs the curators role."""
    return bool(
        user.is_authenticated
        and user.is_active
        and (user.is_staff or user.groups.filter(name=CURATORS).exists())
    )


def is_admin(user) -> bool:
    """Admins are staff: they edit taxonomies, settle conflicts and promote models."""
    return bool(user.is_authenticated and user.is_active and user.is_staff)


def curator_required(view):
    @login_required
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not is_curator(request.user):
            raise PermissionDenied("curators only")
        return view(request, *args, **kwargs)

    return wrapper


def admin_required(view):
    @login_required
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not is_admin(request.user):
            raise PermissionDenied("admins only")
        return view(request, *args, **kwargs)

    # Marks the view for the access tests, which find every admin page through the URL resolver.
    wrapper.admin_only = True
    return wrapper
