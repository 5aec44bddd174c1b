"""The curator's review card (htmx): the next item worth a look, its verdicts by key or click,
undo, flags and the reassign search. Its panel is swapped in place; the queue table and the
conflicts page are in ``views.queue``, batch review by group in ``views.batch``."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from annotations.forms.flags import ReviewFlagForm
from annotations.forms.review import (
    JudgementForm,
    ReviewFiltersForm,
)
from annotations.markdown import markdown_html
from annotations.models import Judgement, ReviewFlag, ReviewItem, Taxonomy
from annotations.selectors.card import (
    group_curator_counts,
    group_descriptions,
    low_confidence,
    member_marker,
    rejected_group_names,
    rejected_groups_for,
    review_card_groups,
    review_card_members,
    review_item_held,
    review_items_probability,
)
from annotations.selectors.history import latest_of, recent_verdicts_and_skips
from annotations.selectors.queue import QueueFilters
from annotations.selectors.search import reassign_group_search
from annotations.selectors.stats import inputs_judged_today_count, review_counts
from annotations.services.flags import FlagError, review_flag_create
from annotations.services.review.leases import review_item_claim
from annotations.services.review.live_ranking import review_item_rerank
from annotations.services.review.undo import judgement_undo
from annotations.services.review.verdict_rules import VerdictError
from annotations.services.review.verdicts import VerdictKeyUsed, judgement_create
from siamweb.web.decorators import curator_required
from siamweb.web.forms import form_errors

REVIEW_PAGE = "annotations/review.html"
REVIEW_PANEL = "annotations/_review_panel.html"


def with_query(url: str, query: str) -> str:
    return f"{url}?{query}" if query else url


def verdict_error(exc: VerdictError) -> tuple[str, int]:
    return f"{exc.field}: {exc}", exc.status_code


def key_used_message(stored: Judgement | None, *, item: ReviewItem) -> str:
    """A different verdict sent from a card that already stored one (a card kept by the
    browser, a second tab): what was stored and how to change it. The card's key is the
    request's idempotency key, never the keyboard's, so the API's wording would mislead here."""
    if stored is None or stored.review_item_id != item.id:
        return "Not stored: this card already sent a verdict. Reload the page for a fresh card."
    what = stored.get_verdict_display()
    if stored.group_id is not None:
        what += f" → {stored.group.name}"
    elif stored.rejected_group_id is not None:
        what += f" ≠ {stored.rejected_group.name}"
    if stored.undone_at is not None:
        return (
            f"Not stored: “{item.input.text}” was judged from this card ({what}) and that "
            "verdict was undone since. Reload the page to judge it again."
        )
    return (
        f"Not stored: you already judged “{item.input.text}” ({what}). To change that, undo it "
        "in your last verdicts (u if it is the latest) and judge the card again."
    )


# --- the card -------------------------------------------------------------------------------


def _card_context(
    request: HttpRequest,
    filters_form: ReviewFiltersForm,
    *,
    item: ReviewItem | None = None,
    error: str | None = None,
    notice: str | None = None,
    with_progress: bool = False,
) -> dict:
    """Everything the review panel shows; claims the next card unless ``item`` is given."""
    filters = filters_form.queue_filters()
    if item is None:
        item = review_item_claim(user=request.user, filters=filters)
    ranking_note = ""
    if item is not None:
        item, ranking_note = review_item_rerank(item, user=request.user)
    groups = review_card_groups(item, user=request.user) if item else []
    text = item.input.text if item else ""
    others = review_card_members(groups=groups, text=text)
    descriptions = group_descriptions(g["group_id"] for g in groups)
    curated = group_curator_counts(g["group_id"] for g in groups)
    awaiting = item is not None and item.status == ReviewItem.Status.AWAITING_GROUP
    mark = member_marker(text)
    options = [
        {
            "pick": position,
            "code": group["code"],
            "name": group["name"],
            "score": group["score"],
            "probability": group.get("probability"),
            # Too close to the top group's probability to tell apart: the curator chooses.
            "tied": bool(group.get("tied")),
            "curated": curated.get(group["group_id"], 0),
            "description": descriptions.get(group["group_id"], ""),
            "member": group.get("member"),
            "member_parts": mark(group.get("member") or ""),
            "others": [mark(m) for m in others.get(group["group_id"], [])],
            # The top group of an open item is confirmed; any other group is a reassignment.
            "verdict": "confirm"
            if not awaiting and group["group_id"] == item.top_group_id
            else "reassign",
        }
        for position, group in enumerate(groups, start=1)
    ]
    query = filters_form.query_string()
    probability = review_items_probability([item]).get(item.id) if item is not None else None
    guidelines = item.input.taxonomy.guidelines if item is not None else ""
    recent, skips = recent_verdicts_and_skips(user=request.user)
    return {
        "item": item,
        "ranking_note": ranking_note,
        "guidelines": markdown_html(guidelines) if guidelines else None,
        "options": options,
        "probability": probability,
        "low_confidence": low_confidence(probability),
        "first": options[0] if options else None,
        "tied_count": sum(option["tied"] for option in options),
        "awaiting": awaiting,
        # After a false match: the groups ruled out, named on the card with what to do next.
        "rejected_names": rejected_group_names(item, user=request.user) if awaiting else [],
        "blind": filters_form.is_blind,
        "filters_query": query,
        "judge_url": with_query(reverse("review-item-judge", args=[item.id]), query)
        if item
        else "",
        # A fresh key per card shown: a double click replays the first verdict, no error.
        "card_key": uuid.uuid4().hex,
        "flag_kinds": ReviewFlag.Kind.choices,
        "flag_comment_max": ReviewFlag.COMMENT_MAX_LENGTH,
        # Counting a big queue is the slowest part of a card: after a verdict the next card
        # goes out without it, and the counter asks for itself once swapped in.
        "progress": _progress(request, filters) if with_progress else None,
        "recent": recent,
        "skips": skips,
        # The key undoes whichever came last, a verdict or a skip.
        "undo_latest": latest_of(recent, skips),
        "error": error,
        "notice": notice,
    }


def _progress(request: HttpRequest, filters: QueueFilters) -> dict:
    today = inputs_judged_today_count(user=request.user)
    goal = settings.SIAMWEB_DAILY_GOAL
    return {
        "counts": review_counts(filters=filters),
        "today": today,
        "goal": goal,
        "goal_percent": min(100, round(100 * today / goal)),
    }


def _filters_refused(request: HttpRequest, filters_form: ReviewFiltersForm) -> HttpResponse:
    """Bad filters: say which, show no card, change nothing."""
    context = {
        "filter_form": filters_form,
        "taxonomies": Taxonomy.objects.only("slug", "name"),
        "error": form_errors(filters_form),
        "refused": True,
    }
    template = REVIEW_PANEL if request.htmx else REVIEW_PAGE
    return render(request, template, context, status=400)


# Never kept by the browser: the card shown again by Back or Forward would be one already
# judged, with stale counts, and a key pressed on it would act on that old card.
@never_cache
@curator_required
@require_GET
def review(request: HttpRequest) -> HttpResponse:
    filters_form = ReviewFiltersForm(request.GET)
    if not filters_form.is_valid():
        return _filters_refused(request, filters_form)
    context = _card_context(request, filters_form, with_progress=not request.htmx)
    if request.htmx:
        return render(request, REVIEW_PANEL, context)
    context.update(filter_form=filters_form, taxonomies=Taxonomy.objects.only("slug", "name"))
    return render(request, REVIEW_PAGE, context)


@curator_required
@require_GET
def review_progress(request: HttpRequest) -> HttpResponse:
    """The counter above the card: open and done within the filters, the curator's day."""
    filters_form = ReviewFiltersForm(request.GET)
    if not filters_form.is_valid():
        return HttpResponse(form_errors(filters_form), status=400, content_type="text/plain")
    context = {
        "progress": _progress(request, filters_form.queue_filters()),
        "filters_query": filters_form.query_string(),
    }
    return render(request, "annotations/_review_progress.html", context)


@curator_required
@require_POST
def review_item_judge(request: HttpRequest, item_id: int) -> HttpResponse:
    filters_form = ReviewFiltersForm(request.GET)
    if not filters_form.is_valid():
        return _filters_refused(request, filters_form)
    item = get_object_or_404(ReviewItem, id=item_id)
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
                idempotency_key=form.cleaned_data["idempotency_key"],
            )
        except VerdictKeyUsed as exc:
            error, status = key_used_message(exc.stored, item=item), exc.status_code
        except VerdictError as exc:
            # The card says why in words, without the field name the API answers with.
            error, status = verdict_error(exc)
            error = f"Not stored: {exc}."
    else:
        error, status = form_errors(form), 400
    if not request.htmx:
        if error:
            messages.error(request, error)
        return redirect(with_query(reverse("review"), filters_form.query_string()))
    # A refused verdict keeps the curator on the card they were judging, if it is still theirs.
    shown = review_item_held(user=request.user, item_id=item.id) if error else None
    context = _card_context(request, filters_form, item=shown, error=error)
    return render(request, REVIEW_PANEL, context, status=status)


@curator_required
@require_POST
def review_judgement_undo(request: HttpRequest, judgement_id: int) -> HttpResponse:
    filters_form = ReviewFiltersForm(request.GET)
    if not filters_form.is_valid():
        return _filters_refused(request, filters_form)
    judgement = get_object_or_404(Judgement, id=judgement_id)
    error, status, notice, shown = None, 200, None, None
    try:
        item = judgement_undo(judgement=judgement, user=request.user)
    except VerdictError as exc:
        error, status = verdict_error(exc)
    else:
        notice = "Verdict undone: judge this card again."
        # The undone card comes back to this curator, ahead of the one they were on.
        shown = review_item_held(user=request.user, item_id=item.id)
    if not request.htmx:
        if error:
            messages.error(request, error)
        return redirect(with_query(reverse("review"), filters_form.query_string()))
    context = _card_context(request, filters_form, item=shown, error=error, notice=notice)
    return render(request, REVIEW_PANEL, context, status=status)


@curator_required
@require_POST
def review_item_flag(request: HttpRequest, item_id: int) -> HttpResponse:
    """Flag a card for the admins; the same card stays in front of the curator."""
    filters_form = ReviewFiltersForm(request.GET)
    if not filters_form.is_valid():
        return _filters_refused(request, filters_form)
    item = get_object_or_404(ReviewItem.objects.select_related("taxonomy"), id=item_id)
    form = ReviewFlagForm(request.POST)
    error, notice, status = None, None, 200
    if form.is_valid():
        try:
            flag = review_flag_create(
                review_item=item,
                user=request.user,
                kind=form.cleaned_data["kind"],
                comment=form.cleaned_data["comment"],
            )
        except FlagError as exc:
            error, status = f"Not flagged: {exc}.", 400
        else:
            already = "Already flagged" if flag.replayed else "Flagged"
            notice = f"{already} for the admins: {flag.get_kind_display().lower()}."
    else:
        error, status = f"Not flagged: {form_errors(form)}", 400
    if not request.htmx:
        if error:
            messages.error(request, error)
        elif notice:
            messages.success(request, notice)
        return redirect(with_query(reverse("review"), filters_form.query_string()))
    shown = review_item_held(user=request.user, item_id=item.id)
    context = _card_context(
        request, filters_form, item=shown, error=error, notice=notice, with_progress=True
    )
    return render(request, REVIEW_PANEL, context, status=status)


@curator_required
@require_GET
def review_item_group_search(request: HttpRequest, item_id: int) -> HttpResponse:
    """Type-ahead over the item's taxonomy: buttons that reassign the card, or (``purpose=
    resolve``) settle the item's conflict."""
    item = get_object_or_404(
        ReviewItem.objects.select_related("taxonomy", "prediction"), id=item_id
    )
    # Search words only: control characters (NUL included) can't be in a group name anyway.
    query = "".join(ch for ch in request.GET.get("q", "")[:100] if ch.isprintable())
    scores = {g["group_id"]: g["score"] for g in item.prediction.ranked_groups}
    if request.GET.get("purpose") == "resolve":
        # An admin settling a conflict may choose any group, one rejected before included.
        found = reassign_group_search(taxonomy=item.taxonomy, query=query, scores=scores)
        action, verdict = reverse("review-conflict-resolve", args=[item.id]), ""
        target = "#conflicts-panel"
    else:
        # A group already rejected for this input would only be refused: it is not offered.
        found = reassign_group_search(
            taxonomy=item.taxonomy,
            query=query,
            exclude=rejected_groups_for(item, user=request.user),
            scores=scores,
        )
        filters_form = ReviewFiltersForm(request.GET)
        filters_query = filters_form.query_string() if filters_form.is_valid() else ""
        action = with_query(reverse("review-item-judge", args=[item.id]), filters_query)
        verdict, target = "reassign", "#review-panel"
    groups = [hit.group for hit in found]
    for hit in found:
        hit.group.why = hit.why
    for group in groups:
        # One key per button: a retried pick replays, a different pick is a new verdict.
        group.idempotency_key = uuid.uuid4().hex
    context = {
        "item": item,
        "groups": groups,
        "q": query,
        "action": action,
        "verdict": verdict,
        "target": target,
    }
    return render(request, "annotations/_group_results.html", context)
