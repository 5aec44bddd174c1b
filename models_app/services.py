"""Writes for models: fitting versions, building indexes, swapping the live pointer, runs."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from annotations.models import Member, Taxonomy
from models_app.live import artifact_path, encoder_for, live_engine
from models_app.models import Deployment, IndexBuild, ModelVersion, TrainingRun
from models_app.siamese.artifacts import atomic_directory
from models_app.siamese.encoders import ConfigError, fit_encoder, parse_config
from models_app.siamese.index import MemberIndex

logger = logging.getLogger(__name__)

Progress = Callable[[str, float], None]


def _no_progress(stage: str, fraction: float) -> None:
    return None


class NoLiveModel(Exception):
    def __init__(self, taxonomy: Taxonomy) -> None:
        super().__init__(
            f"taxonomy {taxonomy.slug!r} has no live model yet; run "
            f"`python manage.py train {taxonomy.slug} --activate`"
        )


def _member_rows(taxonomy: Taxonomy) -> list[tuple[int, str]]:
    return list(Member.objects.filter(taxonomy=taxonomy).order_by("id").values_list("id", "text"))


def model_version_fit(
    *,
    taxonomy: Taxonomy,
    config: dict[str, Any],
    parent: ModelVersion | None = None,
    progress: Progress = _no_progress,
) -> ModelVersion:
    """Fit an encoder on every member string of the taxonomy and store it as a new version."""
    parsed = parse_config(config)  # a bad config fails before any work is done
    rows = _member_rows(taxonomy)
    if not rows:
        raise ConfigError(f"taxonomy {taxonomy.slug!r} has no member strings to train on")
    texts = [text for _, text in rows]
    progress("train", 0.0)
    encoder = fit_encoder(texts, config)
    relative = f"{taxonomy.slug}/models/{uuid.uuid4().hex}"
    with atomic_directory(artifact_path(relative)) as folder:
        encoder.save(folder)
    progress("train", 1.0)
    data_sha256 = hashlib.sha256("\n".join(texts).encode()).hexdigest()
    with transaction.atomic():
        number = (
            ModelVersion.objects.select_for_update()
            .filter(taxonomy=taxonomy)
            .aggregate(n=Max("number"))["n"]
            or 0
        ) + 1
        return ModelVersion.objects.create(
            taxonomy=taxonomy,
            number=number,
            encoder_kind=parsed.kind,
            config=dataclasses.asdict(parsed),
            artifact_path=relative,
            parent=parent,
            trained_on_members=len(texts),
            data_sha256=data_sha256,
        )


def index_build_create(
    *, model_version: ModelVersion, progress: Progress = _no_progress
) -> IndexBuild:
    """Encode every member with ``model_version`` and write a new index folder."""
    taxonomy = model_version.taxonomy
    rows = _member_rows(taxonomy)
    if not rows:
        raise ConfigError(f"taxonomy {taxonomy.slug!r} has no member strings to index")
    encoder = encoder_for(model_version)
    progress("encode", 0.0)
    vectors = encoder.encode([text for _, text in rows])
    progress("index", 0.5)
    ids = [member_id for member_id, _ in rows]
    index = MemberIndex.build(vectors, ids)
    relative = f"{taxonomy.slug}/indexes/{uuid.uuid4().hex}"
    with atomic_directory(artifact_path(relative)) as folder:
        index.save(folder, extra={"model_version": model_version.number})
    progress("index", 1.0)
    return IndexBuild.objects.create(
        taxonomy=taxonomy,
        model_version=model_version,
        artifact_path=relative,
        size=len(index),
        max_member_id=max(ids),
    )


def deployment_activate(*, index_build: IndexBuild) -> Deployment:
    """Make ``index_build`` (and the model version it was built with) live in one update."""
    deployment, _ = Deployment.objects.update_or_create(
        taxonomy=index_build.taxonomy, defaults={"index_build": index_build}
    )
    return deployment


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
                requested_by=requested_by,
            )
    except IntegrityError:
        return None
    if enqueue:
        from worker.tasks import execute_training_run

        transaction.on_commit(lambda: execute_training_run.delay(run.id))
    return run


def training_run_execute(*, run_id: int) -> TrainingRun | None:
    """Claim a queued run and carry it out; a second call for the same run does nothing."""
    claimed = TrainingRun.objects.filter(id=run_id, status=TrainingRun.Status.QUEUED).update(
        status=TrainingRun.Status.RUNNING, started_at=timezone.now(), stage="start"
    )
    if claimed != 1:
        logger.info("training run %s is not queued any more; nothing to do", run_id)
        return None
    run = TrainingRun.objects.select_related("taxonomy").get(id=run_id)

    def progress(stage: str, fraction: float) -> None:
        TrainingRun.objects.filter(id=run_id).update(stage=stage, progress=fraction)

    try:
        if run.kind == TrainingRun.Kind.BUILD:
            model_version = model_version_fit(
                taxonomy=run.taxonomy, config=run.config, progress=progress
            )
        else:
            engine = live_engine(run.taxonomy)
            if engine is None:
                raise NoLiveModel(run.taxonomy)
            model_version = ModelVersion.objects.get(id=engine.model_version_id)
        build = index_build_create(model_version=model_version, progress=progress)
        if run.activate:
            deployment_activate(index_build=build)
    except Exception as exc:
        logger.exception("training run %s failed", run_id)
        TrainingRun.objects.filter(id=run_id).update(
            status=TrainingRun.Status.FAILED,
            error=f"{type(exc).__name__}: {exc}",
            finished_at=timezone.now(),
        )
        run.refresh_from_db()
        return run
    TrainingRun.objects.filter(id=run_id).update(
        status=TrainingRun.Status.SUCCEEDED,
        stage="done",
        progress=1.0,
        model_version=model_version,
        index_build=build,
        finished_at=timezone.now(),
    )
    run.refresh_from_db()
    return run


def training_runs_fail_stale(*, older_than_seconds: int) -> int:
    """Mark runs whose worker died (running past the hard time limit) failed, freeing the slot."""
    cutoff = timezone.now() - timezone.timedelta(seconds=older_than_seconds)
    return TrainingRun.objects.filter(
        status=TrainingRun.Status.RUNNING, started_at__lt=cutoff
    ).update(
        status=TrainingRun.Status.FAILED,
        error="the worker stopped before the run finished",
        finished_at=timezone.now(),
    )
