"""The audit trail: every verdict and taxonomy change, with who, when, before and after."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from annotations.models import AuditEvent, Taxonomy


def audit_record(
    *,
    actor,
    action: str,
    obj: Any,
    taxonomy: Taxonomy | None = None,
    before: dict | None = None,
    after: dict | None = None,
) -> AuditEvent:
    """Store one event in the caller's transaction, so a change and its record commit together.
    ``action`` must be one of ``AuditEvent.ACTIONS``."""
    [event] = audit_records(actor=actor, action=action, changes=[(obj, taxonomy, before, after)])
    return event


def audit_records(
    *,
    actor,
    action: str,
    changes: Sequence[tuple[Any, Taxonomy | None, dict | None, dict | None]],
) -> list[AuditEvent]:
    """Store an event of ``action`` for each (object, taxonomy, before, after) of ``changes`` in
    one statement, in the caller's transaction."""
    if action not in AuditEvent.ACTIONS:
        raise ValueError(f"{action!r} is not an audit action: add it to AuditEvent.ACTIONS")
    actor = actor if actor is not None and actor.is_authenticated else None
    events = [
        AuditEvent(
            actor=actor,
            taxonomy=taxonomy,
            action=action,
            # The model's name, also through request.user's lazy wrapper.
            object_type=obj._meta.model_name,
            object_id=str(obj.pk),
            before=before,
            after=after,
        )
        for obj, taxonomy, before, after in changes
    ]
    return AuditEvent.objects.bulk_create(events)
