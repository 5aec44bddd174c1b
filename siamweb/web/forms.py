"""What the forms of both apps share: a taxonomy chosen by its slug, preselected when it is the
only one, and every error on one line."""

from __future__ import annotations

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS

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


def form_errors(form: forms.Form) -> str:
    """Every error on one line, each after its field's label when the form gives one (what the
    page shows beside the box), else its name; errors of the whole form stand alone."""
    parts = []
    for name, messages in form.errors.items():
        field = form.fields.get(name)
        said = " ".join(messages)
        label = field.label if field is not None and field.label else name
        parts.append(said if name == NON_FIELD_ERRORS else f"{label}: {said}")
    return "; ".join(parts)


class FieldErrorsMixin:
    def errors_text(self) -> str:
        return form_errors(self)
