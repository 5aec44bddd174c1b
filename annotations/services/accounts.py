"""Writes for accounts: the curator and admin roles."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group as Role
from django.db import transaction

CURATORS = "curators"


@transaction.atomic
def user_ensure(
    *, username: str, password: str, admin: bool, reset_password: bool = False
) -> tuple[object, bool]:
    """Create the user if missing (an admin is staff and superuser; a curator joins the role).

    An existing user keeps its password unless ``reset_password`` is set.
    """
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(
        username=username, defaults={"is_staff": admin, "is_superuser": admin}
    )
    if created or reset_password:
        user.set_password(password)
        user.save()
    if not admin:
        role, _ = Role.objects.get_or_create(name=CURATORS)
        user.groups.add(role)
    return user, created
