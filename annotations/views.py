"""The curator's review pages (htmx): one screen, its card swapped in place."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotations.forms import JudgementForm
from annotations.models import ReviewItem
from annotations.selectors import (
    group_search,
    recent_judgements,
    review_counts,
    review_item_next,
)
from annotations.services.review import VerdictError, judgement_create


def _review_context(request: HttpRequest, **extra) -> dict:
    return {
        "item": review_item_next(),
        "counts": review_counts(),
        "recent": recent_judgements(user=request.user),
        **extra,
    }


@login_required
@require_GET
def review(request: HttpRequest) -> HttpResponse:
    template = "annotations/_review_panel.html" if request.htmx else "annotations/review.html"
    return render(request, template, _review_context(request))


@login_required
@require_POST
def review_item_judge(request: HttpRequest, item_id: int) -> HttpResponse:
    item = get_object_or_404(ReviewItem.objects.select_related("input"), id=item_id)
    form = JudgementForm(request.POST, review_item=item)
    error = None
    if form.is_valid():
        try:
            judgement_create(
                review_item=item,
                user=request.user,
                verdict=form.cleaned_data["verdict"],
                group=form.cleaned_data["group_code"],
            )
        except VerdictError as exc:
            error = f"{exc.field}: {exc}"
    else:
        error = "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in form.errors.items())
    if not request.htmx:
        return redirect("review")
    response = render(
        request, "annotations/_review_panel.html", _review_context(request, error=error)
    )
    if error:
        response.status_code = 400
    return response


@login_required
@require_GET
def review_item_group_search(request: HttpRequest, item_id: int) -> HttpResponse:
    item = get_object_or_404(ReviewItem.objects.select_related("input__taxonomy"), id=item_id)
    query = request.GET.get("q", "")[:100]
    groups = group_search(taxonomy=item.input.taxonomy, query=query)
    return render(
        request, "annotations/_group_results.html", {"item": item, "groups": groups, "q": query}
    )


def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


def home(request: HttpRequest) -> HttpResponse:
    return redirect("review")
