"""What the forms of both apps share: a taxonomy chosen by its slug, preselected when it is the
only one, and every error on one line."""

from __future__ import annotations

from django import forms

from annotations.models import Taxonomy


class TaxonomyField(forms.ModelChoiceField):
    """A taxonomy chosen by its slug, as it appears in URLs."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("error_messages", {})
        kwargs["error_messages"].setdefault("invalid_choice", "no taxonomy %(value)r")
        kwargs["error_messages"].setdefault("required", "choose a taxonomy")
        super().__init__(queryset=Taxonomy.objects.order_by("slug"), to_field_name="slug", **kwargs)

    def label_from_instance(self, obj: Taxonomy) -> str:
        return obj.name


def preselect_only_taxonomy(form: forms.Form, field: str = "taxonomy") -> None:
    """One taxonomy: nothing to choose, so it is chosen and there is no "---------" to trip
    over; with several the form asks which."""
    only = list(form.fields[field].queryset[:2])
    if len(only) == 1:
        form.fields[field].empty_label = None
        if not form.initial.get(field):
            form.initial[field] = only[0].slug


class FieldErrorsMixin:
    def errors_text(self) -> str:
        """Every error on one line, each naming its field."""
        return "; ".join(
            f"{field}: {' '.join(messages)}" for field, messages in self.errors.items()
        )
