"""A taxonomy's groups (admins only): a new group, a group's page with its members, and the edits
on them: rename, merge, and members added, moved and removed.

Every edit form on a group page posts with htmx and gets the group panel back, with the error
beside the form that caused it (status 400, naming the field) or the change applied.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from annotations.models import Group, Member
from annotations.selectors.taxonomy import (
    group_get,
    group_members_page,
    taxonomy_group_search,
)
from annotations.services.taxonomy_edit.checks import TaxonomyEditError
from annotations.services.taxonomy_edit.groups import group_create, group_merge, group_rename
from annotations.services.taxonomy_edit.members import member_add, member_move, member_remove
from annotations.views.taxonomy import search_query, taxonomy_detail_page, taxonomy_or_404
from siamweb.ids import IdError, parse_id
from siamweb.web.decorators import admin_required

TYPEAHEAD_RESULTS = 10


@admin_required
@require_POST
def taxonomy_group_create(request: HttpRequest, slug: str) -> HttpResponse:
    taxonomy = taxonomy_or_404(slug)
    code, name = request.POST.get("code", ""), request.POST.get("name", "")
    try:
        group = group_create(taxonomy=taxonomy, code=code, name=name, user=request.user)
    except TaxonomyEditError as exc:
        context = {"taxonomy": taxonomy, "code": code, "name": name, "error": _error(exc)}
        if request.htmx:
            return render(request, "taxonomy/_group_create.html", context, status=400)
        # The whole page as a GET shows it (guidelines, auto-coding, vouching): a form on it
        # read from a partial context would save blanks over what is stored.
        return taxonomy_detail_page(request, taxonomy, context | {"q": ""}, status=400)
    return _go_to(request, _group_url(group))


# --- one group: members and edits -----------------------------------------------------------


def _group(slug: str, code: str) -> Group:
    group = group_get(taxonomy=taxonomy_or_404(slug), code=code)
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
    query = search_query(request)
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
        return parse_id(value or "")
    except IdError:
        return 0


def _error(exc: TaxonomyEditError) -> str:
    return f"{exc.field}: {exc}"
