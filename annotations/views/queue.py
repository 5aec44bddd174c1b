"""The queue table (every item with the card's filters, page by page) and the admins' conflicts
page, where items two curators judged differently are settled."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from annotations.forms.review import (
    ConflictResolveForm,
    QueuePageForm,
)
from annotations.models import ReviewItem, Taxonomy
from annotations.selectors.card import review_items_probability
from annotations.selectors.queue import review_conflicts, review_queue_page
from annotations.selectors.stats import curator_stats
from annotations.services.review.live_ranking import review_items_rerank
from annotations.services.review.undo import review_conflict_resolve
from annotations.services.review.verdict_rules import VerdictError
from annotations.views.review import verdict_error
from siamweb.web.decorators import admin_required, curator_required
from siamweb.web.forms import form_errors

QUEUE_PAGE_SIZE = 50


CONFLICTS_SHOWN = 50


@curator_required
@require_GET
def review_queue_list(request: HttpRequest) -> HttpResponse:
    form = QueuePageForm(request.GET)
    context = {"filter_form": form, "taxonomies": Taxonomy.objects.only("slug", "name")}
    if not form.is_valid():
        context["error"] = form_errors(form)
        return render(request, "annotations/review_queue.html", context, status=400)
    # One row more than shown says whether a next page exists.
    rows = review_queue_page(
        filters=form.queue_filters(), after=form.cleaned_data["after"], limit=QUEUE_PAGE_SIZE + 1
    )
    items, more = rows[:QUEUE_PAGE_SIZE], len(rows) > QUEUE_PAGE_SIZE
    # The open ones as the live model and ranker answer them now, as their cards will.
    items = review_items_rerank(items, user=request.user)
    # The figure the card shows for each: the chance its top group is right.
    chances = review_items_probability(item for item in items if item.prediction_id)
    for item in items:
        item.chance = chances.get(item.id)
    query = form.query_string()
    next_url = None
    if more:
        last = items[-1]
        after = f"after={last.priority!r}:{last.id}"
        next_url = f"?{query}&{after}" if query else f"?{after}"
    context.update(
        items=items,
        now=timezone.now(),
        blind=form.is_blind,
        filters_query=query,
        next_url=next_url,
        first_page=form.cleaned_data["after"] is None,
        # Rows link their group to batch review when one taxonomy is shown.
        batch_slug=form.cleaned_data["taxonomy"].slug if form.cleaned_data["taxonomy"] else "",
        status=form.cleaned_data["status"] or ReviewItem.Status.PENDING,
    )
    return render(request, "annotations/review_queue.html", context)


def _conflicts_context(request: HttpRequest, taxonomy: Taxonomy | None, **extra) -> dict:
    conflicts = list(review_conflicts(taxonomy=taxonomy)[:CONFLICTS_SHOWN])
    for item in conflicts:
        # The groups curators chose, once each: any of them settles the conflict in a click.
        item.chosen_groups = list(
            {j.group_id: j.group for j in item.final_judgements if j.group}.values()
        )
    stats = curator_stats(taxonomy=taxonomy)
    return {
        "conflicts": conflicts,
        "stats": stats,
        # "The curators agree" only means something once an input was judged twice.
        "compared": any(row["seen_twice"] for row in stats),
        "taxonomy": taxonomy,
        "taxonomies": Taxonomy.objects.only("slug", "name"),
        "shown_limit": CONFLICTS_SHOWN,
        **extra,
    }


def _conflicts_taxonomy(request: HttpRequest) -> tuple[Taxonomy | None, str | None]:
    slug = request.GET.get("taxonomy", "")
    if not slug:
        return None, None
    taxonomy = Taxonomy.objects.filter(slug=slug).first()
    return taxonomy, None if taxonomy else f"taxonomy: no taxonomy {slug!r}"


@admin_required
@require_GET
def review_conflicts_page(request: HttpRequest) -> HttpResponse:
    taxonomy, error = _conflicts_taxonomy(request)
    if error:
        context = {"error": error, "taxonomies": Taxonomy.objects.only("slug", "name")}
        return render(request, "annotations/conflicts.html", context, status=400)
    context = _conflicts_context(request, taxonomy)
    template = "annotations/_conflicts_panel.html" if request.htmx else "annotations/conflicts.html"
    return render(request, template, context)


@admin_required
@require_POST
def review_conflict_resolve_view(request: HttpRequest, item_id: int) -> HttpResponse:
    item = get_object_or_404(ReviewItem.objects.select_related("input"), id=item_id)
    taxonomy, _ = _conflicts_taxonomy(request)
    form = ConflictResolveForm(request.POST, review_item=item)
    error, status, notice = None, 200, None
    if form.is_valid():
        group = form.cleaned_data["group_code"]
        try:
            review_conflict_resolve(item=item, user=request.user, group=group)
        except VerdictError as exc:
            error, status = verdict_error(exc)
        else:
            where = f"{group.code} {group.name}" if group else "none of the groups"
            notice = f"Settled “{item.input.text}”: {where}."
    else:
        error, status = form_errors(form), 400
    if not request.htmx:
        if error:
            messages.error(request, error)
        return redirect("review-conflicts")
    context = _conflicts_context(request, taxonomy, error=error, notice=notice)
    return render(request, "annotations/_conflicts_panel.html", context, status=status)


@admin_required
@require_GET
def review_curators_page(request: HttpRequest) -> HttpResponse:
    """Per-curator figures on one page: verdicts a day, agreement, reversal rate."""
    taxonomy, error = _conflicts_taxonomy(request)
    context = {
        "stats": curator_stats(taxonomy=taxonomy) if error is None else [],
        "taxonomy": taxonomy,
        "taxonomies": Taxonomy.objects.only("slug", "name"),
        "error": error,
    }
    return render(request, "annotations/curators.html", context, status=400 if error else 200)
