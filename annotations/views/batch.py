"""Batch review by group (htmx): a group's open items as tiles, confirmed or marked at once, every
verdict or none; the last batch undone whole; "accept all above p" by the calibrated probability."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotations.forms.review import (
    BatchUndoForm,
    BatchVerdictForm,
    BlindModeForm,
)
from annotations.models import Group, ReviewItem, Taxonomy
from annotations.selectors.card import (
    group_members_sample,
    low_confidence,
    review_items_probability,
)
from annotations.selectors.history import recent_batches
from annotations.selectors.queue import review_batch_queue, review_groups_pending
from annotations.services.review.batch import judgements_create_for_group
from annotations.services.review.leases import review_item_release, review_items_claim_for_group
from annotations.services.review.live_ranking import review_items_rerank
from annotations.services.review.undo import judgements_undo
from annotations.services.review.verdict_rules import VerdictError
from annotations.views.review import verdict_error, with_query
from models_app.siamese.ranker.model import MIN_EXAMPLES
from siamweb.web.decorators import curator_required
from siamweb.web.forms import form_errors

BATCH_SIZE = 48


# Where "accept all above p" starts: a curator lowers it knowingly.
ACCEPT_MIN_DEFAULT = 0.9


@curator_required
@require_GET
def review_batch_groups(request: HttpRequest, slug: str) -> HttpResponse:
    taxonomy = get_object_or_404(Taxonomy, slug=slug)
    options = BlindModeForm(request.GET)
    if not options.is_valid():
        context = {"taxonomy": taxonomy, "error": form_errors(options), "groups": []}
        return render(request, "annotations/batch_groups.html", context, status=400)
    context = {
        "taxonomy": taxonomy,
        "groups": review_groups_pending(taxonomy=taxonomy, user=request.user),
        "options_query": options.query_string(),
        # A batch stays undoable after its result page is left.
        "batches": recent_batches(user=request.user, taxonomy=taxonomy),
    }
    return render(request, "annotations/batch_groups.html", context)


def _batch_group(slug: str, code: str) -> Group:
    return get_object_or_404(
        Group.objects.select_related("taxonomy"), taxonomy__slug=slug, code=code
    )


def _batch_refused(request: HttpRequest, group: Group, options: BlindModeForm) -> HttpResponse:
    context = {"group": group, "error": form_errors(options), "tiles": [], "refused": True}
    template = "annotations/_batch_panel.html" if request.htmx else "annotations/batch.html"
    return render(request, template, context, status=400)


# Never kept by the browser, as the card (``views.review.review``): tiles already judged
# must not come back by Back or Forward.
@never_cache
@curator_required
@require_http_methods(["GET", "POST"])
def review_batch(request: HttpRequest, slug: str, code: str) -> HttpResponse:
    """Up to 48 pending items predicted for one group: the curator marks the false matches and
    confirms the rest (or only those likely right enough) in one request; the next batch is
    leased and shown at once."""
    group = _batch_group(slug, code)
    options = BlindModeForm(request.GET)
    if not options.is_valid():
        return _batch_refused(request, group, options)
    done, error, status, kept_rejected = None, None, 200, set()
    if request.method == "POST":
        form = BatchVerdictForm(request.POST)
        if form.is_valid():
            confirm, reject = form.cleaned_data["confirm"], form.cleaned_data["reject"]
            if form.cleaned_data["accept_min"] is not None:
                confirm, error = _likely_enough(confirm, form.cleaned_data["accept_min"])
            if error is None:
                try:
                    done = judgements_create_for_group(
                        user=request.user,
                        group=group,
                        confirm_item_ids=confirm,
                        reject_item_ids=reject,
                    )
                except VerdictError as exc:
                    error, status = verdict_error(exc)
            else:
                status = 400
            if error:
                kept_rejected = set(reject)
        else:
            error, status = form_errors(form), 400
        if not request.htmx:
            if error:
                messages.error(request, error)
            elif done is not None:
                # Without htmx the page reloads: the notice comes as a message (undo is on the
                # review page's "last verdicts").
                messages.success(
                    request,
                    f"Just done: {len(done.confirmed)} confirmed · {len(done.rejected)} false "
                    f"match{'es' if len(done.rejected) != 1 else ''}.",
                )
            return redirect(with_query(request.path, options.query_string()))
    return _batch_panel(
        request, group, options, done=done, error=error, status=status, rejected=kept_rejected
    )


def _likely_enough(item_ids: list[int], minimum: float) -> tuple[list[int], str | None]:
    """The items among ``item_ids`` whose match probability is at least ``minimum``; or an
    error naming the field when the taxonomy has no probability yet or no item reaches it."""
    items = ReviewItem.objects.filter(id__in=item_ids).select_related("prediction")
    probabilities = review_items_probability(items)
    if not probabilities:
        return [], (
            "accept_min: these tiles have no match probability yet (the taxonomy's ranker is "
            f"calibrated once it has {MIN_EXAMPLES} verdicts); confirm the tiles instead"
        )
    kept = [i for i in item_ids if probabilities.get(i, -1.0) >= minimum]
    if not kept:
        return [], f"accept_min: no unmarked tile is at least {minimum:.2f} likely right"
    return kept, None


@curator_required
@require_POST
def review_batch_undo(request: HttpRequest, slug: str, code: str) -> HttpResponse:
    """Take back the batch just submitted (the page carries its verdicts' ids): its items come
    back into this curator's grid."""
    group = _batch_group(slug, code)
    options = BlindModeForm(request.GET)
    if not options.is_valid():
        return _batch_refused(request, group, options)
    form = BatchUndoForm(request.POST)
    error, status, notice = None, 200, None
    if form.is_valid():
        try:
            items = judgements_undo(judgement_ids=form.cleaned_data["judgement"], user=request.user)
        except VerdictError as exc:
            error, status = verdict_error(exc)
        else:
            notice = f"Batch undone: {len(items)} verdict{pluralize(len(items))} taken back."
    else:
        error, status = form_errors(form), 400
    if not request.htmx:
        if error:
            messages.error(request, error)
        else:
            messages.success(request, notice)
        page = reverse("review-batch", args=[group.taxonomy.slug, group.code])
        return redirect(with_query(page, options.query_string()))
    return _batch_panel(request, group, options, error=error, status=status, notice=notice)


def _batch_panel(
    request: HttpRequest,
    group: Group,
    options: BlindModeForm,
    *,
    done=None,
    error: str | None = None,
    notice: str | None = None,
    status: int = 200,
    rejected: set[int] | frozenset[int] = frozenset(),
) -> HttpResponse:
    """Lease the next batch and show it, with what was just done (and can be undone)."""
    items = review_items_claim_for_group(
        user=request.user, taxonomy=group.taxonomy, group=group, limit=BATCH_SIZE
    )
    # As the live model and ranker answer them now: an item whose answer moved to another group
    # leaves this grid (and is given back to the queue).
    items = review_items_rerank(items, user=request.user)
    for item in items:
        if item.top_group_id != group.id:
            review_item_release(item=item, user=request.user)
    items = [item for item in items if item.top_group_id == group.id]
    probabilities = {} if options.is_blind else review_items_probability(items)
    query = options.query_string()
    page = reverse("review-batch", args=[group.taxonomy.slug, group.code])
    context = {
        "group": group,
        "tiles": [
            _tile(item, group, rejected=item.id in rejected, probability=probabilities.get(item.id))
            for item in items
        ],
        "blind": options.is_blind,
        "page_url": with_query(page, query),
        "undo_url": with_query(
            reverse("review-batch-undo", args=[group.taxonomy.slug, group.code]), query
        ),
        "groups_url": with_query(reverse("review-batch-groups", args=[group.taxonomy.slug]), query),
        "members": group_members_sample(group=group),
        # Counted by the selector that leased the tiles: the two cannot disagree.
        "available": review_batch_queue(
            user=request.user, taxonomy=group.taxonomy, group=group
        ).count(),
        "probabilities": bool(probabilities),
        "accept_min": ACCEPT_MIN_DEFAULT,
        "done": done,
        "done_ids": [j.id for j in [*done.confirmed, *done.rejected]] if done else [],
        "error": error,
        "notice": notice,
    }
    template = "annotations/_batch_panel.html" if request.htmx else "annotations/batch.html"
    return render(request, template, context, status=status)


def _tile(
    item: ReviewItem, group: Group, *, rejected: bool, probability: float | None = None
) -> dict:
    ranked = next(
        (g for g in item.prediction.ranked_groups if g["group_id"] == group.id),
        {"member": None, "score": item.top_score},
    )
    return {
        "id": item.id,
        "text": item.input.text,
        "occurrences": item.input.occurrences,
        "member": ranked.get("member"),
        "score": ranked.get("score"),
        "probability": probability,
        "low": low_confidence(probability),
        "rejected": rejected,
    }
