"""Taxonomy administration (admins only): import, browse and search groups, export.

Views are thin: a form checks the shape of the input, a service makes the change, a selector
reads. A group's page and its edits are ``annotations.views.taxonomy_groups``; the audit trail,
``annotations.views.audit``.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotations.forms.auto_coding import (
    AutoCodingForm,
    auto_coding_fields,
    refusal_in_percent,
)
from annotations.importers import ImportFileError
from annotations.markdown import markdown_html
from annotations.models import Taxonomy
from annotations.selectors.taxonomy import (
    CSV_EXPORT_COLUMNS,
    taxonomies_with_counts,
    taxonomy_counts,
    taxonomy_export_rows,
    taxonomy_group_search,
)
from annotations.services.review.auto_coding import AutoCodingError, auto_coding_set
from annotations.services.taxonomy import ImportRejected
from annotations.services.taxonomy_edit.checks import TaxonomyEditError
from annotations.services.taxonomy_edit.guidelines import (
    GUIDELINES_MAX_CHARS,
    taxonomy_guidelines_update,
)
from annotations.services.taxonomy_upload import (
    taxonomy_import_upload,
    upload_too_large,
)
from annotations.signals import TaxonomyCannotServe, taxonomy_serve_request
from models_app.serving.auto_coding_audits import auto_coding_days, auto_coding_state
from models_app.serving.vouching import RECENT_DAYS, suggested_vouching
from siamweb.csv_cells import spreadsheet_cell
from siamweb.humanize import percent_text
from siamweb.web.decorators import admin_required
from siamweb.web.forms import form_errors

MAX_REPORTED_ROW_ERRORS = 200
SEARCH_RESULTS = 50


# --- forms ----------------------------------------------------------------------------------


class ImportForm(forms.Form):
    file = forms.FileField(
        help_text="csv: one CSV file (group_code, group_name, text[, description]); "
        "onet: a .zip holding 'Occupation Data.txt' and 'Alternate Titles.txt' "
        "(and optionally 'Related Occupations.txt'); esco: the occupations_en.csv file."
    )
    format = forms.ChoiceField(choices=Taxonomy.Format.choices)
    slug = forms.CharField(
        max_length=64,
        help_text="Letters, digits, '-' and '_'.",
    )
    name = forms.CharField(max_length=200, required=False)
    # One form creates and updates: a slug typed by mistake must not replace a live taxonomy.
    replace = forms.BooleanField(
        required=False, label="Replace the taxonomy of this slug if there is one"
    )

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"].strip()
        try:
            validate_slug(slug)
        except ValidationError:
            raise forms.ValidationError("may hold only letters, digits, '-' and '_'") from None
        return slug

    def clean_file(self):
        upload = self.cleaned_data["file"]
        too_large = upload_too_large(upload.size)
        if too_large:
            raise forms.ValidationError(too_large)
        return upload

    def clean(self):
        data = super().clean()
        slug = data.get("slug")
        if slug and not data.get("replace"):
            existing = Taxonomy.objects.filter(slug=slug).first()
            if existing is not None:
                counts = taxonomy_counts(existing)
                self.add_error(
                    "slug",
                    f"{slug} is taken by {existing.name} ({counts['groups']:,} groups, "
                    f'{counts["members"]:,} strings); tick "Replace" to update it from '
                    "this file, which removes its taxonomy strings the file does not hold, or "
                    "choose a new slug",
                )
        return data


# --- the taxonomy list and imports ----------------------------------------------------------


@admin_required
@require_http_methods(["GET", "POST"])
def taxonomy_list(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _list_page(request, ImportForm())
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return _list_page(request, form, error=form_errors(form), status=400)
    data = form.cleaned_data
    try:
        report = taxonomy_import_upload(
            upload=data["file"],
            fmt=data["format"],
            slug=data["slug"],
            name=data["name"].strip() or None,
            user=request.user,
        )
    except ImportFileError as exc:
        return _list_page(request, form, error=f"{exc.field}: {exc}", status=400)
    except ImportRejected as exc:
        return _list_page(
            request,
            form,
            error=f"file: {exc}",
            row_errors=exc.errors[:MAX_REPORTED_ROW_ERRORS],
            more_row_errors=max(0, len(exc.errors) - MAX_REPORTED_ROW_ERRORS),
            status=400,
        )
    messages.info(request, report.summary())
    try:
        run = taxonomy_serve_request(taxonomy=report.taxonomy, requested_by=request.user)
    except TaxonomyCannotServe as exc:
        messages.warning(request, f"{exc}.")
        return redirect("taxonomy-detail", slug=report.taxonomy.slug)
    if run is not None:
        if run.reindex:
            messages.info(request, f"Queued a reindex for {report.taxonomy.slug}.")
        else:
            messages.info(
                request,
                f"{report.taxonomy.slug} will serve with the pretrained model as soon as its "
                "members are encoded (minutes); training on its strings follows.",
            )
    return redirect("taxonomy-detail", slug=report.taxonomy.slug)


def _list_page(request: HttpRequest, form: ImportForm, status: int = 200, **extra) -> HttpResponse:
    context = {"taxonomies": taxonomies_with_counts(), "form": form, **extra}
    return render(request, "taxonomy/list.html", context, status=status)


# --- one taxonomy: group search, export -----------------------------------------------------


def taxonomy_or_404(slug: str) -> Taxonomy:
    return get_object_or_404(Taxonomy, slug=slug)


def search_query(request: HttpRequest) -> str:
    # Search words only: control characters (NUL included) can't be in a group name anyway.
    return "".join(ch for ch in request.GET.get("q", "")[:100] if ch.isprintable())


@admin_required
@require_GET
def taxonomy_detail(request: HttpRequest, slug: str) -> HttpResponse:
    taxonomy = taxonomy_or_404(slug)
    query = search_query(request)
    matches = taxonomy_group_search(taxonomy=taxonomy, query=query, limit=SEARCH_RESULTS)
    context = {"taxonomy": taxonomy, "q": query, "matches": matches}
    if request.htmx:
        return render(request, "taxonomy/_group_list.html", context)
    return taxonomy_detail_page(request, taxonomy, context)


def taxonomy_detail_page(
    request: HttpRequest,
    taxonomy: Taxonomy,
    context: dict,
    *,
    guidelines_text: str | None = None,
    guidelines_error: str | None = None,
    auto_coding_error: str | None = None,
    auto_coding_typed: Mapping[str, str] | None = None,
    status: int = 200,
) -> HttpResponse:
    context.setdefault(
        "matches", taxonomy_group_search(taxonomy=taxonomy, query="", limit=SEARCH_RESULTS)
    )
    context.update(
        counts=taxonomy_counts(taxonomy),
        guidelines_text=taxonomy.guidelines if guidelines_text is None else guidelines_text,
        guidelines_html=markdown_html(taxonomy.guidelines),
        guidelines_error=guidelines_error,
        guidelines_max=GUIDELINES_MAX_CHARS,
        vouching_days=RECENT_DAYS,
        auto_coding=(state := auto_coding_state(taxonomy)),
        auto_coding_fields=auto_coding_fields(state.policy, auto_coding_typed),
        auto_coding_days=auto_coding_days(taxonomy),
        auto_coding_error=auto_coding_error,
    )
    context["vouching"], context["vouching_error"] = suggested_vouching(taxonomy)
    return render(request, "taxonomy/detail.html", context, status=status)


@admin_required
@require_POST
def taxonomy_guidelines(request: HttpRequest, slug: str) -> HttpResponse:
    """Save the taxonomy's guidelines; a refusal keeps what was typed in the form."""
    taxonomy = taxonomy_or_404(slug)
    text = request.POST.get("guidelines", "")
    try:
        taxonomy_guidelines_update(taxonomy=taxonomy, text=text, user=request.user)
    except TaxonomyEditError as exc:
        context = {"taxonomy": taxonomy, "q": ""}
        return taxonomy_detail_page(
            request, taxonomy, context, guidelines_text=text, guidelines_error=str(exc), status=400
        )
    messages.info(request, "Guidelines saved.")
    return redirect("taxonomy-detail", slug=taxonomy.slug)


@admin_required
@require_POST
def taxonomy_auto_coding(request: HttpRequest, slug: str) -> HttpResponse:
    """Set the auto-coding policy from the taxonomy page; a refusal names the field."""
    taxonomy = taxonomy_or_404(slug)
    form = AutoCodingForm(request.POST)
    if not form.is_valid():
        return taxonomy_detail_page(request, taxonomy, {"taxonomy": taxonomy, "q": ""},
                            auto_coding_error=form.refusal(), auto_coding_typed=request.POST,
                            status=400)  # fmt: skip
    try:
        policy = auto_coding_set(
            taxonomy=taxonomy,
            target_precision=form.cleaned_data["target_precision"],
            audit_share=form.cleaned_data["audit_share"],
            user=request.user,
        )
    except AutoCodingError as exc:
        return taxonomy_detail_page(request, taxonomy, {"taxonomy": taxonomy, "q": ""},
                            auto_coding_error=f"{refusal_in_percent(exc)}; nothing changed",
                            auto_coding_typed=request.POST, status=400)  # fmt: skip
    if policy.target_precision is None:
        messages.info(request, "Auto-coding is off: every answer waits for review.")
        return redirect("taxonomy-detail", slug=taxonomy.slug)
    policy_said = (
        f"answers shown to be right {percent_text(policy.target_precision)} of the time are "
        f"coded by themselves, {percent_text(policy.audit_share)} of them audited blind"
    )
    state = auto_coding_state(taxonomy)
    if state.coding:
        messages.info(request, f"Auto-coding set (version {policy.version}): {policy_said}.")
    else:
        messages.warning(
            request,
            f"Auto-coding set (version {policy.version}), but it codes nothing for now: "
            f"{state.not_coding_reason}. Once the evidence shows a threshold, {policy_said}.",
        )
    return redirect("taxonomy-detail", slug=taxonomy.slug)


@admin_required
@require_GET
def taxonomy_export(request: HttpRequest, slug: str) -> StreamingHttpResponse:
    """Every member as the csv importer reads it: export, then import, gives the same groups.
    A cell that starts like a formula is escaped for spreadsheets (annotations/csv_cells.py)."""
    taxonomy = taxonomy_or_404(slug)
    writer = csv.writer(_Echo(), lineterminator="\n")

    def lines():
        yield writer.writerow(CSV_EXPORT_COLUMNS)
        for row in taxonomy_export_rows(taxonomy):
            yield writer.writerow([spreadsheet_cell(cell) for cell in row])

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{taxonomy.slug}.csv"'
    return response


class _Echo:
    """A file-like object whose write returns the line, so csv.writer can feed a stream."""

    def write(self, value: str) -> str:
        return value
