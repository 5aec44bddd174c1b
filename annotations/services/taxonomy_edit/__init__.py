"""An admin's edits to a taxonomy: groups created, renamed and merged; members added, moved and
removed.

Each edit records an audit event with the values before and after, in the transaction that makes
the change. Searches see a change at once (new members are searched live from the engine's
delta, removed ones are dropped at query time, and a member's group is read from its row), so
an edit queues no run: the scheduled check folds changed members into the next index build.

Every function raises ``TaxonomyEditError`` for bad input, naming the field, and changes nothing
when it does.

By subject: ``groups``, ``members``, and ``checks`` (the error and the input checks they
share). Callers import from here.
"""

from __future__ import annotations

from annotations.services.taxonomy_edit.checks import TaxonomyEditError
from annotations.services.taxonomy_edit.groups import group_create, group_merge, group_rename
from annotations.services.taxonomy_edit.members import member_add, member_move, member_remove

__all__ = [
    "TaxonomyEditError",
    "group_create",
    "group_merge",
    "group_rename",
    "member_add",
    "member_move",
    "member_remove",
]
