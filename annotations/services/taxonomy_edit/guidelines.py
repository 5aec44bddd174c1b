"""A taxonomy's guidelines for curators: Markdown an admin writes, audited like every edit."""

from __future__ import annotations

from django.db import transaction

from annotations.models import Taxonomy
from annotations.services.audit import audit_record
from annotations.services.taxonomy_edit.checks import TaxonomyEditError
from annotations.text_rule import TextError, clean_multiline_text

GUIDELINES_MAX_CHARS = 20_000


def taxonomy_guidelines_update(*, taxonomy: Taxonomy, text: object, user) -> Taxonomy:
    """Replace the guidelines (an empty text removes them). Markdown is stored as written; it is
    rendered without raw HTML wherever it is shown (``annotations.markdown``)."""
    try:
        text = clean_multiline_text(text, max_length=GUIDELINES_MAX_CHARS)
    except TextError as exc:
        message = f"the guidelines text {exc}; nothing was saved"
        raise TaxonomyEditError("guidelines", message) from None
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
