"""What is live, and changing it: a candidate promoted (by the gate or by an admin against it),
an earlier version rolled back to, and the flip report of a forced promotion.

Model and index are one pointer (``Deployment``): every web and worker process picks both up
on its next request. What follows a change of live model across layers, predicting the open
review items again, is chained by the worker (``worker.tasks.repredict_pending_inputs``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.db import transaction
from django.utils import timezone

from annotations.models import Taxonomy
from annotations.services.audit import audit_record
from models_app.models import Deployment, IndexBuild, ModelVersion, TrainingRun
from models_app.siamese.progress import Progress
from models_app.training.gate import Comparison
from models_app.training.selectors.runs import training_run_active
from models_app.training.selectors.versions import model_version_was_live
from models_app.training.services.indexes import deployment_activate, index_build_create
from models_app.training.services.run_clock import index_clock
from models_app.training.services.runs import queued_reindex_supersede, training_run_request
from siamweb.task_names import FINISH_PROMOTION


class RunStateError(ValueError):
    """The run or version is not in a state that allows what was asked."""


def live_version(taxonomy: Taxonomy) -> ModelVersion | None:
    deployment = (
        Deployment.objects.filter(taxonomy=taxonomy)
        .select_related("index_build__model_version__taxonomy")
        .first()
    )
    return deployment.index_build.model_version if deployment else None


def live_build(taxonomy: Taxonomy) -> IndexBuild | None:
    deployment = Deployment.objects.filter(taxonomy=taxonomy).select_related("index_build").first()
    return deployment.index_build if deployment else None


def refuse_while_a_run_is_active(taxonomy: Taxonomy, action: str) -> None:
    """An admin's change of the live model waits for the taxonomy's active run: a fine-tune
    gates its candidate against the live pair and goes live in its place, and a reindex or a
    rollback ends by making its own build live; either would measure or undo the wrong thing.

    A reindex still waiting in the queue gives its slot up instead (``queued_reindex_supersede``,
    as to a fine-tune): it has read nothing yet. A reindex a worker claimed first is running,
    and the change waits for it. Call inside the change's transaction.
    """
    queued_reindex_supersede(
        taxonomy=taxonomy,
        why=f"superseded: an admin's change of the live model ({action}) went first",
    )
    active = training_run_active(taxonomy=taxonomy)
    if active is not None:
        raise RunStateError(
            f"{taxonomy.slug} has run #{active.id} active ({active.kind}, "
            f"{active.get_status_display().lower()}): {action} once it ends, since the run "
            "may compare its work with the live model or make its own live"
        )


def refuse_never_live(model_version: ModelVersion) -> None:
    """An admin's switch to a version is refused when it never served: a candidate its gate
    did not promote goes live by its run's promotion (its flip report and what follows it), and
    a build that stopped before going live was never measured."""
    if not model_version_was_live(model_version):
        raise RunStateError(
            f"{model_version.label} was never live (a candidate its gate did not promote, or a "
            "build that stopped before it went live); a rejected candidate goes live by "
            "promoting its run"
        )


def model_version_activate(*, model_version: ModelVersion, actor) -> IndexBuild:
    """An admin makes ``model_version`` live with its newest index build, at once; asked for
    the pair already live, nothing changes and nothing is recorded; ``refuse_never_live``."""
    builds = IndexBuild.objects.filter(model_version=model_version)
    build = builds.order_by("-created_at", "-id").first()
    if build is None:
        raise RunStateError(
            f"{model_version.label} has no index build; build one before making it live"
        )
    if live_build(model_version.taxonomy) == build:
        return build
    refuse_never_live(model_version)
    with transaction.atomic():
        refuse_while_a_run_is_active(model_version.taxonomy, f"make {model_version.label} live")
        deployment_activate(index_build=build, actor=actor)
    return build


def go_live(*, build: IndexBuild, actor) -> None:
    # Model and index are one pointer: every web and worker process picks both up on its next
    # request (models_app.serving.engines compares the deployment it loaded with the current one).
    deployment_activate(index_build=build, actor=actor)


def model_version_rollback(*, model_version: ModelVersion, actor) -> TrainingRun | None:
    """Queue making ``model_version`` live again, with an index rebuilt over today's members
    (model and index swap together at the end). None when the taxonomy already has a run."""
    if live_version(model_version.taxonomy) == model_version:
        raise RunStateError(f"{model_version.label} is already live")
    refuse_never_live(model_version)
    with transaction.atomic():
        # A rollback indexes every member too: a reindex still waiting gives its slot up.
        queued_reindex_supersede(
            taxonomy=model_version.taxonomy,
            why="superseded by a rollback, which indexes every member",
        )
        run = training_run_request(
            taxonomy=model_version.taxonomy,
            kind=TrainingRun.Kind.ROLLBACK,
            trigger=TrainingRun.Trigger.MANUAL,
            model_version=model_version,
            requested_by=actor,
        )
        if run is None:  # something else holds the slot: the reindex keeps its place
            transaction.set_rollback(True)
        else:
            audit_record(
                actor=actor,
                action="model_version.rollback",
                obj=model_version,
                taxonomy=model_version.taxonomy,
                after={"model_version": model_version.id, "run": run.id},
            )
    return run


def rollback_execute(*, run: TrainingRun, progress: Progress) -> dict[str, Any]:
    target = run.model_version
    if target is None:
        raise RunStateError("a rollback run needs the version to restore")
    clock = index_clock(run=run, model_version=target, progress=progress)
    build = index_build_create(
        model_version=target, progress=clock.stages({"encode": "encode", "index": "index"})
    )
    clock.done("index")
    # Recorded as the switch the admin asked for: the trail's next "before" is explained.
    go_live(build=build, actor=run.requested_by)
    return {
        "status": TrainingRun.Status.SUCCEEDED,
        "index_build": build,
        "eta_report": clock.took_report(),
    }


def run_moved_live_model(run: TrainingRun) -> bool:
    """Whether the run ended by putting another model live: the pending inputs' predictions
    are then out of date, and the worker predicts them again (``repredict_pending_inputs``)."""
    return run.status == TrainingRun.Status.PROMOTED or (
        run.kind == TrainingRun.Kind.ROLLBACK and run.status == TrainingRun.Status.SUCCEEDED
    )


def training_run_promote(*, run: TrainingRun, actor) -> TrainingRun:
    """An admin promotes a candidate the gate rejected: it goes live with its index at once.

    The flip report against the version it replaces and the new predictions of pending inputs
    follow in a worker (``promotion_finish``): on a big taxonomy they take longer than a web
    request should. Until then the run's flip report says it is pending.
    """
    with transaction.atomic():
        run = TrainingRun.objects.select_for_update().get(id=run.id)
        if run.kind != TrainingRun.Kind.FINETUNE or run.status != TrainingRun.Status.REJECTED:
            raise RunStateError(
                f"run {run.id} is a {run.kind} run that is {run.status}; only a rejected "
                "fine-tune can be promoted"
            )
        if run.index_build is None or run.model_version is None:
            raise RunStateError(f"run {run.id} has no candidate to promote")
        refuse_while_a_run_is_active(run.taxonomy, f"promote run #{run.id}")
        replaced = live_version(run.taxonomy)
        report = {
            **run.gate_report,
            "forced_by": actor.username,
            "replaced_version": replaced.id if replaced else None,
        }
        go_live(build=run.index_build, actor=actor)
        TrainingRun.objects.filter(id=run.id).update(
            status=TrainingRun.Status.PROMOTED,
            gate_report=report,
            flip_report={"pending": True, "requested_at": timezone.now().isoformat()},
        )
        audit_record(
            actor=actor,
            action="training_run.promote",
            obj=run,
            taxonomy=run.taxonomy,
            before={"status": "rejected", "live": replaced.id if replaced else None},
            after={"status": "promoted", "live": run.model_version_id},
        )
        run_id = run.id
        # robust: the promotion stands whatever the broker does; the report can be made later.
        transaction.on_commit(
            lambda: current_app.send_task(FINISH_PROMOTION, args=[run_id]), robust=True
        )
    run.refresh_from_db()
    return run


def promotions_resend_pending(*, older_than_seconds: int) -> int:
    """Send ``finish_promotion`` again for forced promotions whose report is still pending
    long after it was asked for (the message was lost, or the task gave up)."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    stale = [
        run_id
        for run_id, report in TrainingRun.objects.filter(
            status=TrainingRun.Status.PROMOTED, flip_report__pending=True
        ).values_list("id", "flip_report")
        if datetime.fromisoformat(report.get("requested_at", cutoff.isoformat())) <= cutoff
    ]
    for run_id in stale:
        current_app.send_task(FINISH_PROMOTION, args=[run_id])
    return len(stale)


def promotion_finish(*, run_id: int) -> TrainingRun:
    """After a forced promotion: the flip report (the worker then predicts pending inputs
    again). Safe to run twice: a report that is not pending any more is left as it is."""
    run = TrainingRun.objects.select_related("taxonomy", "model_version").get(id=run_id)
    if run.status != TrainingRun.Status.PROMOTED or not run.flip_report.get("pending"):
        return run
    replaced = ModelVersion.objects.filter(id=run.gate_report.get("replaced_version")).first()
    flips = (
        Comparison.of_versions(run.taxonomy, replaced, run.model_version).flips()
        if replaced is not None
        else {}
    )
    TrainingRun.objects.filter(id=run.id).update(flip_report=flips)
    run.refresh_from_db()
    return run
