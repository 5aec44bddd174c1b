"""Forms of the inputs pages: the upload, the inputs list's filters and the playground."""

from __future__ import annotations

from django import forms
from django.conf import settings

from annotations.models import Taxonomy
from annotations.services.inputs_upload import UPLOAD_FORMATS, format_size, upload_max_bytes
from models_app.siamese.text import TextError, clean_text
from siamweb.ids import IdFormField

PLAYGROUND_MAX_K = 10


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


class CleanTextField(forms.Field):
    """One short text, whitespace collapsed; empty, over-long and control characters refused
    with the same words the API uses."""

    def to_python(self, value):
        try:
            return clean_text(value if value is not None else "", max_length=self.max_length)
        except TextError as exc:
            raise forms.ValidationError(str(exc), code="invalid") from None

    @property
    def max_length(self) -> int:
        return settings.SIAMWEB_MAX_TEXT_LENGTH


class FieldErrorsMixin:
    def errors_text(self) -> str:
        """Every error on one line, each naming its field."""
        return "; ".join(
            f"{field}: {' '.join(messages)}" for field, messages in self.errors.items()
        )


class InputsUploadForm(FieldErrorsMixin, forms.Form):
    taxonomy = TaxonomyField()
    file = forms.FileField(
        error_messages={"required": "choose a .csv or .txt file", "empty": "the file is empty"},
        widget=forms.ClearableFileInput(attrs={"accept": ",".join(UPLOAD_FORMATS)}),
    )
    skip_bad_rows = forms.BooleanField(
        required=False,
        label="Skip bad rows: store the good rows and list the bad ones",
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        preselect_only_taxonomy(self)

    def clean_file(self):
        upload = self.cleaned_data["file"]
        # Checked before the file is read: its size is known from the request.
        limit = upload_max_bytes()
        if upload.size > limit:
            raise forms.ValidationError(
                f"the file is {format_size(upload.size)}; files up to {format_size(limit)} are "
                f"accepted, split it into smaller files"
            )
        return upload


class InputsFilterForm(FieldErrorsMixin, forms.Form):
    taxonomy = TaxonomyField(required=False, empty_label="All taxonomies")
    q = forms.CharField(required=False, max_length=100, label="Text contains")
    before = IdFormField(required=False, min_value=1, widget=forms.HiddenInput)

    def clean_q(self) -> str:
        # Search words only: control characters can't be in a stored input anyway.
        return "".join(ch for ch in self.cleaned_data["q"] if ch.isprintable()).strip()


class PlaygroundForm(FieldErrorsMixin, forms.Form):
    # The first taxonomy is preselected: the playground answers as soon as one types.
    taxonomy = TaxonomyField(empty_label=None)
    text = CleanTextField()
    k = forms.TypedChoiceField(
        choices=[(n, str(n)) for n in range(1, PLAYGROUND_MAX_K + 1)],
        coerce=int,
        required=False,
        empty_value=None,
        label="Groups shown",
        widget=forms.Select(attrs={"data-testid": "k"}),
        error_messages={"invalid_choice": f"k must be a whole number from 1 to {PLAYGROUND_MAX_K}"},
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["k"].initial = self.default_k()

    @staticmethod
    def default_k() -> int:
        return min(settings.SIAMWEB_DEFAULT_K, PLAYGROUND_MAX_K)

    def clean_k(self) -> int:
        return self.cleaned_data["k"] or self.default_k()


class PlaygroundSendForm(FieldErrorsMixin, forms.Form):
    taxonomy = TaxonomyField()
    text = CleanTextField()
