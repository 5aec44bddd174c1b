"""The Models pages: which version is live, every version, the training runs and their reports.

Curators and admins read; only admins start a fine-tune, roll back, force a promotion or retry a
failed run. Views are thin: a selector reads, a service from ``models_app.training.retraining`` or
``models_app.training.promotion`` writes (and records the audit event). A refusal about the state of
things — a run already active, a run in the wrong state — is the page again with status 409 and
the service's message.

While a run is active its region asks for itself again every two seconds (htmx polling); the
answer once nothing is active carries no trigger, so the polling stops by itself.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotations.models import Taxonomy
from models_app.models import ModelVersion, TrainingRun
from models_app.serving.auto_coding_audits import auto_coding_policy_set, auto_coding_weeks
from models_app.serving.engines import NoLiveModel
from models_app.training.charts import line_chart_svg
from models_app.training.promotion import (
    RunStateError,
    model_version_rollback,
    training_run_promote,
)
from models_app.training.retraining import (
    PRETRAINED_LEARNS_BY_RANKER,
    finetune_now_request,
    is_pretrained_as_it_comes,
    training_run_cancel,
    training_run_retry,
)
from models_app.training.selectors.charts import (
    run_training_chart,
    run_validations,
    taxonomy_history_chart,
)
from models_app.training.selectors.reports import flip_report_of, gate_report_of, suite_rows
from models_app.training.selectors.runs import (
    RunRow,
    active_run_refusal,
    run_is_active,
    run_retried_as,
    training_run_get,
    training_runs_recent,
)
from models_app.training.selectors.versions import (
    live_ranker_get,
    live_version_get,
    model_version_get,
    model_versions_page,
    pretrained_tower_get,
    taxonomies_for_models,
    version_measured,
)
from siamweb.web.decorators import admin_required, curator_required, is_admin

CONFLICT = 409


def _taxonomy_from(request: HttpRequest, taxonomies: list[Taxonomy]) -> Taxonomy | None:
    """``?taxonomy=<slug>``, else the first taxonomy; 404 for an unknown slug."""
    slug = request.GET.get("taxonomy")
    if not slug:
        return taxonomies[0] if taxonomies else None
    for taxonomy in taxonomies:
        if taxonomy.slug == slug:
            return taxonomy
    raise Http404(f"no taxonomy {slug!r}")


def _runs_context(taxonomy: Taxonomy) -> dict:
    runs = training_runs_recent(taxonomy=taxonomy)
    # The newest runs hold the active one if there is any (one at a time, and it is the newest).
    active = next((row.run for row in runs if row.active), None)
    return {"runs": runs, "polling": active is not None, "active_run": active}


def _overview(
    request: HttpRequest,
    taxonomy: Taxonomy | None,
    *,
    taxonomies: list[Taxonomy] | None = None,
    status: int = 200,
    error: str = "",
) -> HttpResponse:
    taxonomies = taxonomies if taxonomies is not None else taxonomies_for_models()
    context: dict = {
        "taxonomies": taxonomies,
        "taxonomy": taxonomy,
        "error": error,
        "pretrained_tower": pretrained_tower_get(),
    }
    if taxonomy is not None:
        live = live_version_get(taxonomy=taxonomy)
        context.update(
            live=live,
            ranker=live_ranker_get(taxonomy=taxonomy),
            pretrained_note=(
                f"{live.label} "
                + PRETRAINED_LEARNS_BY_RANKER.format(refit=settings.SIAMWEB_RANKER_REFIT_VERDICTS)
                if live and is_pretrained_as_it_comes(live)
                else ""
            ),
            live_suite=suite_rows(live) if live else [],
            live_measured=version_measured(live) if live else (None, {}, ""),
            history_chart=line_chart_svg(taxonomy_history_chart(taxonomy=taxonomy)),
            # Audits over time, once the taxonomy has an auto-coding policy.
            audit_weeks=auto_coding_weeks(taxonomy) if auto_coding_policy_set(taxonomy) else [],
            versions=model_versions_page(
                taxonomy=taxonomy, live=live, page=request.GET.get("page")
            ),
            **_runs_context(taxonomy),
        )
    return render(request, "models/overview.html", context, status=status)


@curator_required
@require_GET
def models_overview(request: HttpRequest) -> HttpResponse:
    taxonomies = taxonomies_for_models()
    taxonomy = _taxonomy_from(request, taxonomies)
    if request.htmx and taxonomy is not None:
        # The runs region polling for itself.
        context = {"taxonomy": taxonomy, **_runs_context(taxonomy)}
        response = render(request, "models/_runs.html", context)
        if not context["polling"]:
            # The run it was watching has finished: the live version and the versions table may
            # have changed too, so the whole page is loaded again (once: it will not poll).
            response["HX-Refresh"] = "true"
        return response
    return _overview(request, taxonomy, taxonomies=taxonomies)


def _taxonomy_by_slug(slug: str) -> Taxonomy:
    taxonomy = Taxonomy.objects.filter(slug=slug).first()
    if taxonomy is None:
        raise Http404(f"no taxonomy {slug!r}")
    return taxonomy


def _run_url(run: TrainingRun) -> str:
    return reverse("models-run", kwargs={"run_id": run.id})


@admin_required
@require_POST
def models_finetune(request: HttpRequest, slug: str) -> HttpResponse:
    """Fine-tune the live model on the feedback so far, now (the schedule would do it later)."""
    taxonomy = _taxonomy_by_slug(slug)
    try:
        run = finetune_now_request(taxonomy=taxonomy, requested_by=request.user)
    except (NoLiveModel, RunStateError) as exc:
        return _overview(request, taxonomy, status=CONFLICT, error=str(exc))
    if run is None:
        return _overview(
            request, taxonomy, status=CONFLICT, error=active_run_refusal(taxonomy=taxonomy)
        )
    messages.info(request, f"Fine-tune of {taxonomy.slug} queued as run #{run.id}.")
    return redirect(_run_url(run))


def _version(version_id: int) -> ModelVersion:
    version = model_version_get(version_id=version_id)
    if version is None:
        raise Http404(f"no model version {version_id}")
    return version


def _confirm(request: HttpRequest, context: dict, *, status: int = 200) -> HttpResponse:
    return render(request, "models/confirm.html", context, status=status)


@admin_required
@require_http_methods(["GET", "POST"])
def models_version_rollback(request: HttpRequest, version_id: int) -> HttpResponse:
    """GET: ask to confirm; POST: queue a run that makes this version live again."""
    version = _version(version_id)
    live = live_version_get(taxonomy=version.taxonomy)
    context = {
        "title": f"Roll {version.taxonomy.slug} back to {version.label}?",
        "explanation": (
            f"A rollback run rebuilds the index of {version.label} over today's strings and makes "
            f"it live in place of {live.label if live else 'no live version'}. Nothing is deleted: "
            "you can roll forward again the same way."
        ),
        "action": reverse("models-version-rollback", kwargs={"version_id": version.id}),
        "button": f"Roll back to {version.label}",
        "cancel": f"{reverse('models')}?taxonomy={version.taxonomy.slug}",
        "testid": "confirm-rollback",
    }
    if request.method == "GET":
        if live == version:  # a stale page's link: there is nothing to confirm
            context.update(
                title=f"{version.label} is live",
                explanation=f"{version.label} is the live version of {version.taxonomy.slug}: "
                "there is nothing to roll back to.",
                button=None,
            )
        return _confirm(request, context)
    try:
        run = model_version_rollback(model_version=version, actor=request.user)
    except RunStateError as exc:
        return _confirm(request, {**context, "error": str(exc)}, status=CONFLICT)
    if run is None:
        error = active_run_refusal(taxonomy=version.taxonomy)
        return _confirm(request, {**context, "error": error}, status=CONFLICT)
    messages.info(request, f"Rollback to {version.label} queued as run #{run.id}.")
    return redirect(_run_url(run))


# --- one run --------------------------------------------------------------------------------


def _run(run_id: int) -> TrainingRun:
    run = training_run_get(run_id=run_id)
    if run is None:
        raise Http404(f"no training run {run_id}")
    return run


def _chart_or_empty(chart):
    return line_chart_svg(chart) if chart is not None else ""


def _run_page(
    request: HttpRequest, run: TrainingRun, *, status: int = 200, error: str = ""
) -> HttpResponse:
    admin = is_admin(request.user)
    context = {
        "run": run,
        "row": RunRow(run),
        "polling": run_is_active(run),
        "gate": gate_report_of(run),
        "training_chart": _chart_or_empty(run_training_chart(run)),
        "validations": run_validations(run),
        "flip": flip_report_of(run),
        "can_promote": admin
        and run.kind == TrainingRun.Kind.FINETUNE
        and run.status == TrainingRun.Status.REJECTED
        and run.index_build_id is not None,
        "can_retry": admin
        and run.status == TrainingRun.Status.FAILED
        and run_retried_as(run) is None,
        "can_cancel": admin and run_is_active(run) and run.cancel_requested_at is None,
        "error": error,
    }
    template = "models/_run_panel.html" if request.htmx else "models/run.html"
    return render(request, template, context, status=status)


@curator_required
@require_GET
def models_run(request: HttpRequest, run_id: int) -> HttpResponse:
    return _run_page(request, _run(run_id))


@admin_required
@require_http_methods(["GET", "POST"])
def models_run_promote(request: HttpRequest, run_id: int) -> HttpResponse:
    """GET: ask to confirm; POST: make a candidate the gate rejected live anyway."""
    run = _run(run_id)
    candidate = run.model_version.label if run.model_version else "the candidate"
    context = {
        "title": f"Promote {candidate} although the gate rejected it?",
        "explanation": (
            f"{candidate} goes live with its index, pending inputs are predicted again with it, "
            "and the gate report records that you overrode it."
        ),
        "reasons": (run.gate_report or {}).get("reasons", []),
        "action": reverse("models-run-promote", kwargs={"run_id": run.id}),
        "button": f"Promote {candidate}",
        "cancel": _run_url(run),
        "testid": "confirm-promote",
    }
    if request.method == "GET":
        return _confirm(request, context)
    try:
        run = training_run_promote(run=run, actor=request.user)
    except RunStateError as exc:
        return _run_page(request, _run(run_id), status=CONFLICT, error=str(exc))
    messages.info(request, f"{candidate} is live: promoted over the gate's rejection.")
    return redirect(_run_url(run))


@admin_required
@require_POST
def models_run_retry(request: HttpRequest, run_id: int) -> HttpResponse:
    """Queue a failed run again; it resumes from the failed run's checkpoints."""
    run = _run(run_id)
    try:
        retry = training_run_retry(run=run, actor=request.user)
    except RunStateError as exc:
        return _run_page(request, run, status=CONFLICT, error=str(exc))
    if retry is None:
        return _run_page(
            request, run, status=CONFLICT, error=active_run_refusal(taxonomy=run.taxonomy)
        )
    messages.info(request, f"Run #{run.id} queued again as run #{retry.id}.")
    return redirect(_run_url(retry))


@admin_required
@require_POST
def models_run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    """Stop a queued run at once, a running one at its next progress report."""
    run = _run(run_id)
    try:
        run = training_run_cancel(run=run, actor=request.user)
    except RunStateError as exc:
        return _run_page(request, run, status=CONFLICT, error=str(exc))
    if run.status == TrainingRun.Status.CANCELLED:
        messages.info(request, f"Run #{run.id} cancelled.")
    else:
        messages.info(
            request,
            f"Run #{run.id} stops at its next progress report; the live model keeps serving.",
        )
    return redirect(_run_url(run))
