"""The bulk job upload form: a taxonomy, a file, and the CSV column to normalize."""

from __future__ import annotations

from django import forms

from models_app.bulk.files import BULK_FORMATS, TEXT_COLUMN
from models_app.bulk.jobs import bulk_max_bytes
from siamweb.humanize import format_size
from siamweb.web.forms import FieldErrorsMixin, TaxonomyField, preselect_only_taxonomy

# What either threshold takes, in the words its errors use.
_FRACTION = "a number from 0 to 1, such as 0.5, or nothing"
_FRACTION_ERRORS = {"invalid": _FRACTION, "min_value": _FRACTION, "max_value": _FRACTION}


class BulkJobForm(FieldErrorsMixin, forms.Form):
    taxonomy = TaxonomyField()
    file = forms.FileField(
        error_messages={"required": "choose a .csv or .txt file", "empty": "the file is empty"},
        widget=forms.ClearableFileInput(
            attrs={"accept": ",".join(BULK_FORMATS), "data-bulk-file": ""}
        ),
    )
    column = forms.CharField(
        required=False,
        max_length=200,
        initial=TEXT_COLUMN,
        label="CSV column to normalize",
        help_text="Ignored for a .txt file",
        # static/js/bulk.js offers the chosen file's columns in this list.
        widget=forms.TextInput(attrs={"list": "bulk-columns", "data-bulk-column": ""}),
    )

    # The page names a field's error by its label, so each label stands on its own.
    review_below = forms.FloatField(
        required=False,
        min_value=0.0,
        max_value=1.0,
        label="Also queue for review the rows less likely right than",
        help_text="the chance the card shows, 0 to 1; empty: none",
        error_messages=_FRACTION_ERRORS,
    )
    review_margin_below = forms.FloatField(
        required=False,
        min_value=0.0,
        max_value=1.0,
        label="Also queue for review the rows ahead of the runner-up by less than",
        help_text="in probability, 0 to 1; empty: none",
        error_messages=_FRACTION_ERRORS,
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        preselect_only_taxonomy(self)

    def clean_file(self):
        upload = self.cleaned_data["file"]
        # Known from the request before anything is read or stored.
        limit = bulk_max_bytes()
        if upload.size > limit:
            raise forms.ValidationError(
                f"the file is {format_size(upload.size)}; a bulk job takes files up to "
                f"{format_size(limit)}, split it into smaller files"
            )
        return upload
