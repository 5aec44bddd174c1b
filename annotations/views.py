"""The curator's review pages (htmx): one screen, its card swapped in place."""

from __future__ import annotations

from django.contrib import messages
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotations.decorators import curator_required
from annotations.forms import JudgementForm
from annotations.models import ReviewItem
from annotations.selectors import (
    group_search,
    recent_judgements,
    review_card_groups,
    review_counts,
)
from annotations.services.review import VerdictError, judgement_create, review_item_claim


def _review_context(request: HttpRequest, **extra) -> dict:
    item = review_item_claim(user=request.user)
    return {
        "item": item,
        "groups": review_card_groups(item) if item else [],
        "counts": review_counts(),
        "recent": recent_judgements(user=request.user),
        **extra,
    }


@curator_required
@require_GET
def review(request: HttpRequest) -> HttpResponse:
    template = "annotations/_review_panel.html" if request.htmx else "annotations/review.html"
    return render(request, template, _review_context(request))


@curator_required
@require_POST
def review_item_judge(request: HttpRequest, item_id: int) -> HttpResponse:
    item = get_object_or_404(ReviewItem.objects.select_related("input"), id=item_id)
    form = JudgementForm(request.POST, review_item=item)
    error, status = None, 200
    if form.is_valid():
        try:
            judgement_create(
                review_item=item,
                user=request.user,
                verdict=form.cleaned_data["verdict"],
                group=form.cleaned_data["group_code"],
                prediction_id=form.cleaned_data["prediction_id"],
            )
        except VerdictError as exc:
            error = f"{exc.field}: {exc}"
            status = 409 if exc.conflict else 400
    else:
        error = "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in form.errors.items())
        status = 400
    if not request.htmx:
        if error:
            messages.error(request, error)
        return redirect("review")
    context = _review_context(request, error=error)
    return render(request, "annotations/_review_panel.html", context, status=status)


@curator_required
@require_GET
def review_item_group_search(request: HttpRequest, item_id: int) -> HttpResponse:
    item = get_object_or_404(ReviewItem.objects.select_related("input__taxonomy"), id=item_id)
    # Search words only: control characters (NUL included) can't be in a group name anyway.
    query = "".join(ch for ch in request.GET.get("q", "")[:100] if ch.isprintable())
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
