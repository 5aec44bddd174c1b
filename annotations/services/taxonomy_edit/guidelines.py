"""A taxonomy's guidelines for curators: Markdown an admin writes, audited like every edit."""

from __future__ import annotations

from django.db import transaction

from annotations.models import Taxonomy
from annotations.services.audit import audit_record
from annotations.services.taxonomy_edit.checks import TaxonomyEditError

GUIDELINES_MAX_CHARS = 20_000


def taxonomy_guidelines_update(*, taxonomy: Taxonomy, text: object, user) -> Taxonomy:
    """Replace the guidelines (an empty text removes them). Markdown is stored as written; it is
    rendered without raw HTML wherever it is shown (``annotations.markdown``)."""
    if not isinstance(text, str):
        raise TaxonomyEditError("guidelines", "guidelines must be text")
    if "\x00" in text:
        raise TaxonomyEditError("guidelines", "guidelines contain a NUL character")
    text = text.replace("\r\n", "\n").strip()
    if len(text) > GUIDELINES_MAX_CHARS:
        raise TaxonomyEditError(
            "guidelines",
            f"guidelines are {len(text):,} characters; at most {GUIDELINES_MAX_CHARS:,} are kept "
            "(nothing was saved)",
        )
    with transaction.atomic():
        locked = Taxonomy.objects.select_for_update().get(id=taxonomy.id)
        if locked.guidelines == text:
            return locked
        before = locked.guidelines
        locked.guidelines = text
        locked.save(update_fields=["guidelines", "updated_at"])
        audit_record(
            actor=user,
            action="taxonomy.guidelines",
            obj=locked,
            taxonomy=locked,
            before={"guidelines": before},
            after={"guidelines": text},
        )
    return locked
