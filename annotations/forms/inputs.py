"""Forms of the inputs pages: the upload, the inputs list's filters and the playground."""

from __future__ import annotations

from django import forms
from django.conf import settings

from annotations.services.inputs_upload import UPLOAD_FORMATS, upload_max_bytes
from annotations.text_rule import TextError, clean_text
from siamweb.humanize import format_size
from siamweb.ids import IdFormField
from siamweb.web.forms import FieldErrorsMixin, TaxonomyField, preselect_only_taxonomy

PLAYGROUND_MAX_K = 10


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
        error_messages={"invalid_choice": f"choose a whole number from 1 to {PLAYGROUND_MAX_K}"},
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["k"].initial = self.default_k()

    @classmethod
    def from_query(cls, query) -> PlaygroundForm:
        """The form bound to a query string (a link to the page, the results' request), each
        field it leaves out filled as the page shows it: the first taxonomy, which the list
        preselects, and the default number of groups. Left unbound, a link with only a text
        answered "choose a taxonomy" under a list that showed one chosen."""
        data = query.dict()
        if not data.get("taxonomy"):
            first = cls.base_fields["taxonomy"].queryset.values_list("slug", flat=True).first()
            if first is not None:
                data["taxonomy"] = first
        if not data.get("k"):
            data["k"] = str(cls.default_k())
        return cls(data)

    @staticmethod
    def default_k() -> int:
        return min(settings.SIAMWEB_DEFAULT_K, PLAYGROUND_MAX_K)

    def clean_k(self) -> int:
        return self.cleaned_data["k"] or self.default_k()


class PlaygroundSendForm(FieldErrorsMixin, forms.Form):
    taxonomy = TaxonomyField()
    text = CleanTextField()
