"""Writes for models: fitting versions, building indexes, swapping the live pointer, runs."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from celery import current_app
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import IntegrityError, InterfaceError, OperationalError, transaction
from django.db import connection as db_connection
from django.db.models import F, Max, Q, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from annotations.models import FeedbackPair, GroupRelation, Input, Member, Taxonomy
from annotations.services.audit import audit_record
from models_app.live import NoLiveModel, artifact_path, encoder_for
from models_app.models import Deployment, IndexBuild, ModelVersion, TrainingRun
from models_app.siamese.artifacts import ArtifactError, atomic_directory
from models_app.siamese.baselines import EncoderMatcher
from models_app.siamese.distill import distill_encoder, distillation_texts
from models_app.siamese.encoders import ConfigError, Encoder, load_encoder
from models_app.siamese.evaluation import build_test_suite, evaluate
from models_app.siamese.index import MemberIndex
from models_app.siamese.sampling import FeedbackExample, prepare_data
from models_app.siamese.specs import (
    PRETRAINED_KINDS,
    PRETRAINED_SPEC,
    STUDENT_SPEC,
    TOWER_SPEC,
    TrainConfig,
    parse_distill_config,
    parse_model_spec,
    parse_search_config,
)
from models_app.siamese.text import normalize_text
from models_app.siamese.train import TrainResult, train_encoder

logger = logging.getLogger(__name__)
EXECUTE_TRAINING_RUN = "worker.tasks.execute_training_run"

Progress = Callable[[str, float, float | None], None]  # stage, fraction, seconds left


def _no_progress(stage: str, fraction: float, eta: float | None = None) -> None:
    return None


def _member_rows(taxonomy: Taxonomy) -> list[tuple[int, str]]:
    return list(Member.objects.filter(taxonomy=taxonomy).order_by("id").values_list("id", "text"))


def feedback_examples(
    taxonomy: Taxonomy,
    *,
    until: int,
    after: int = 0,
    keep: Callable[[str], bool] = lambda text: not feedback_is_held_out(text),
) -> list[FeedbackExample]:
    """Curator pairs after pair ``after`` up to pair ``until`` whose text ``keep`` accepts
    (by default: less the held-out fifth kept for testing)."""
    return [
        FeedbackExample(text=text, group_id=group_id, label=label, member_text=member)
        for text, member, group_id, label in FeedbackPair.objects.filter(
            taxonomy=taxonomy, group__isnull=False, id__gt=after, id__lte=until
        )
        .order_by("id")
        .values_list("text_a", "text_b", "group_id", "label")
        if keep(text)
    ]


def held_out_texts(
    taxonomy: Taxonomy, *, after: int = 0, until: int | None = None
) -> frozenset[str]:
    """Normalized judged texts in the held-out fifth, of feedback pairs after pair ``after``
    (up to pair ``until``)."""
    # Pairs with a group: a "none of these" verdict gives nothing to train on or to test.
    pairs = FeedbackPair.objects.filter(taxonomy=taxonomy, id__gt=after, group__isnull=False)
    if until is not None:
        pairs = pairs.filter(id__lte=until)
    texts = pairs.values_list("text_a", flat=True)
    return frozenset(normalize_text(text) for text in texts if feedback_is_held_out(text))


def feedback_last_id(taxonomy: Taxonomy) -> int:
    """The newest feedback pair's id: a run trains up to here, later verdicts wait for the next."""
    return FeedbackPair.objects.filter(taxonomy=taxonomy).aggregate(n=Max("id"))["n"] or 0


@transaction.atomic
def _model_version_create(*, taxonomy: Taxonomy, **fields: Any) -> ModelVersion:
    """The next version number of the taxonomy; its row is locked so two runs never collide."""
    Taxonomy.objects.select_for_update().filter(id=taxonomy.id).first()
    latest = ModelVersion.objects.filter(taxonomy=taxonomy).aggregate(n=Max("number"))["n"]
    return ModelVersion.objects.create(taxonomy=taxonomy, number=(latest or 0) + 1, **fields)


@dataclasses.dataclass(frozen=True)
class EncoderFit:
    """A trained encoder and what it was trained on, before it is stored as a version."""

    result: TrainResult
    members: int
    validation_size: int
    data_sha256: str


def encoder_fit(
    *,
    taxonomy: Taxonomy,
    encoder_config: dict[str, Any],
    training: TrainConfig,
    feedback: list[FeedbackExample],
    parent: Encoder | None = None,
    anchor: Encoder | None = None,
    left_out_members: frozenset[str] = frozenset(),
    checkpoint_dir: Path | None = None,
    discard_stale_checkpoint: bool = False,
    progress: Progress = _no_progress,
) -> EncoderFit:
    """Train an encoder on the taxonomy's members (less curator members whose normalized text
    is in ``left_out_members``) and ``feedback``; with ``parent``, fine-tune its weights (and
    keep ``training.keep_parent_share`` of ``anchor``'s, by default the parent's)."""
    members = [
        (group_id, text)
        for group_id, text, key, source in Member.objects.filter(taxonomy=taxonomy)
        .order_by("id")
        .values_list("group_id", "text", "normalized_text", "source")
        if not (source == Member.Source.CURATOR and key in left_out_members)
    ]
    if not members:
        raise ConfigError(f"taxonomy {taxonomy.slug!r} has no member strings to train on")
    related = GroupRelation.objects.filter(taxonomy=taxonomy).values_list("group_id", "related_id")
    data = prepare_data(members, feedback, config=training, related=list(related))
    result = train_encoder(
        data,
        encoder_config,
        training,
        parent=parent,
        anchor=anchor,
        checkpoint_dir=checkpoint_dir,
        discard_stale_checkpoint=discard_stale_checkpoint,
        progress=progress,
    )
    return EncoderFit(result, len(members), len(data.validation), data.sha256)


def version_config(
    encoder_config: dict[str, Any], training: TrainConfig, spec: dict[str, Any] | None
) -> dict[str, Any]:
    """The spec a version records: its encoder, its training in full, its search."""
    return {
        "encoder": encoder_config,
        "training": dataclasses.asdict(training),
        "search": dataclasses.asdict(parse_search_config(spec)),
    }


def model_version_store(
    *,
    taxonomy: Taxonomy,
    fit: EncoderFit,
    config: dict[str, Any],
    parent: ModelVersion | None,
    feedback_until: int,
    seconds: float | None = None,
    metrics: dict[str, Any] | None = None,
) -> ModelVersion:
    """Save a trained encoder's files and record it as the taxonomy's next version."""
    result = fit.result
    relative = f"{taxonomy.slug}/models/{uuid.uuid4().hex}"
    with atomic_directory(artifact_path(relative)) as folder:
        result.encoder.save(folder)
    return _model_version_create(
        taxonomy=taxonomy,
        encoder_kind=config["encoder"]["kind"],
        config=config,
        artifact_path=relative,
        parent=parent,
        trained_on_members=fit.members,
        feedback_until=feedback_until,
        data_sha256=fit.data_sha256,
        metrics={
            **result.metrics,
            "validation_size": fit.validation_size,
            "train_seconds": round(result.seconds if seconds is None else seconds, 1),
            "device": result.device,
            "stopped_because": result.stopped_because,
            # The training curve (a point an evaluation), for the run's page.
            "history": [
                {key: round(value, 4) for key, value in point.items()} for point in result.history
            ],
            **(metrics or {}),
        },
    )


def model_version_fit(
    *,
    taxonomy: Taxonomy,
    spec: dict[str, Any] | None = None,
    parent: ModelVersion | None = None,
    checkpoint_dir: Path | None = None,
    progress: Progress = _no_progress,
    feedback_until: int | None = None,
) -> ModelVersion:
    """Train an encoder on the taxonomy's members and its curators' feedback; store a version.

    With ``parent`` the parent's weights are fine-tuned (same encoder config required) with the
    taxonomy pairs replayed beside the feedback, so earlier knowledge is kept. Feedback counts up
    to pair ``feedback_until`` (default: all there is now), less the held-out fifth.
    """
    if feedback_until is None:
        feedback_until = feedback_last_id(taxonomy)
    encoder_config, training = parse_model_spec(spec)  # a bad spec fails before any work
    if parent is not None and spec in (None, {}):
        encoder_config, training = parse_model_spec(parent.config)
    distill = parse_distill_config(spec) if parent is None else None
    if distill is not None:
        return _student_fit(
            taxonomy=taxonomy,
            spec=spec,
            encoder_config=encoder_config,
            training=training,
            distill=distill,
            feedback_until=feedback_until,
            progress=progress,
        )
    fit = encoder_fit(
        taxonomy=taxonomy,
        encoder_config=encoder_config,
        training=training,
        feedback=feedback_examples(taxonomy, until=feedback_until),
        # A held-out text's verdict also made it a curator member: that would teach it too.
        left_out_members=held_out_texts(taxonomy),
        parent=encoder_for(parent) if parent is not None else None,
        checkpoint_dir=checkpoint_dir,
        progress=progress,
    )
    return model_version_store(
        taxonomy=taxonomy,
        fit=fit,
        config=version_config(encoder_config, training, spec),
        parent=parent,
        feedback_until=feedback_until,
    )


# The newest inputs a student learns its teacher's vectors of, beside the taxonomy's strings.
STUDENT_INPUTS = 50_000


def _student_fit(
    *, taxonomy, spec, encoder_config, training, distill, feedback_until, progress
) -> ModelVersion:
    """A fast student distilled from the taxonomy's live model (its teacher) on the taxonomy's
    strings, augmented copies of them and the inputs received: learnt without labels."""
    deployment = (
        Deployment.objects.filter(taxonomy=taxonomy)
        .select_related("index_build__model_version")
        .first()
    )
    if deployment is None:
        raise ConfigError(
            f"distillation needs a teacher: taxonomy {taxonomy.slug!r} has no live model"
        )
    teacher_version = deployment.index_build.model_version
    members = list(
        Member.objects.filter(taxonomy=taxonomy).order_by("id").values_list("text", flat=True)
    )
    inputs = list(
        Input.objects.filter(taxonomy=taxonomy)
        .order_by("-id")
        .values_list("text", flat=True)[:STUDENT_INPUTS]
    )
    texts = distillation_texts(members, inputs, copies=distill.augmented_copies, seed=distill.seed)
    result = distill_encoder(
        texts, encoder_for(teacher_version), encoder_config, distill, progress=progress
    )
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()
    config = {
        **version_config(encoder_config, training, spec),
        "distill": {**spec["distill"], "teacher_version": teacher_version.label},
    }
    return model_version_store(
        taxonomy=taxonomy,
        fit=EncoderFit(result, len(members), 0, digest),
        config=config,
        parent=None,
        feedback_until=feedback_until,
        metrics={"distilled_texts": float(len(texts))},
    )


def index_build_create(
    *, model_version: ModelVersion, progress: Progress = _no_progress
) -> IndexBuild:
    """Write a new index folder of every member's ``model_version`` vector.

    When the live index was built with the same model, the members it holds keep the vectors it
    holds (a member's text never changes in place) and only the members added since are
    encoded: the scheduled reindex after a round of verdicts costs a few encodings, not the
    whole taxonomy (about 30 s for 13,000 members with the tower on 2 cores).
    """
    taxonomy = model_version.taxonomy
    rows = _member_rows(taxonomy)
    if not rows:
        raise ConfigError(f"taxonomy {taxonomy.slug!r} has no member strings to index")
    encoder = encoder_for(model_version)
    progress("encode", 0.0, None)
    ids = [member_id for member_id, _ in rows]
    texts = [text for _, text in rows]
    live = (
        Deployment.objects.filter(taxonomy=taxonomy, index_build__model_version=model_version)
        .select_related("index_build")
        .first()
    )
    if live is not None:
        vectors = member_vectors(encoder, live.index_build, ids, texts)
    else:
        vectors = encoder.encode(texts)
    progress("index", 0.5, None)
    index = MemberIndex.build(vectors, ids)
    relative = f"{taxonomy.slug}/indexes/{uuid.uuid4().hex}"
    with atomic_directory(artifact_path(relative)) as folder:
        index.save(folder, extra={"model_version": model_version.number})
    progress("index", 1.0, 0.0)
    return IndexBuild.objects.create(
        taxonomy=taxonomy,
        model_version=model_version,
        artifact_path=relative,
        size=len(index),
        max_member_id=max(ids),
    )


KEEP_INDEX_BUILDS = 3


@transaction.atomic
def deployment_activate(*, index_build: IndexBuild, actor=None) -> Deployment:
    """Make ``index_build`` (and the model version it was built with) live in one update.

    An admin's activation (``actor`` given) goes into the audit trail with what was live before.
    """
    index_dim = MemberIndex.load(artifact_path(index_build.artifact_path)).dim
    encoder_dim = encoder_for(index_build.model_version).dim
    if index_dim != encoder_dim:
        # Served together they would fail on every request; the live pair stays live instead.
        raise ArtifactError(
            f"index build {index_build.id} holds {index_dim}-dimensional vectors but "
            f"{index_build.model_version.label} encodes {encoder_dim}: they cannot serve together"
        )
    before = (
        Deployment.objects.filter(taxonomy=index_build.taxonomy)
        .values_list("index_build__model_version_id", "index_build_id")
        .first()
    )
    deployment, _ = Deployment.objects.update_or_create(
        taxonomy=index_build.taxonomy, defaults={"index_build": index_build}
    )
    if actor is not None:
        audit_record(
            actor=actor,
            action="deployment.activate",
            obj=deployment,
            taxonomy=index_build.taxonomy,
            before={"model_version": before[0], "index_build": before[1]} if before else None,
            after={"model_version": index_build.model_version_id, "index_build": index_build.id},
        )
    index_builds_prune(taxonomy=index_build.taxonomy, keep=KEEP_INDEX_BUILDS)
    return deployment


def index_builds_prune(*, taxonomy: Taxonomy, keep: int) -> int:
    """Delete all but the newest ``keep`` index builds (never the live one), rows and folders.

    Every edit and scheduled check may lead to a reindex; without pruning each leaves a full
    index on disk. Model versions are kept: rolling back to one rebuilds its index.
    """
    live_id = Deployment.objects.filter(taxonomy=taxonomy).values_list("index_build_id", flat=True)
    old = list(
        IndexBuild.objects.filter(taxonomy=taxonomy)
        .exclude(id__in=live_id)
        .order_by("-created_at", "-id")[keep - 1 :]
    )
    for build in old:
        build.delete()
        shutil.rmtree(artifact_path(build.artifact_path), ignore_errors=True)
    return len(old)


def taxonomy_needs_reindex(taxonomy: Taxonomy) -> bool:
    """True when members were added or removed since the live index was built."""
    deployment = Deployment.objects.filter(taxonomy=taxonomy).select_related("index_build").first()
    if deployment is None:
        return False
    build = deployment.index_build
    members = Member.objects.filter(taxonomy=taxonomy)
    return members.filter(id__gt=build.max_member_id).exists() or (
        members.filter(id__lte=build.max_member_id).count() != build.size
    )


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


def training_run_enqueue(*, run_id: int) -> None:
    # By name, so the services do not import the worker layer that calls them.
    current_app.send_task(EXECUTE_TRAINING_RUN, args=[run_id])


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


def training_run_execute(*, run_id: int) -> TrainingRun | None:
    """Claim a queued run and carry it out; a second call for the same run does nothing.

    Whatever goes wrong, the live model and index keep serving: a deployment only moves at the
    very end of a successful run, and a failed run is marked FAILED with its error.
    """
    now = timezone.now()
    claimed = TrainingRun.objects.filter(id=run_id, status=TrainingRun.Status.QUEUED).update(
        status=TrainingRun.Status.RUNNING, started_at=now, heartbeat_at=now, stage="start"
    )
    if claimed != 1:
        logger.info("training run %s is not queued any more; nothing to do", run_id)
        return None
    run = TrainingRun.objects.select_related("taxonomy", "parent_version", "model_version").get(
        id=run_id
    )

    progress = training_run_progress_writer(run_id=run_id)

    try:
        if run.kind in (TrainingRun.Kind.FINETUNE, TrainingRun.Kind.ROLLBACK):
            # Imported here: the retraining and promotion modules build on this one.
            from models_app.promotion import rollback_execute
            from models_app.retraining import finetune_execute

            execute = (
                finetune_execute if run.kind == TrainingRun.Kind.FINETUNE else rollback_execute
            )
            outcome = execute(run=run, progress=progress)
        else:
            outcome = _build_or_reindex(run=run, progress=progress)
    except Exception as exc:
        logger.exception("training run %s failed", run_id)
        if isinstance(exc, SoftTimeLimitExceeded):
            error = (
                "SoftTimeLimitExceeded: stopped by CELERY_TASK_SOFT_TIME_LIMIT "
                f"({settings.CELERY_TASK_SOFT_TIME_LIMIT} s); the live model kept serving"
            )
        else:
            error = f"{type(exc).__name__}: {exc}"
        _run_mark_failed(run_id=run_id, error=error, stopped=isinstance(exc, SoftTimeLimitExceeded))
        run.refresh_from_db()
        return run
    TrainingRun.objects.filter(id=run_id).update(
        stage="done", progress=1.0, eta_seconds=0.0, finished_at=timezone.now(), **outcome
    )
    # A checkpoint (optimizer state included, about half a gigabyte) only serves a retry of a
    # failed run; a finished one needs it no more.
    shutil.rmtree(run_checkpoint_dir(run), ignore_errors=True)
    run.refresh_from_db()
    return run


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


def training_run_progress_writer(*, run_id: int) -> Progress:
    """The progress callback a run's work reports to: the stage, its time left and the run's
    share done, which never goes down (a later stage starting at 0 % keeps the bar where it
    was; a stage met again, as training is after the held-out check, catches up before it moves
    the bar). Each call is also the run's heartbeat."""

    def progress(stage: str, fraction: float, eta: float | None = None) -> None:
        TrainingRun.objects.filter(id=run_id).update(
            stage=stage,
            progress=Greatest(F("progress"), Value(run_progress_overall(stage, fraction))),
            eta_seconds=eta,
            heartbeat_at=timezone.now(),
        )

    return progress


def _run_mark_failed(*, run_id: int, error: str, stopped: bool) -> None:
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
    TrainingRun.objects.filter(id=run_id).update(
        status=TrainingRun.Status.FAILED, error=error, finished_at=timezone.now()
    )


def run_first_attempt(run: TrainingRun) -> TrainingRun:
    """The run a retry chain started with."""
    while run.retry_of_id is not None:
        run = run.retry_of
    return run


def run_checkpoint_dir(run: TrainingRun) -> Path:
    """Where a run's training checkpoints go. A retry chain shares the folder of the run it
    started with, so a retry resumes where the failed attempt stopped."""
    return artifact_path(f"{run.taxonomy.slug}/runs/{run_first_attempt(run).id}")


def _build_or_reindex(*, run: TrainingRun, progress: Progress) -> dict[str, Any]:
    if run.kind == TrainingRun.Kind.BUILD:
        model_version = model_version_fit(
            taxonomy=run.taxonomy,
            spec=run.config,
            parent=run.parent_version,
            checkpoint_dir=run_checkpoint_dir(run),
            progress=progress,
        )
    else:
        deployment = (
            Deployment.objects.filter(taxonomy=run.taxonomy)
            .select_related("index_build__model_version")
            .first()
        )
        if deployment is None:
            raise NoLiveModel(run.taxonomy)
        model_version = deployment.index_build.model_version
    build = index_build_create(model_version=model_version, progress=progress)
    if run.kind == TrainingRun.Kind.BUILD:
        progress("evaluate", 0.0, None)
        model_version_evaluate(model_version=model_version, index_build=build)
    if run.activate:
        deployment_activate(index_build=build)
    return {
        "status": TrainingRun.Status.SUCCEEDED,
        "model_version": model_version,
        "index_build": build,
    }


def training_runs_fail_stale(*, silent_for_seconds: int) -> int:
    """Mark runs whose worker died failed (and so retriable), freeing the taxonomy's slot.

    A live run writes a heartbeat with its progress; one silent for ``silent_for_seconds`` has
    lost its worker. The live model and index were never touched by it.
    """
    cutoff = timezone.now() - timezone.timedelta(seconds=silent_for_seconds)
    return (
        TrainingRun.objects.filter(
            status__in=[TrainingRun.Status.RUNNING, TrainingRun.Status.EVALUATED]
        )
        .filter(Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff))
        .update(
            status=TrainingRun.Status.FAILED,
            error="the worker stopped before the run finished; the live model kept serving. "
            "Retry the run to resume from its last checkpoint.",
            finished_at=timezone.now(),
        )
    )


def feedback_is_held_out(text: str) -> bool:
    """A fixed fifth of curator-judged texts, kept to test on: a build never trains on them (its
    Annotations test); a fine-tune measures the new ones before its catch-up phase learns them
    (``models_app.retraining.finetune_execute``)."""
    return zlib.crc32(normalize_text(text).encode()) % 5 == 0


def model_version_evaluate(
    *,
    model_version: ModelVersion,
    size: int = 1000,
    seed: int = 0,
    index_build: IndexBuild | None = None,
) -> dict:
    """The paper's four tests on this taxonomy, plus retrieval metrics; stored on the version.

    With ``index_build`` (of this version) the members' vectors come from its index instead of
    being encoded again: for the tower that is most of a build's time."""
    taxonomy = model_version.taxonomy
    annotations = [
        (text, group_id)
        for text, group_id in FeedbackPair.objects.filter(
            taxonomy=taxonomy, label=True, group__isnull=False
        ).values_list("text_a", "group_id")
        if feedback_is_held_out(text)
    ]
    held_out = {normalize_text(text) for text, _ in annotations}
    rows = [
        (member_id, group_id, text)
        for member_id, group_id, text, key in Member.objects.filter(taxonomy=taxonomy)
        .order_by("id")
        .values_list("id", "group_id", "text", "normalized_text")
        if key not in held_out  # an annotation must not find itself as a curator member
    ]
    members = [(group_id, text) for _, group_id, text in rows]
    if not members:
        raise ConfigError(f"taxonomy {taxonomy.slug!r} has no member strings to evaluate on")
    taxonomy_members = [
        (group_id, text)
        for group_id, text in Member.objects.filter(
            taxonomy=taxonomy, source=Member.Source.TAXONOMY
        ).values_list("group_id", "text")
    ] or members
    suite = build_test_suite(taxonomy_members, seed=seed, size=size, annotations=annotations)
    encoder = encoder_for(model_version)
    vectors = None
    if index_build is not None and index_build.model_version_id == model_version.id:
        vectors = member_vectors(
            encoder, index_build, [m for m, _, _ in rows], [text for _, _, text in rows]
        )
    matcher = EncoderMatcher(
        encoder,
        [t for _, t in members],
        [g for g, _ in members],
        vectors=vectors,
    )
    metrics = evaluate(matcher, suite)
    model_version.metrics = {**model_version.metrics, "suite": metrics}
    model_version.save(update_fields=["metrics"])
    return metrics


def member_vectors(encoder, build: IndexBuild, member_ids: list[int], texts: list[str]):
    """The members' vectors: from the build's index where it holds them, else encoded."""
    index = MemberIndex.load(artifact_path(build.artifact_path))
    indexed = set(index.member_ids().tolist())
    held = [i for i, member_id in enumerate(member_ids) if member_id in indexed]
    vectors = np.zeros((len(member_ids), index.dim), dtype=np.float32)
    if held:
        vectors[held] = index.vectors_of(np.array([member_ids[i] for i in held]))
    missing = [i for i, member_id in enumerate(member_ids) if member_id not in indexed]
    if missing:
        vectors[missing] = encoder.encode([texts[i] for i in missing])
    return vectors


SHIPPED_INFO = "shipped.json"


def model_version_import(*, taxonomy: Taxonomy, folder: Path) -> ModelVersion:
    """Register a trained model folder (such as the shipped one) as the next version.

    The folder is checked by loading it, then copied whole into the artifacts folder; its
    ``shipped.json`` (spec, metrics, data hash) becomes the version's config and metrics.
    """
    folder = Path(folder)
    encoder = load_encoder(folder)  # ArtifactError when incomplete or corrupt
    info = (
        json.loads((folder / SHIPPED_INFO).read_text()) if (folder / SHIPPED_INFO).exists() else {}
    )
    relative = f"{taxonomy.slug}/models/{uuid.uuid4().hex}"
    with atomic_directory(artifact_path(relative)) as scratch:
        for path in folder.iterdir():
            if path.is_file():
                shutil.copyfile(path, scratch / path.name)
            elif path.is_dir():  # a sentence-transformers model keeps a folder per module
                shutil.copytree(path, scratch / path.name)
    spec = {"encoder": dataclasses.asdict(encoder.config)}
    if encoder.config.kind in PRETRAINED_KINDS:
        spec["search"] = TOWER_SPEC["search"]  # as a tower trained here would be served
    return _model_version_create(
        taxonomy=taxonomy,
        encoder_kind=encoder.config.kind,
        config=info.get("spec", spec),
        artifact_path=relative,
        trained_on_members=info.get("trained_on_members", 0),
        data_sha256=info.get("data_sha256", ""),
        metrics=info.get("metrics", {}),
    )


def _run_now(*, taxonomy: Taxonomy, kind: str, spec: dict[str, Any] | None) -> TrainingRun | None:
    run = training_run_request(taxonomy=taxonomy, kind=kind, config=spec or {}, enqueue=False)
    if run is None:
        return None
    executed = training_run_execute(run_id=run.id)
    if executed is None:  # a fine-tune took its slot before it started (superseded)
        return None
    run = executed
    if run.status != TrainingRun.Status.SUCCEEDED:
        raise RuntimeError(f"{kind} of {taxonomy.slug} failed: {run.error}")
    return run


def taxonomy_ensure_live(
    *, taxonomy: Taxonomy, shipped: Path | None = None, spec: dict[str, Any] | None = None
) -> str:
    """Give the taxonomy a live model and a current index, doing no more work than needed.

    In order: nothing when both are current; a reindex when members changed or a version exists
    without a deployment; the shipped model when one is given (and no spec asks otherwise);
    else a training run. Returns what it did, for the caller to report.
    """
    if hasattr(taxonomy, "deployment"):
        if not taxonomy_needs_reindex(taxonomy):
            return "live model and index are up to date"
        run = _run_now(taxonomy=taxonomy, kind=TrainingRun.Kind.REINDEX, spec=None)
        return f"reindexed: {run.index_build.size} members" if run else "a run is already active"
    if ModelVersion.objects.filter(taxonomy=taxonomy).exists():
        # A version that was never deployed (say an interrupted first start): index the newest.
        version = ModelVersion.objects.filter(taxonomy=taxonomy).order_by("-number").first()
        deployment_activate(index_build=index_build_create(model_version=version))
        return f"{version.label} indexed and live"
    if shipped is not None and shipped.exists() and not spec:
        version = model_version_import(taxonomy=taxonomy, folder=shipped)
        deployment_activate(index_build=index_build_create(model_version=version))
        return f"shipped model {version.label} is live"
    run = _run_now(taxonomy=taxonomy, kind=TrainingRun.Kind.BUILD, spec=spec)
    return f"trained {run.model_version.label}" if run else "a run is already active"
