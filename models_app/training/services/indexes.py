"""Indexes and the live pointer: a model version's vectors of every member written to a new
index folder, the pointer (``Deployment``) swapped to a model and index together, old builds
pruned."""

from __future__ import annotations

import logging
import shutil
import uuid
from dataclasses import dataclass

import numpy as np
from django.db import transaction
from django.utils import timezone

from annotations.models import Member, Taxonomy
from annotations.services.audit import audit_record
from models_app.models import BulkJob, Deployment, IndexBuild, ModelVersion, TrainingRun
from models_app.serving.engines import artifact_path, encoder_for, member_rows
from models_app.serving.groups import description_vectors, descriptions_to_encode, group_rows
from models_app.siamese.artifacts import ArtifactError, atomic_directory
from models_app.siamese.configs import ConfigError
from models_app.siamese.index import MemberIndex
from models_app.siamese.progress import Progress, encode_reporting, no_progress
from models_app.siamese.search import MemberSearch
from models_app.siamese.specs import parse_search_config

logger = logging.getLogger(__name__)


def index_build_create(
    *, model_version: ModelVersion, progress: Progress = no_progress
) -> IndexBuild:
    """Write a new index folder of every member's ``model_version`` vector.

    When the live index was built with the same model, the members it holds keep the vectors it
    holds (a member's text never changes in place) and only the members added since are
    encoded: the scheduled reindex after a round of verdicts costs a few encodings, not the
    whole taxonomy.
    """
    taxonomy = model_version.taxonomy
    rows = member_rows(taxonomy)
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
        vectors = encode_reporting(encoder, texts, progress, "encode")
    progress("index", 0.5, None)
    index = MemberIndex.build(vectors, ids)
    relative = f"{taxonomy.slug}/indexes/{uuid.uuid4().hex}"
    with atomic_directory(artifact_path(relative)) as folder:
        index.save(folder, extra={"model_version": model_version.number})
        # The search's tables every serving process maps, written once here.
        MemberSearch(index, texts, parse_search_config(model_version.config), tables=folder)
    # The groups' descriptions in this model's embedding, for the ranker: encoded here, in the
    # worker, so that no web process has to when the build goes live.
    description_vectors(
        taxonomy_slug=taxonomy.slug,
        model_version_id=model_version.id,
        encoder=encoder,
        descriptions=[description for _, _, description in group_rows(taxonomy.id)],
    )
    build = IndexBuild.objects.create(
        taxonomy=taxonomy,
        model_version=model_version,
        artifact_path=relative,
        size=len(index),
        max_member_id=max(ids),
    )
    # After the row: a run stopped at this report leaves a build that pruning removes, not a
    # folder nothing names.
    progress("index", 1.0, 0.0)
    return build


@dataclass(frozen=True)
class IndexWork:
    """What ``index_build_create`` has to do for a version: the members it indexes, those of
    them it encodes, and the group descriptions it encodes."""

    members: int
    encoded: int
    descriptions: int


def index_work(*, taxonomy: Taxonomy, model_version: ModelVersion | None) -> IndexWork:
    """The work of indexing ``model_version`` (None: a version not stored yet, a build's) over
    today's members, counted as ``index_build_create`` does it: with the live index built by
    the same version, only the members added since it was built are encoded."""
    members = Member.objects.filter(taxonomy=taxonomy)
    live = (
        Deployment.objects.filter(taxonomy=taxonomy, index_build__model_version=model_version)
        .select_related("index_build")
        .first()
        if model_version is not None
        else None
    )
    encoded = members.filter(id__gt=live.index_build.max_member_id) if live else members
    descriptions = descriptions_to_encode(
        taxonomy_slug=taxonomy.slug,
        model_version_id=model_version.id if model_version is not None else None,
        descriptions=[description for _, _, description in group_rows(taxonomy.id)],
    )
    return IndexWork(members=members.count(), encoded=encoded.count(), descriptions=descriptions)


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
    # What a rollback or an activation may go back to: a version that once served.
    ModelVersion.objects.filter(id=index_build.model_version_id, went_live_at=None).update(
        went_live_at=timezone.now()
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
    """Delete all but the newest ``keep - 1`` index builds not in use, rows and folders. In
    use, never deleted: the live one, one a bulk job answers with (running, or failed and so
    retriable), and the newest ``keep`` rejected candidates' (an admin may still promote them,
    with that index).

    Every edit and scheduled check may lead to a reindex; without pruning each leaves a full
    index on disk. Model versions are kept: rolling back to one rebuilds its index.
    """
    # Ids read as lists (a NULL in an ``IN`` subquery would make ``NOT IN`` exclude every
    # build, and nothing would ever be pruned again).
    live = Deployment.objects.filter(taxonomy=taxonomy).values_list("index_build_id", flat=True)
    # A failed bulk job may be retried, from its checkpoint, with the build it started with.
    pinned = BulkJob.objects.filter(
        taxonomy=taxonomy, status__in=(*BulkJob.ACTIVE_STATUSES, BulkJob.Status.FAILED)
    ).values_list("index_build_id", flat=True)
    # The newest rejected candidates only: an older one's promotion answers that its index
    # is gone, and its page no longer offers it.
    rejected = (
        TrainingRun.objects.filter(
            taxonomy=taxonomy,
            kind=TrainingRun.Kind.FINETUNE,
            status=TrainingRun.Status.REJECTED,
        )
        .exclude(index_build=None)
        .order_by("-id")
        .values_list("index_build_id", flat=True)[:keep]
    )
    in_use = {build_id for ids in (live, pinned, rejected) for build_id in ids if build_id}
    builds = IndexBuild.objects.filter(taxonomy=taxonomy).exclude(id__in=in_use)
    old = list(builds.order_by("-created_at", "-id")[keep - 1 :])
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
