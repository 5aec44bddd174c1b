"""What curation announces for the model's side to act on. Curation never imports training
(docs/architecture.md, "Between the apps"): an import says that a taxonomy's members changed,
and whatever makes the taxonomy serve them answers with the run it queued."""

from __future__ import annotations

from dataclasses import dataclass

from django.dispatch import Signal

from annotations.models import Taxonomy


@dataclass(frozen=True)
class QueuedRun:
    """A run queued for an imported taxonomy: its id, and whether it reindexes the live model
    (else it builds the taxonomy's first one)."""

    id: int
    reindex: bool


# Sent with ``taxonomy`` and ``requested_by`` once an import changed a taxonomy's members and it
# should serve them. A receiver answers with the ``QueuedRun`` it queued, or None when a run of
# the taxonomy is already queued or running.
taxonomy_imported = Signal()


class TaxonomyCannotServe(ValueError):
    """No model can be built for the taxonomy's strings as they are; the message says what to
    do. Raised by the receiver, which knows what serving needs."""


def taxonomy_serve_request(*, taxonomy: Taxonomy, requested_by=None) -> QueuedRun | None:
    """Ask the model's side to serve ``taxonomy``'s members as they are now: the run it queued,
    or None when one is already active; ``TaxonomyCannotServe`` when none can be built."""
    answers = taxonomy_imported.send(sender=Taxonomy, taxonomy=taxonomy, requested_by=requested_by)
    if not answers:
        # Nothing would ever serve the import: a deployment without models_app is broken.
        raise RuntimeError("no receiver serves imported taxonomies (is models_app installed?)")
    queued = [answer for _, answer in answers if answer is not None]
    return queued[0] if queued else None
