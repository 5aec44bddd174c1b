"""Training runs: requested (one active a taxonomy), carried out by a worker with progress and
a heartbeat, failed cleanly whatever goes wrong, and the first runs of a new taxonomy."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, InterfaceError, OperationalError, transaction
from django.db import connection as db_connection
from django.db.models import F, Q, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from annotations.models import Member, Taxonomy
from annotations.signals import QueuedRun, TaxonomyCannotServe
from models_app.models import Deployment, ModelVersion, TrainingRun
from models_app.serving.engines import NoLiveModel, artifact_path, encoder_for
from models_app.serving.groups import description_vectors_drop
from models_app.siamese.progress import Progress
from models_app.siamese.specs import (
    PRETRAINED_SPEC,
    STUDENT_SPEC,
    TOWER_SPEC,
    parse_search_config,
)
from models_app.siamese.tfidf import CharNgramTfidfEncoder
from models_app.training.services.builds import (
    SUITE_SIZE,
    encoder_like_fit,
    fit_plan,
    model_version_evaluate,
    model_version_fit,
    student_text_count,
    suite_seconds,
    suite_verdicts,
)
from models_app.training.services.indexes import (
    deployment_activate,
    index_build_create,
    index_work,
)
from models_app.training.services.run_clock import (
    INDEX_SAMPLE,
    RunClock,
    encode_rates,
    index_clock,
    index_rates,
    last_factors,
    member_texts,
    rate_sample,
)
from siamweb.task_names import EXECUTE_TRAINING_RUN, FAST_QUEUE, TRAINING_QUEUE

logger = logging.getLogger(__name__)


def training_run_request(
    *,
    taxonomy: Taxonomy,
    kind: str,
    trigger: str = TrainingRun.Trigger.MANUAL,
    config: dict[str, Any] | None = None,
    activate: bool = True,
    parent_version: ModelVersion | None = None,
    model_version: ModelVersion | None = None,
    retry_of: TrainingRun | None = None,
    requested_by=None,
    enqueue: bool = True,
) -> TrainingRun | None:
    """Queue a run and, after commit, its task; None when the taxonomy has an active run.

    With ``enqueue=False`` the caller runs it in-process with ``training_run_execute``.
    """
    try:
        with transaction.atomic():
            run = TrainingRun.objects.create(
                taxonomy=taxonomy,
                kind=kind,
                trigger=trigger,
                config=config or {},
                activate=activate,
                parent_version=parent_version,
                model_version=model_version,
                retry_of=retry_of,
                requested_by=requested_by,
            )
    except IntegrityError:
        return None
    if enqueue:
        # robust: the verdict that asked for this run is committed whatever the broker does; a
        # run whose message never left is sent again by the scheduled check.
        transaction.on_commit(lambda: training_run_enqueue(run_id=run.id), robust=True)
    return run


def queued_reindex_supersede(*, taxonomy: Taxonomy, why: str) -> list[int]:
    """Give up the taxonomy's reindex still waiting in the queue (``superseded``, ``why`` as its
    error): what goes instead indexes every member, or beat's check queues a reindex of what is
    live then; until either, the live engine scores members added since its index on the fly.
    A reindex a worker has claimed is running and stays. The ids given up; inside the caller's
    transaction, undone with it."""
    waiting = list(
        TrainingRun.objects.select_for_update()
        .filter(taxonomy=taxonomy, kind=TrainingRun.Kind.REINDEX, status=TrainingRun.Status.QUEUED)
        .values_list("id", flat=True)
    )
    TrainingRun.objects.filter(id__in=waiting).update(
        status=TrainingRun.Status.SUPERSEDED, finished_at=timezone.now(), error=why
    )
    return waiting


def taxonomy_model_refresh(*, taxonomy: Taxonomy, requested_by=None) -> TrainingRun | None:
    """After an import: reindex the live model over the new members, or, for a taxonomy with
    no live model yet, serve it with the pretrained tower as it comes (no training: minutes at
    most, for the encoding of every member); its first training follows once that is live
    (``first_training_request``). None when a run is already active."""
    has_live_model = Deployment.objects.filter(taxonomy=taxonomy).exists()
    return training_run_request(
        taxonomy=taxonomy,
        kind=TrainingRun.Kind.REINDEX if has_live_model else TrainingRun.Kind.BUILD,
        trigger=TrainingRun.Trigger.IMPORT,
        config=None if has_live_model else PRETRAINED_SPEC,
        requested_by=requested_by,
    )


def taxonomy_imported_serve(
    sender, *, taxonomy: Taxonomy, requested_by=None, **kwargs
) -> QueuedRun | None:
    """The receiver of curation's ``taxonomy_imported`` (connected in models_app/apps.py): the
    run that makes an imported taxonomy serve its members, as ``taxonomy_model_refresh``.
    ``TaxonomyCannotServe`` for a taxonomy with no live model whose strings are in fewer than
    two groups: a build tells groups apart, and would fail however often it was retried (a
    live model is reindexed over whatever groups there are)."""
    if not Deployment.objects.filter(taxonomy=taxonomy).exists():
        groups = Member.objects.filter(taxonomy=taxonomy).values("group_id").distinct().count()
        if groups < 2:
            raise TaxonomyCannotServe(
                f"{taxonomy.slug} cannot serve yet: its strings are in {groups} group"
                f"{'' if groups == 1 else 's'}, and a model needs at least two to tell apart; "
                "import it again from a file that holds strings of two groups or more"
            )
    run = taxonomy_model_refresh(taxonomy=taxonomy, requested_by=requested_by)
    if run is None:
        return None
    return QueuedRun(id=run.id, reindex=run.kind == TrainingRun.Kind.REINDEX)


def taxonomy_has_trained_version(taxonomy: Taxonomy) -> bool:
    """Whether any version of the taxonomy was trained on it (not a pretrained one as is)."""
    versions = ModelVersion.objects.filter(taxonomy=taxonomy)
    return versions.exclude(config__training__max_steps=0).exists()


def first_training_request(*, run: TrainingRun) -> TrainingRun | None:
    """A new taxonomy's first models, one after the other: once the pretrained tower is live,
    the tower trained on the taxonomy's strings; once that is live, the fast student distilled
    from it, which then serves. None when nothing is to be done."""
    following = {"pretrained": TOWER_SPEC, "tower": STUDENT_SPEC}
    stages = {"pretrained": PRETRAINED_SPEC, "tower": TOWER_SPEC}
    stage = next((name for name, spec in stages.items() if run.config == spec), None)
    if (
        not settings.SIAMWEB_TRAIN_NEW_TAXONOMIES
        or run.kind != TrainingRun.Kind.BUILD
        or run.status != TrainingRun.Status.SUCCEEDED
        or stage is None
        or (stage == "pretrained" and taxonomy_has_trained_version(run.taxonomy))
    ):
        return None
    return training_run_request(
        taxonomy=run.taxonomy,
        kind=TrainingRun.Kind.BUILD,
        trigger=TrainingRun.Trigger.IMPORT,
        config=following[stage],
        requested_by=run.requested_by,
    )


def training_run_queue(*, kind: str, config: dict | None) -> str:
    """The queue a run goes to: one that only encodes (a reindex, a rollback, the pretrained
    tower as it comes) is fast work, which a fine-tune in progress must not hold up; a run that
    trains goes to the training queue."""
    encodes_only = kind in (TrainingRun.Kind.REINDEX, TrainingRun.Kind.ROLLBACK) or (
        kind == TrainingRun.Kind.BUILD and config == PRETRAINED_SPEC
    )
    return FAST_QUEUE if encodes_only else TRAINING_QUEUE


def training_run_enqueue(*, run_id: int) -> None:
    found = TrainingRun.objects.filter(id=run_id).values_list("kind", "config").first()
    if found is None:
        return
    # By name, so the services do not import the worker layer that calls them.
    current_app.send_task(
        EXECUTE_TRAINING_RUN,
        args=[run_id],
        queue=training_run_queue(kind=found[0], config=found[1]),
    )


def training_runs_resend_queued(*, older_than_seconds: int) -> int:
    """Send again runs queued long ago whose message was lost; claiming makes this safe."""
    cutoff = timezone.now() - timezone.timedelta(seconds=older_than_seconds)
    stale = list(
        TrainingRun.objects.filter(
            status=TrainingRun.Status.QUEUED, created_at__lt=cutoff
        ).values_list("id", flat=True)
    )
    for run_id in stale:
        training_run_enqueue(run_id=run_id)
    return len(stale)


# Where each stage sits on a run's one progress bar. Stages report their own fraction and
# some come twice (a fine-tune trains, measures, trains again); the bar shows the run's share
# done, which only grows: "train 2 %" is never followed by 0 %.
PROGRESS_BANDS = {
    "start": (0.0, 0.02),
    "pairs": (0.0, 0.02),
    "teacher": (0.0, 0.02),
    "train": (0.02, 0.8),
    "distil": (0.02, 0.8),
    "evaluate": (0.02, 0.8),
    # A fine-tune's second training, after its held-out check: the bar moves on from training's.
    "catch up": (0.8, 0.85),
    "encode": (0.8, 0.85),
    "index": (0.85, 0.95),
    "promote": (0.95, 0.97),
    "repredict": (0.97, 1.0),
    "done": (1.0, 1.0),
}


def run_progress_overall(stage: str, fraction: float) -> float:
    """A stage's own fraction as a share of the whole run (an unknown stage keeps its own)."""
    low, high = PROGRESS_BANDS.get(stage, (0.0, 1.0))
    return low + min(max(fraction, 0.0), 1.0) * (high - low)


class RunCancelled(Exception):
    """Raised by a run's progress report once an admin asked the run to stop. Every run changes
    what is live only after its last report, so a run stopped this way changed nothing."""


class RunAbandoned(Exception):
    """Raised by a run's progress report once the run was given up on as silent (marked failed
    by ``training_runs_fail_stale``) while its worker was in fact alive: its retry may already
    be running, so it stops before changing anything, as a cancelled run does."""


# The statuses of a run a worker is carrying out: only such a run's reports are written.
RUN_IN_PROGRESS = (TrainingRun.Status.RUNNING, TrainingRun.Status.EVALUATED)


def training_run_progress_writer(*, run_id: int) -> Progress:
    """The progress callback a run's work reports to: the stage, its time left and the run's
    share done, which never goes down (a later stage starting at 0 % keeps the bar where it
    was; a stage met again, as training is after the held-out check, catches up before it moves
    the bar). Each call is also the run's heartbeat, and where a cancel takes effect, or the
    stop of a run given up on as silent (``RunAbandoned``)."""

    def progress(stage: str, fraction: float, eta: float | None = None) -> None:
        runs = TrainingRun.objects.filter(id=run_id)
        # One statement a report: a run asked to stop, or no longer in progress, is not
        # written, and only then read.
        written = runs.filter(cancel_requested_at__isnull=True, status__in=RUN_IN_PROGRESS).update(
            stage=stage,
            progress=Greatest(F("progress"), Value(run_progress_overall(stage, fraction))),
            eta_seconds=eta,
            heartbeat_at=timezone.now(),
        )
        if written:
            return
        if runs.filter(cancel_requested_at__isnull=False).exists():
            raise RunCancelled(f"cancelled by an admin during {stage!r}")
        if runs.exclude(status__in=RUN_IN_PROGRESS).exists():
            raise RunAbandoned(f"given up on as silent before {stage!r}")

    return progress


def run_mark_failed(*, run_id: int, error: str, stopped: bool) -> None:
    """Mark a run FAILED, on a fresh connection where the old one may be mid-query.

    A soft time limit is a signal: it can land while psycopg waits for a reply, leaving the
    connection with a command in flight ("another command is already in progress"), so the
    failure would never be written and the run would stay RUNNING until the heartbeat check.
    Inside a transaction (a test's) the connection cannot be replaced, so it is kept.
    """
    replaceable = not db_connection.in_atomic_block
    if stopped and replaceable:
        db_connection.close()
    try:
        _run_write_failed(run_id=run_id, error=error)
    except (OperationalError, InterfaceError):
        if not replaceable:
            raise
        # Any other error may also have broken the connection; one fresh try, then the task's
        # retry (or the heartbeat check) takes over.
        db_connection.close()
        _run_write_failed(run_id=run_id, error=error)


def _run_write_failed(*, run_id: int, error: str) -> None:
    # A run given up on as silent keeps the reason it was marked failed with.
    TrainingRun.objects.filter(id=run_id, status__in=RUN_IN_PROGRESS).update(
        status=TrainingRun.Status.FAILED, error=error, finished_at=timezone.now()
    )


def run_first_attempt(run: TrainingRun) -> TrainingRun:
    """The run a retry chain started with."""
    while run.retry_of_id is not None:
        run = run.retry_of
    return run


def run_checkpoints_drop(run: TrainingRun) -> None:
    """Remove a cancelled run's checkpoints, unless a failed run before it in its retry chain
    shares the folder and may still be retried from them."""
    if run.retry_of_id is None:
        shutil.rmtree(run_checkpoint_dir(run), ignore_errors=True)


def run_version_discard(run: TrainingRun) -> bool:
    """Delete the version a cancelled build or fine-tune made, with its index builds, rows and
    folders: an admin who stops a run gets nothing of it (a tower's weights are tens of MB).
    Never a version that serves, nor what a rollback restores."""
    making = (TrainingRun.Kind.BUILD, TrainingRun.Kind.FINETUNE)
    version = run.model_version if run.kind in making else None
    if version is None or Deployment.objects.filter(index_build__model_version=version).exists():
        return False
    folders = [artifact_path(build.artifact_path) for build in version.index_builds.all()]
    folders.append(artifact_path(version.artifact_path))
    version_id = version.id
    version.delete()
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    description_vectors_drop(taxonomy_slug=run.taxonomy.slug, model_version_id=version_id)
    return True


def run_checkpoint_dir(run: TrainingRun) -> Path:
    """Where a run's training checkpoints go. A retry chain shares the folder of the run it
    started with, so a retry resumes where the failed attempt stopped."""
    return artifact_path(f"{run.taxonomy.slug}/runs/{run_first_attempt(run).id}")


def build_or_reindex(*, run: TrainingRun, progress: Progress) -> dict[str, Any]:
    """A build trains a version, indexes and evaluates it; a reindex indexes the live version
    over today's members. Either reports the time left of every phase still to come
    (``build_clock``, ``run_clock.index_clock``) and keeps what it was worked out from."""
    if run.kind == TrainingRun.Kind.BUILD:
        clock = build_clock(run=run, progress=progress)
        fitting = clock.stages({"teacher": "teacher", "train": "train", "distil": "train"})
        # Its first phase starts now, with the time left of them all: a training prepares its
        # pairs before it reports, and a pretrained tower as it comes reports nothing.
        fitting("teacher" if clock.expected["teacher"] else "train", 0.0, None)
        model_version = model_version_fit(
            taxonomy=run.taxonomy,
            spec=run.config,
            parent=run.parent_version,
            checkpoint_dir=run_checkpoint_dir(run),
            progress=fitting,
        )
        # The run names what it made from now on: a cancel before the end deletes it.
        TrainingRun.objects.filter(id=run.id).update(model_version=model_version)
        clock.done("train")
    else:
        deployment = (
            Deployment.objects.filter(taxonomy=run.taxonomy)
            .select_related("index_build__model_version")
            .first()
        )
        if deployment is None:
            raise NoLiveModel(run.taxonomy)
        model_version = deployment.index_build.model_version
        clock = index_clock(run=run, model_version=model_version, progress=progress)
    build = index_build_create(
        model_version=model_version, progress=clock.stages({"encode": "encode", "index": "index"})
    )
    clock.done("index")
    if run.kind == TrainingRun.Kind.BUILD:
        clock.phase("evaluate")("evaluate", 0.0, None)
        model_version_evaluate(model_version=model_version, index_build=build)
        clock.done("evaluate")
        # The last report before the switch (a reindex's is its index's last): a cancel asked
        # during the evaluation stops here.
        progress("evaluate", 1.0, 0.0)
    if run.activate:
        deployment_activate(index_build=build)
    return {
        "status": TrainingRun.Status.SUCCEEDED,
        "model_version": model_version,
        "index_build": build,
        "eta_report": clock.took_report(),
    }


BUILD_PHASES = ("teacher", "train", "encode", "index", "evaluate")


def build_clock(*, run: TrainingRun, progress: Progress) -> RunClock:
    """A build's phases with the seconds each is expected to take, from rates measured now with
    an encoder like the one it will make (``encoder_like_fit``) on the taxonomy's own titles:
    ``teacher``, a student's teacher (the live model) encoding its texts; ``train``, a trained
    model's time budget until its training says its own time left (a TF-IDF fit reads every
    member as the sample's did, a pretrained tower as it comes loads as the measured one did);
    ``encode``, every member with the new model; ``index``, the index and its search tables
    and the group descriptions (``run_clock.index_rates``); ``evaluate``, the test suite made
    (``suite_seconds``) and its queries encoded and searched over every member. Each times the
    factor the last build of the same spec set (``last_factors``)."""
    taxonomy = run.taxonomy
    plan = fit_plan(run.config, run.parent_version)
    texts = member_texts(taxonomy)
    if not texts:  # nothing to time: the build fails at once, saying why
        return RunClock(progress, dict.fromkeys(BUILD_PHASES, 0.0))
    sample = rate_sample(texts)
    like, made_seconds = encoder_like_fit(
        taxonomy=taxonomy, plan=plan, parent=run.parent_version, texts=sample
    )
    rates = encode_rates(like, None, sample)
    built = index_rates(rate_sample(texts, INDEX_SAMPLE), like.dim, parse_search_config(run.config))
    work = index_work(taxonomy=taxonomy, model_version=None)
    teacher = 0.0
    if plan.distill is not None:
        live = (
            Deployment.objects.filter(taxonomy=taxonomy)
            .select_related("index_build__model_version")
            .first()
        )
        if live is not None:  # without one the build fails at once, saying so
            teacher_rates = encode_rates(encoder_for(live.index_build.model_version), None, sample)
            teacher = student_text_count(taxonomy, plan.distill) * teacher_rates.encode
        train = plan.distill.max_minutes * 60
    elif like.kind == CharNgramTfidfEncoder.kind:
        train = made_seconds / max(len(sample), 1) * work.members
    elif plan.training.max_steps == 0:
        train = made_seconds
    else:
        train = plan.training.max_minutes * 60
    queries = 3 * min(SUITE_SIZE, work.members) + len(suite_verdicts(taxonomy))
    phases = {
        "teacher": teacher,
        "train": train,
        "encode": work.encoded * rates.encode,
        "index": work.members * built.build + work.descriptions * rates.encode,
        "evaluate": suite_seconds(taxonomy)
        + queries * (rates.encode + work.members * built.search),
    }
    return RunClock(
        progress,
        phases,
        rates={
            "encode_seconds_per_text": rates.encode,
            "index_seconds_per_member": built.build,
            "search_seconds_per_query_member": built.search,
        },
        factors=last_factors(kind=run.kind, config=run.config),
    )


def training_runs_fail_stale(*, silent_for_seconds: int) -> int:
    """Mark runs whose worker died failed (and so retriable), freeing the taxonomy's slot.

    A live run writes a heartbeat with its progress; one silent for ``silent_for_seconds`` has
    lost its worker. The live model and index were never touched by it.
    """
    cutoff = timezone.now() - timezone.timedelta(seconds=silent_for_seconds)
    silent = TrainingRun.objects.filter(
        status__in=[TrainingRun.Status.RUNNING, TrainingRun.Status.EVALUATED]
    ).filter(Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff))
    # One an admin had asked to stop is what was asked: cancelled, not failed.
    asked = list(
        silent.filter(cancel_requested_at__isnull=False).select_related("taxonomy", "model_version")
    )
    cancelled = TrainingRun.objects.filter(id__in=[run.id for run in asked]).update(
        status=TrainingRun.Status.CANCELLED,
        error="cancelled by an admin; its worker stopped before it could report it. "
        "The live model kept serving.",
        finished_at=timezone.now(),
    )
    for run in asked:
        run_checkpoints_drop(run)
        run_version_discard(run)
    return cancelled + silent.update(
        status=TrainingRun.Status.FAILED,
        error="the worker stopped before the run finished; the live model kept serving. "
        "Retry the run to resume from its last checkpoint.",
        finished_at=timezone.now(),
    )
