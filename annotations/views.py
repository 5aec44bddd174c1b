"""The curator's review pages (htmx): the card, the queue table, batch review by group and the
admins' conflicts page. One template per screen; its panel is swapped in place."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib import messages
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotations.decorators import admin_required, curator_required
from annotations.forms import (
    BatchUndoForm,
    BatchVerdictForm,
    BlindModeForm,
    ConflictResolveForm,
    JudgementForm,
    QueuePageForm,
    ReviewFiltersForm,
)
from annotations.forms_flags import ReviewFlagForm
from annotations.models import Group, Judgement, ReviewFlag, ReviewItem, Taxonomy
from annotations.selectors import (
    QueueFilters,
    curator_stats,
    group_members_sample,
    group_search,
    judgements_today_count,
    recent_judgements,
    rejected_group_names,
    rejected_groups_for,
    review_batch_queue,
    review_card_groups,
    review_card_members,
    review_conflicts,
    review_counts,
    review_groups_pending,
    review_item_held,
    review_queue_page,
)
from annotations.selectors_calibration import (
    MIN_VERDICTS,
    review_items_probability,
    taxonomy_calibrator,
)
from annotations.services.flags import FlagError, review_flag_create
from annotations.services.review import (
    VerdictError,
    judgement_create,
    judgement_undo,
    judgements_create_for_group,
    judgements_undo,
    review_conflict_resolve,
    review_item_claim,
    review_items_claim_for_group,
)
from annotations.text_match import matched_parts, words
from models_app.siamese.calibration import LOW_CONFIDENCE

REVIEW_PAGE = "annotations/review.html"
REVIEW_PANEL = "annotations/_review_panel.html"
QUEUE_PAGE_SIZE = 50
BATCH_SIZE = 48
# Where "accept all above p" starts: a curator lowers it knowingly.
ACCEPT_MIN_DEFAULT = 0.9
CONFLICTS_SHOWN = 50


def _with_query(url: str, query: str) -> str:
    return f"{url}?{query}" if query else url


def _verdict_error(exc: VerdictError) -> tuple[str, int]:
    return f"{exc.field}: {exc}", 409 if exc.conflict else 400


def _form_errors(form) -> str:
    return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in form.errors.items())


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
    groups = review_card_groups(item, user=request.user) if item else []
    text = item.input.text if item else ""
    others = review_card_members(groups=groups, text=text)
    awaiting = item is not None and item.status == ReviewItem.Status.AWAITING_GROUP
    # The input's words found in a member string are marked on the card (escaped as any text).
    input_words = words(text)
    options = [
        {
            "pick": position,
            "code": group["code"],
            "name": group["name"],
            "score": group["score"],
            "member": group.get("member"),
            "member_parts": matched_parts(group.get("member") or "", input_words),
            "others": [matched_parts(m, input_words) for m in others.get(group["group_id"], [])],
            # The top group of an open item is confirmed; any other group is a reassignment.
            "verdict": "confirm"
            if not awaiting and group["group_id"] == item.top_group_id
            else "reassign",
        }
        for position, group in enumerate(groups, start=1)
    ]
    query = filters_form.query_string()
    probability = None
    if item is not None and item.prediction.top_score is not None:
        calibrator = taxonomy_calibrator(item.taxonomy_id)
        if calibrator is not None:
            margin = item.prediction.margin if item.prediction.margin is not None else 1.0
            probability = calibrator.probability(item.prediction.top_score, margin)
    return {
        "item": item,
        "options": options,
        "probability": probability,
        "low_confidence": probability is not None and probability < LOW_CONFIDENCE,
        "first": options[0] if options else None,
        "awaiting": awaiting,
        # After a false match: the groups ruled out, named on the card with what to do next.
        "rejected_names": rejected_group_names(item, user=request.user) if awaiting else [],
        "blind": filters_form.is_blind,
        "filters_query": query,
        "judge_url": _with_query(reverse("review-item-judge", args=[item.id]), query)
        if item
        else "",
        # A fresh key per card shown: a double click replays the first verdict, no error.
        "card_key": uuid.uuid4().hex,
        "flag_kinds": ReviewFlag.Kind.choices,
        "flag_comment_max": ReviewFlag.COMMENT_MAX_LENGTH,
        # Counting a big queue is the slowest part of a card: after a verdict the next card
        # goes out without it, and the counter asks for itself once swapped in.
        "progress": _progress(request, filters) if with_progress else None,
        "recent": recent_judgements(user=request.user),
        "error": error,
        "notice": notice,
    }


def _progress(request: HttpRequest, filters: QueueFilters) -> dict:
    today = judgements_today_count(user=request.user)
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
        "error": _form_errors(filters_form),
        "refused": True,
    }
    template = REVIEW_PANEL if request.htmx else REVIEW_PAGE
    return render(request, template, context, status=400)


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
        return HttpResponse(_form_errors(filters_form), status=400, content_type="text/plain")
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
        except VerdictError as exc:
            # The card says why in words, without the field name the API answers with.
            error, status = _verdict_error(exc)
            error = f"Not stored: {exc}."
    else:
        error, status = _form_errors(form), 400
    if not request.htmx:
        if error:
            messages.error(request, error)
        return redirect(_with_query(reverse("review"), filters_form.query_string()))
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
        error, status = _verdict_error(exc)
    else:
        notice = "Verdict undone: judge this card again."
        # The undone card comes back to this curator, ahead of the one they were on.
        shown = review_item_held(user=request.user, item_id=item.id)
    if not request.htmx:
        if error:
            messages.error(request, error)
        return redirect(_with_query(reverse("review"), filters_form.query_string()))
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
            notice = f"Flagged for the admins: {flag.get_kind_display().lower()}."
    else:
        error, status = f"Not flagged: {_form_errors(form)}", 400
    if not request.htmx:
        if error:
            messages.error(request, error)
        elif notice:
            messages.success(request, notice)
        return redirect(_with_query(reverse("review"), filters_form.query_string()))
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
    if request.GET.get("purpose") == "resolve":
        # An admin settling a conflict may choose any group, one rejected before included.
        groups = group_search(taxonomy=item.taxonomy, query=query)
        action, verdict = reverse("review-conflict-resolve", args=[item.id]), ""
        target = "#conflicts-panel"
    else:
        # A group already rejected for this input would only be refused: it is not offered.
        scores = {g["group_id"]: g["score"] for g in item.prediction.ranked_groups}
        groups = group_search(
            taxonomy=item.taxonomy,
            query=query,
            exclude=rejected_groups_for(item, user=request.user),
            scores=scores,
        )
        filters_form = ReviewFiltersForm(request.GET)
        filters_query = filters_form.query_string() if filters_form.is_valid() else ""
        action = _with_query(reverse("review-item-judge", args=[item.id]), filters_query)
        verdict, target = "reassign", "#review-panel"
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


# --- the queue table ------------------------------------------------------------------------


@curator_required
@require_GET
def review_queue_list(request: HttpRequest) -> HttpResponse:
    form = QueuePageForm(request.GET)
    context = {"filter_form": form, "taxonomies": Taxonomy.objects.only("slug", "name")}
    if not form.is_valid():
        context["error"] = _form_errors(form)
        return render(request, "annotations/review_queue.html", context, status=400)
    # One row more than shown says whether a next page exists.
    rows = review_queue_page(
        filters=form.queue_filters(), after=form.cleaned_data["after"], limit=QUEUE_PAGE_SIZE + 1
    )
    items, more = rows[:QUEUE_PAGE_SIZE], len(rows) > QUEUE_PAGE_SIZE
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


# --- batch review by group ------------------------------------------------------------------


@curator_required
@require_GET
def review_batch_groups(request: HttpRequest, slug: str) -> HttpResponse:
    taxonomy = get_object_or_404(Taxonomy, slug=slug)
    options = BlindModeForm(request.GET)
    if not options.is_valid():
        context = {"taxonomy": taxonomy, "error": _form_errors(options), "groups": []}
        return render(request, "annotations/batch_groups.html", context, status=400)
    context = {
        "taxonomy": taxonomy,
        "groups": review_groups_pending(taxonomy=taxonomy, user=request.user),
        "options_query": options.query_string(),
    }
    return render(request, "annotations/batch_groups.html", context)


def _batch_group(slug: str, code: str) -> Group:
    return get_object_or_404(
        Group.objects.select_related("taxonomy"), taxonomy__slug=slug, code=code
    )


def _batch_refused(request: HttpRequest, group: Group, options: BlindModeForm) -> HttpResponse:
    context = {"group": group, "error": _form_errors(options), "tiles": [], "refused": True}
    template = "annotations/_batch_panel.html" if request.htmx else "annotations/batch.html"
    return render(request, template, context, status=400)


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
                    error, status = _verdict_error(exc)
            else:
                status = 400
            if error:
                kept_rejected = set(reject)
        else:
            error, status = _form_errors(form), 400
        if not request.htmx:
            if error:
                messages.error(request, error)
            return redirect(_with_query(request.path, options.query_string()))
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
            "accept_min: this taxonomy has no match probability yet (it needs "
            f"{MIN_VERDICTS} verdicts, right and wrong ones); confirm the tiles instead"
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
            error, status = _verdict_error(exc)
        else:
            notice = f"Batch undone: {len(items)} verdict{pluralize(len(items))} taken back."
    else:
        error, status = _form_errors(form), 400
    if not request.htmx:
        if error:
            messages.error(request, error)
        page = reverse("review-batch", args=[group.taxonomy.slug, group.code])
        return redirect(_with_query(page, options.query_string()))
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
        "page_url": _with_query(page, query),
        "undo_url": _with_query(
            reverse("review-batch-undo", args=[group.taxonomy.slug, group.code]), query
        ),
        "groups_url": _with_query(
            reverse("review-batch-groups", args=[group.taxonomy.slug]), query
        ),
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
        "low": probability is not None and probability < LOW_CONFIDENCE,
        "rejected": rejected,
    }


# --- conflicts (admins) ---------------------------------------------------------------------


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
            error, status = _verdict_error(exc)
        else:
            where = f"{group.code} {group.name}" if group else "none of the groups"
            notice = f"Settled “{item.input.text}”: {where}."
    else:
        error, status = _form_errors(form), 400
    if not request.htmx:
        if error:
            messages.error(request, error)
        return redirect("review-conflicts")
    context = _conflicts_context(request, taxonomy, error=error, notice=notice)
    return render(request, "annotations/_conflicts_panel.html", context, status=status)


# --- not the review pages ---------------------------------------------------------------


def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


def home(request: HttpRequest) -> HttpResponse:
    return redirect("review")
