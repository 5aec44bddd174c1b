"""The admins' list of flagged review items (a curator flags a card from the review page) and
the action that marks a flag dealt with."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotations.forms.flags import ReviewFlagFiltersForm
from annotations.models import ReviewFlag
from annotations.selectors.flags import review_flags
from annotations.services.flags import FlagError, review_flag_resolve
from siamweb.web.decorators import admin_required
from siamweb.web.forms import form_errors

FLAGS_PAGE_SIZE = 50


@admin_required
@require_GET
def review_flags_page(request: HttpRequest) -> HttpResponse:
    form = ReviewFlagFiltersForm(request.GET)
    context = {"form": form, "flags": []}
    if not form.is_valid():
        context["error"] = form_errors(form)
        return render(request, "annotations/flags.html", context, status=400)
    flags = review_flags(kind=form.cleaned_data["kind"] or None, resolved=form.resolved())
    page = Paginator(flags, FLAGS_PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context.update(flags=page.object_list, page=page, query=query.urlencode())
    return render(request, "annotations/flags.html", context)


@admin_required
@require_POST
def review_flag_resolve_view(request: HttpRequest, flag_id: int) -> HttpResponse:
    flag = get_object_or_404(ReviewFlag.objects.select_related("review_item__input"), id=flag_id)
    try:
        review_flag_resolve(flag=flag, user=request.user)
    except FlagError as exc:
        messages.error(request, f"Not resolved: {exc}.")
    else:
        messages.success(request, f"Resolved the flag on “{flag.review_item.input.text}”.")
    back = request.POST.get("next", "")
    # Back to the same filtered list; only a path of this site, never another host.
    return redirect(back if back.startswith("/review/flags/") else "review-flags")
