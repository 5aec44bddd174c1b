"""What every taxonomy edit shares: its error, naming the field, and the checks of its input (a
cleaned text, a group locked for the edit)."""

from __future__ import annotations

from annotations.models import Group
from annotations.text_rule import TextError, clean_text


class TaxonomyEditError(ValueError):
    """An edit that cannot be made; ``field`` names the input that was wrong. ``conflict``: the
    input is fine but collides with what exists (a code already taken), a 409 over HTTP."""

    def __init__(self, field: str, message: str, *, conflict: bool = False) -> None:
        self.field = field
        self.conflict = conflict
        super().__init__(message)


def clean(value: object, field: str, max_length: int) -> str:
    try:
        return clean_text(value, max_length=max_length)
    except TextError as exc:
        raise TaxonomyEditError(field, f"{field} {exc}") from None


def locked_group(group: Group, field: str) -> Group:
    locked = (
        Group.objects.select_for_update(of=("self",))
        .select_related("taxonomy")
        .filter(id=group.pk)
        .first()
    )
    if locked is None:
        raise TaxonomyEditError(field, "this group no longer exists")
    return locked
