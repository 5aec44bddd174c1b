"""Inputs in from people: the CSV upload, the inputs list and the playground."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotations.forms.inputs import (
    InputsFilterForm,
    InputsUploadForm,
    PlaygroundForm,
    PlaygroundSendForm,
)
from annotations.models import Judgement, ReviewItem
from annotations.selectors.card import review_items_probability
from annotations.selectors.history import input_history
from annotations.services.inputs_upload import (
    INPUTS_PAGE_SIZE,
    UPLOAD_ERRORS_SHOWN,
    UploadFileError,
    UploadRejected,
    input_send_to_review,
    inputs_recent,
    inputs_upload,
    parse_inputs_file,
    upload_max_bytes,
    upload_max_rows,
)
from annotations.services.review.auto_coding import AutoCodingError, auto_coded_reopen
from annotations.services.review.inputs import ReviewQueueFull
from annotations.services.review.live_ranking import review_item_rerank
from annotations.services.review.undo import judgement_undo
from annotations.services.review.verdict_rules import VerdictError
from models_app.serving.engines import SERVING_UNAVAILABLE, NoLiveModel
from models_app.serving.normalize import rank_taxonomy_groups
from siamweb.humanize import format_size
from siamweb.ids import IdError, parse_id
from siamweb.web.decorators import curator_required

# --- upload ---------------------------------------------------------------------------------


@curator_required
@require_http_methods(["GET", "POST"])
def inputs_upload_page(request: HttpRequest) -> HttpResponse:
    context = {
        "max_size": format_size(upload_max_bytes()),
        "max_rows": upload_max_rows(),
        "max_length": settings.SIAMWEB_MAX_TEXT_LENGTH,
        "errors_shown": UPLOAD_ERRORS_SHOWN,
    }
    if request.method == "GET":
        form = InputsUploadForm(initial={"taxonomy": request.GET.get("taxonomy")})
        return render(request, "inputs/upload.html", {**context, "form": form})

    form = InputsUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return render(request, "inputs/upload.html", {**context, "form": form}, status=400)
    taxonomy, upload = form.cleaned_data["taxonomy"], form.cleaned_data["file"]
    error, status, rejected, report = None, 200, None, None
    try:
        parsed = parse_inputs_file(data=upload.read(), filename=upload.name)
        report = inputs_upload(
            taxonomy=taxonomy,
            parsed=parsed,
            filename=upload.name,
            user=request.user,
            skip_bad_rows=form.cleaned_data["skip_bad_rows"],
        )
    except UploadRejected as exc:
        error, status, rejected = str(exc), 400, exc.parsed
    except UploadFileError as exc:
        error, status = f"file: {exc}", 400
    except SERVING_UNAVAILABLE as exc:
        error, status = _unavailable(exc)
        error += "; nothing was stored"
    except ReviewQueueFull as exc:
        error, status = f"file: {exc}", 409
    context.update(form=form, error=error, rejected=rejected, report=report, taxonomy=taxonomy)
    return render(request, "inputs/upload.html", context, status=status)


# --- the inputs list ------------------------------------------------------------------------


@curator_required
@require_GET
def inputs_list(request: HttpRequest) -> HttpResponse:
    form = InputsFilterForm(request.GET)
    if not form.is_valid():
        context = {"form": form, "inputs": [], "error": form.errors_text()}
        return render(request, "inputs/list.html", context, status=400)
    filters = form.cleaned_data
    rows = list(
        inputs_recent(
            taxonomy=filters["taxonomy"],
            query=filters["q"],
            before=filters["before"],
            limit=INPUTS_PAGE_SIZE + 1,
        )
    )
    inputs, more = rows[:INPUTS_PAGE_SIZE], len(rows) > INPUTS_PAGE_SIZE
    # Beside each predicted group, the chance the prediction gave it, as the card words it (a
    # bare similarity there was read as a confidence). The list is the history of what arrived;
    # an input's page shows the live answer.
    items = [input.review_item for input in inputs if hasattr(input, "review_item")]
    chances = review_items_probability(item for item in items if item.prediction_id)
    for item in items:
        item.chance = chances.get(item.id)
    query = request.GET.copy()
    query.pop("before", None)
    context = {
        "form": form,
        "inputs": inputs,
        "taxonomy": filters["taxonomy"],
        "first_page": query.urlencode(),
        "next_page": _with(query, before=inputs[-1].id) if more else None,
        "paged": filters["before"] is not None,
    }
    return render(request, "inputs/list.html", context)


def _with(query, **params) -> str:
    query = query.copy()
    for name, value in params.items():
        query[name] = value
    return query.urlencode()


# --- the playground -------------------------------------------------------------------------


@curator_required
@require_GET
def playground(request: HttpRequest) -> HttpResponse:
    # Results on the page itself once a text was sent: the form works without JavaScript too.
    if "text" in request.GET:
        form = PlaygroundForm.from_query(request.GET)
        results, status = _playground_results(form)
    else:
        form = PlaygroundForm(initial=request.GET.dict())
        results, status = {}, 200
    context = {"form": form, **results}
    return render(request, "inputs/playground.html", context, status=status)


@curator_required
@require_GET
def playground_results(request: HttpRequest) -> HttpResponse:
    results, status = _playground_results(PlaygroundForm.from_query(request.GET))
    return render(request, "inputs/_playground_results.html", results, status=status)


def _unavailable(exc: Exception) -> tuple[str, int]:
    """What a page says when serving cannot answer: no live model yet (409), or its files
    cannot be loaded (503)."""
    if isinstance(exc, NoLiveModel):
        return f"taxonomy: {exc}", 409
    return f"taxonomy: the live model cannot be loaded ({exc})", 503


def _playground_results(form: PlaygroundForm) -> tuple[dict, int]:
    """Normalize the typed text without storing anything."""
    if not form.is_valid():
        if set(form.errors) == {"text"} and not str(form.data.get("text", "")).strip():
            # The box was cleared: nothing is wrong, there is just nothing to match yet.
            return {"prompt": True}, 200
        return {"error": form.errors_text()}, 400
    taxonomy, text = form.cleaned_data["taxonomy"], form.cleaned_data["text"]
    try:
        (result,) = rank_taxonomy_groups(taxonomy, [text], k=form.cleaned_data["k"])
    except SERVING_UNAVAILABLE as exc:
        error, status = _unavailable(exc)
        return {"error": error}, status
    return {"result": result, "taxonomy": taxonomy}, 200


@curator_required
@require_POST
def playground_send(request: HttpRequest) -> HttpResponse:
    """Store the text as an input and queue it for review: the one write of the playground."""
    form = PlaygroundSendForm(request.POST)
    context, status = {}, 200
    if not form.is_valid():
        context["send_error"], status = form.errors_text(), 400
    else:
        taxonomy = form.cleaned_data["taxonomy"]
        try:
            context["sent"] = input_send_to_review(
                taxonomy=taxonomy, text=form.cleaned_data["text"], user=request.user
            )
            context["taxonomy"] = taxonomy
        except SERVING_UNAVAILABLE as exc:
            context["send_error"], status = _unavailable(exc)
            if isinstance(exc, NoLiveModel):
                context["send_error"] += "; nothing was stored"
        except ReviewQueueFull as exc:
            context["send_error"], status = f"text: {exc}", 409
    if request.htmx:
        return render(request, "inputs/_playground_sent.html", context, status=status)
    page = PlaygroundForm.from_query(request.POST)
    results, _ = _playground_results(page)
    return render(
        request, "inputs/playground.html", {"form": page, **results, **context}, status=status
    )


@curator_required
@require_GET
def input_detail(request: HttpRequest, input_id: int) -> HttpResponse:
    return _input_page(request, input_id)


def _input_page(request, input_id: int, *, error: str | None = None, status: int = 200):
    history = input_history(input_id=input_id)
    if history is None:
        raise Http404(f"no input {input_id}")
    ranking_note = ""
    if history.item is not None:
        # An open answer as the live model and ranker give it now, as the card shows it.
        _, ranking_note = review_item_rerank(history.item, user=request.user)
    latest = history.latest
    context = {
        "history": history,
        "ranking_note": ranking_note,
        "double_review_share": f"{round(100 / max(settings.SIAMWEB_DOUBLE_REVIEW_PERCENT, 1))}",
        "error": error,
        "can_reopen": latest is not None
        and (latest.user_id == request.user.id or request.user.is_staff),
    }
    return render(request, "inputs/detail.html", context, status=status)


@curator_required
@require_POST
def input_correct(request: HttpRequest, input_id: int) -> HttpResponse:
    """Take an answer the product coded by itself into review, held for this curator."""
    item = ReviewItem.objects.filter(input_id=input_id).only("id").first()
    if item is None:
        raise Http404(f"no review item for input {input_id}")
    try:
        reopened = auto_coded_reopen(item_id=item.id, user=request.user)
    except AutoCodingError as exc:
        return _input_page(request, input_id, error=f"{exc}: nothing changed", status=409)
    messages.info(request, f"The product's answer on “{reopened.input.text}” is yours to judge.")
    return redirect("review")


@curator_required
@require_POST
def input_reopen(request: HttpRequest, input_id: int) -> HttpResponse:
    """Take back the verdict the page showed as latest and put the card in front of this
    curator to judge again: a changed verdict is undone (audited) and judged anew, and the new
    one trains like any other. A verdict someone changed meanwhile is a 409 naming them."""
    try:
        judgement_id = parse_id(request.POST.get("judgement", ""))
    except IdError:
        return _input_page(
            request, input_id, error="judgement: which verdict to change?", status=400
        )
    judgement = Judgement.objects.filter(id=judgement_id, review_item__input_id=input_id).first()
    if judgement is None:
        raise Http404(f"no verdict {judgement_id} on input {input_id}")
    try:
        judgement_undo(judgement=judgement, user=request.user)
    except VerdictError as exc:
        return _input_page(request, input_id, error=str(exc), status=exc.status_code)
    text = judgement.review_item.input.text
    messages.info(request, f"The verdict on “{text}” is taken back: judge it again.")
    return redirect("review")
