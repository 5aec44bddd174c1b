"""Taxonomy administration (admins only): import, browse and search groups, edit groups and
members, export; and the audit trail.

Views are thin: a form checks the shape of the input, a service makes the change, a selector
reads. Every edit form on a group page posts with htmx and gets the group panel back, with the
error beside the form that caused it (status 400, naming the field) or the change applied.
"""

from __future__ import annotations

import csv
import re
import tempfile
import zipfile
from pathlib import Path

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from annotations.csv_cells import spreadsheet_cell
from annotations.decorators import admin_required
from annotations.importers import ONET_ALTERNATES, ONET_OCCUPATIONS, ONET_RELATED, ImportFileError
from annotations.models import Group, Member, Taxonomy
from annotations.selectors_audit import audit_rows
from annotations.selectors_taxonomy import (
    AUDIT_ACTIONS,
    CSV_EXPORT_COLUMNS,
    audit_events_page,
    group_get,
    group_members_page,
    taxonomies_with_counts,
    taxonomy_counts,
    taxonomy_export_rows,
    taxonomy_group_search,
)
from annotations.services.taxonomy import ImportRejected, taxonomy_import
from annotations.services.taxonomy_edit import (
    TaxonomyEditError,
    group_create,
    group_merge,
    group_rename,
    member_add,
    member_move,
    member_remove,
)
from models_app.models import TrainingRun
from models_app.services import taxonomy_model_refresh

# An upload larger than this is refused before it is read: O*NET's zip is a few MB and ESCO's
# occupations file about 20 MB; the command line imports anything bigger.
MAX_IMPORT_BYTES = 50 * 1024 * 1024
# What an O*NET zip may unpack to, in all (a zip's header can lie: the copy is counted too).
MAX_UNZIPPED_BYTES = 200 * 1024 * 1024
MAX_REPORTED_ROW_ERRORS = 200
SEARCH_RESULTS = 50
TYPEAHEAD_RESULTS = 10


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
        help_text="Letters, digits, '-' and '_'. An existing slug is updated from the file.",
    )
    name = forms.CharField(max_length=200, required=False)

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"].strip()
        try:
            validate_slug(slug)
        except ValidationError:
            raise forms.ValidationError("may hold only letters, digits, '-' and '_'") from None
        return slug

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > MAX_IMPORT_BYTES:
            raise forms.ValidationError(_too_large(upload.size))
        return upload


def _too_large(size: int) -> str:
    return (
        f"the file is {filesizeformat(size)}; the page takes up to "
        f"{filesizeformat(MAX_IMPORT_BYTES)} (the import_taxonomy command takes bigger ones)"
    )


class AuditFilterForm(forms.Form):
    taxonomy = forms.ModelChoiceField(
        queryset=Taxonomy.objects.all(), to_field_name="slug", required=False
    )
    actor = forms.CharField(max_length=150, required=False)
    action = forms.CharField(max_length=64, required=False)
    before = forms.IntegerField(min_value=1, required=False)


# --- the taxonomy list and imports ----------------------------------------------------------


@admin_required
@require_http_methods(["GET", "POST"])
def taxonomy_list(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _list_page(request, ImportForm())
    declared = int(request.META.get("CONTENT_LENGTH") or 0)
    if declared > MAX_IMPORT_BYTES + 64 * 1024:
        # Refused before Django reads the body into a temporary file.
        return _list_page(request, ImportForm(), error=f"file: {_too_large(declared)}", status=400)
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return _list_page(request, form, error=_form_errors(form), status=400)
    data = form.cleaned_data
    try:
        with tempfile.TemporaryDirectory(prefix="siamweb-import-") as folder:
            path = _unpack(data["file"], data["format"], Path(folder))
            report = taxonomy_import(
                slug=data["slug"],
                path=path,
                fmt=data["format"],
                name=data["name"].strip() or None,
                user=request.user,
            )
    except ImportFileError as exc:
        return _list_page(request, form, error=f"file: {exc}", status=400)
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
    run = taxonomy_model_refresh(taxonomy=report.taxonomy, requested_by=request.user)
    if run is not None:
        if run.kind == TrainingRun.Kind.REINDEX:
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


def _upload_name(upload) -> str:
    """The uploaded file's own name, so that the import report says "jobs.csv:12"."""
    name = re.sub(r"[^\w.\- ]", "_", Path(upload.name or "").name)[:100].strip(" .")
    return name or "upload"


def _unpack(upload, fmt: str, folder: Path) -> Path:
    """Put the upload where the importer reads it: a file for csv and esco, a folder for onet."""
    if fmt != Taxonomy.Format.ONET:
        path = folder / _upload_name(upload)
        with path.open("wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
        return path
    try:
        archive = zipfile.ZipFile(upload)
    except zipfile.BadZipFile:
        raise ImportFileError(
            f"{_upload_name(upload)} is not a zip archive; the onet format takes a .zip of the "
            f"O*NET text files"
        ) from None
    wanted = {ONET_OCCUPATIONS, ONET_ALTERNATES, ONET_RELATED}
    budget = MAX_UNZIPPED_BYTES
    target = folder / "onet"
    target.mkdir()
    with archive:
        for info in archive.infolist():
            # Matched by file name wherever the zip keeps it; nothing else is written out.
            name = Path(info.filename).name
            if info.is_dir() or name not in wanted or (target / name).exists():
                continue
            with archive.open(info) as source, (target / name).open("wb") as out:
                budget -= _copy_bounded(source, out, budget)
    return target


def _copy_bounded(source, out, budget: int) -> int:
    copied = 0
    while chunk := source.read(1024 * 1024):
        copied += len(chunk)
        if copied > budget:
            raise ImportFileError(
                f"the zip unpacks to more than {MAX_UNZIPPED_BYTES // 2**20} MB; "
                "use the import_taxonomy command"
            )
        out.write(chunk)
    return copied


# --- one taxonomy: group search, create group, export ---------------------------------------


def _taxonomy(slug: str) -> Taxonomy:
    return get_object_or_404(Taxonomy, slug=slug)


def _search_query(request: HttpRequest) -> str:
    # Search words only: control characters (NUL included) can't be in a group name anyway.
    return "".join(ch for ch in request.GET.get("q", "")[:100] if ch.isprintable())


@admin_required
@require_GET
def taxonomy_detail(request: HttpRequest, slug: str) -> HttpResponse:
    taxonomy = _taxonomy(slug)
    query = _search_query(request)
    matches = taxonomy_group_search(taxonomy=taxonomy, query=query, limit=SEARCH_RESULTS)
    context = {"taxonomy": taxonomy, "q": query, "matches": matches}
    if request.htmx:
        return render(request, "taxonomy/_group_list.html", context)
    context["counts"] = taxonomy_counts(taxonomy)
    return render(request, "taxonomy/detail.html", context)


@admin_required
@require_POST
def taxonomy_group_create(request: HttpRequest, slug: str) -> HttpResponse:
    taxonomy = _taxonomy(slug)
    code, name = request.POST.get("code", ""), request.POST.get("name", "")
    try:
        group = group_create(taxonomy=taxonomy, code=code, name=name, user=request.user)
    except TaxonomyEditError as exc:
        context = {"taxonomy": taxonomy, "code": code, "name": name, "error": _error(exc)}
        if request.htmx:
            return render(request, "taxonomy/_group_create.html", context, status=400)
        query = ""
        context |= {
            "counts": taxonomy_counts(taxonomy),
            "q": query,
            "matches": taxonomy_group_search(taxonomy=taxonomy, query=query),
        }
        return render(request, "taxonomy/detail.html", context, status=400)
    return _go_to(request, _group_url(group))


@admin_required
@require_GET
def taxonomy_export(request: HttpRequest, slug: str) -> StreamingHttpResponse:
    """Every member as the csv importer reads it: export, then import, gives the same groups.
    A cell that starts like a formula is escaped for spreadsheets (annotations/csv_cells.py)."""
    taxonomy = _taxonomy(slug)
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


# --- one group: members and edits -----------------------------------------------------------


def _group(slug: str, code: str) -> Group:
    group = group_get(taxonomy=_taxonomy(slug), code=code)
    if group is None:
        raise Http404(f"no group {code!r} in {slug}")
    return group


def _group_url(group: Group) -> str:
    return reverse("taxonomy-group", kwargs={"slug": group.taxonomy.slug, "code": group.code})


def _member(group: Group, member_id: int) -> Member:
    return get_object_or_404(Member.objects.select_related("added_by"), id=member_id, group=group)


def _group_page(request: HttpRequest, group: Group, *, status: int = 200, **extra) -> HttpResponse:
    """The group panel for htmx, else the whole page around it."""
    page_number = request.GET.get("page") or request.POST.get("page")
    context = {
        "taxonomy": group.taxonomy,
        "group": group,
        "members": group_members_page(group=group, page=page_number),
        "errors": {},
        **extra,
    }
    template = "taxonomy/_group_panel.html" if request.htmx else "taxonomy/group.html"
    return render(request, template, context, status=status)


def _after_edit(request: HttpRequest, group: Group, notice: str) -> HttpResponse:
    if request.htmx:
        return _group_page(request, group, notice=notice)
    messages.info(request, notice)
    return redirect(_group_url(group))


def _edit_refused(request: HttpRequest, group: Group, form: str, exc: TaxonomyEditError, **extra):
    return _group_page(request, group, status=400, errors={form: _error(exc)}, **extra)


@admin_required
@require_GET
def taxonomy_group(request: HttpRequest, slug: str, code: str) -> HttpResponse:
    return _group_page(request, _group(slug, code))


@admin_required
@require_POST
def taxonomy_group_rename(request: HttpRequest, slug: str, code: str) -> HttpResponse:
    group = _group(slug, code)
    try:
        group = group_rename(group=group, name=request.POST.get("name", ""), user=request.user)
    except TaxonomyEditError as exc:
        return _edit_refused(request, group, "rename", exc, rename_value=request.POST.get("name"))
    return _after_edit(request, group, f"Renamed to “{group.name}”.")


@admin_required
@require_POST
def taxonomy_member_add(request: HttpRequest, slug: str, code: str) -> HttpResponse:
    group = _group(slug, code)
    text = request.POST.get("text", "")
    try:
        added = member_add(group=group, text=text, user=request.user)
    except TaxonomyEditError as exc:
        return _edit_refused(request, group, "add", exc, add_value=text)
    notice = f"Added “{added.text}”."
    if added.also_in:
        others = ", ".join(f"{g.code} {g.name}" for g in added.also_in)
        notice += f" The same text is also in {others}."
    return _after_edit(request, group, notice)


@admin_required
@require_http_methods(["GET", "POST"])
def taxonomy_member_move(request: HttpRequest, slug: str, code: str, member_id: int):
    """GET: the move panel for one member (type-ahead for the target); POST: move it."""
    group = _group(slug, code)
    member = _member(group, member_id)
    if request.method == "GET":
        return _group_page(request, group, moving=member)
    target_code = request.POST.get("group_code", "").strip()
    target = group_get(taxonomy=group.taxonomy, code=target_code) if target_code else None
    try:
        if target is None:
            raise TaxonomyEditError(
                "group",
                f"no group {target_code!r} in this taxonomy" if target_code else "choose a group",
            )
        member = member_move(member=member, group=target, user=request.user)
    except TaxonomyEditError as exc:
        return _edit_refused(request, group, "move", exc, moving=member)
    return _after_edit(request, group, f"Moved “{member.text}” to {target.code} {target.name}.")


@admin_required
@require_http_methods(["GET", "POST"])
def taxonomy_member_remove(request: HttpRequest, slug: str, code: str, member_id: int):
    """GET: ask to confirm; POST: remove."""
    group = _group(slug, code)
    member = _member(group, member_id)
    if request.method == "GET":
        return _group_page(request, group, removing=member)
    try:
        member_remove(member=member, user=request.user)
    except TaxonomyEditError as exc:
        return _edit_refused(request, group, "remove", exc)
    return _after_edit(request, group, f"Removed “{member.text}”.")


@admin_required
@require_GET
def taxonomy_group_targets(request: HttpRequest, slug: str, code: str) -> HttpResponse:
    """Type-ahead: the groups a member could move to, or this group could merge into."""
    group = _group(slug, code)
    query = _search_query(request)
    purpose = "merge" if request.GET.get("purpose") == "merge" else "move"
    moving = None
    if purpose == "move":
        moving = _member(group, _int(request.GET.get("member")))
    matches = (
        taxonomy_group_search(
            taxonomy=group.taxonomy, query=query, limit=TYPEAHEAD_RESULTS, exclude=group
        )
        if query.strip()
        else None
    )
    context = {
        "group": group,
        "taxonomy": group.taxonomy,
        "q": query,
        "matches": matches,
        "purpose": purpose,
        "moving": moving,
    }
    return render(request, "taxonomy/_targets.html", context)


@admin_required
@require_http_methods(["GET", "POST"])
def taxonomy_group_merge(request: HttpRequest, slug: str, code: str) -> HttpResponse:
    """GET ?into=<code>: ask to confirm merging this group into that one; POST: merge, then go
    to the group that remains."""
    source = _group(slug, code)
    data = request.GET if request.method == "GET" else request.POST
    into = data.get("into", "").strip()
    target = group_get(taxonomy=source.taxonomy, code=into) if into else None
    if target is None:
        message = f"no group {into!r} in this taxonomy" if into else "choose a group"
        return _edit_refused(request, source, "merge", TaxonomyEditError("target", message))
    if request.method == "GET":
        if target.id == source.id:
            error = TaxonomyEditError("target", "a group cannot be merged into itself")
            return _edit_refused(request, source, "merge", error)
        return _group_page(
            request,
            source,
            merging_into=target,
            target_member_count=target.members.count(),
        )
    try:
        target = group_merge(source=source, target=target, user=request.user)
    except TaxonomyEditError as exc:
        return _edit_refused(request, source, "merge", exc)
    messages.info(request, f"Merged {code} into {target.code} {target.name}.")
    return _go_to(request, _group_url(target))


def _go_to(request: HttpRequest, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _int(value: str | None) -> int:
    try:
        return int(value or "")
    except ValueError:
        return 0


def _error(exc: TaxonomyEditError) -> str:
    return f"{exc.field}: {exc}"


def _form_errors(form: forms.Form) -> str:
    return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in form.errors.items())


# --- the audit trail ------------------------------------------------------------------------


@admin_required
@require_GET
def audit_log(request: HttpRequest) -> HttpResponse:
    form = AuditFilterForm(request.GET)
    if not form.is_valid():
        context = {
            "form": form,
            "events": [],
            "error": _form_errors(form),
            "actions": AUDIT_ACTIONS,
        }
        return render(request, "taxonomy/audit.html", context, status=400)
    filters = form.cleaned_data
    page = audit_events_page(
        taxonomy=filters["taxonomy"],
        actor=filters["actor"].strip(),
        action=filters["action"].strip(),
        before=filters["before"],
    )
    query = request.GET.copy()
    query.pop("before", None)
    context = {
        "form": form,
        # Values in words: field names, groups and items by name, objects linked.
        "events": audit_rows(page.events),
        "next_before": page.next_before,
        "filter_query": query.urlencode(),
        "actions": AUDIT_ACTIONS,
    }
    return render(request, "taxonomy/audit.html", context)
