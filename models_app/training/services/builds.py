"""Model versions: fitted (a tower, a trained encoder, a student distilled from the live
model), stored with their config and metrics, evaluated, or imported from a folder."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import Max

from annotations.models import FeedbackPair, GroupRelation, Input, Member, Taxonomy
from models_app.models import Deployment, IndexBuild, ModelVersion
from models_app.serving.engines import artifact_path, encoder_for
from models_app.siamese.artifacts import atomic_directory
from models_app.siamese.baselines import EncoderMatcher
from models_app.siamese.configs import ConfigError
from models_app.siamese.distill import distill_encoder, distillation_texts
from models_app.siamese.encoders import (
    Encoder,
    compile_encoder,
    encoder_class,
    load_encoder,
    parse_config,
)
from models_app.siamese.evaluation import build_test_suite, evaluate
from models_app.siamese.progress import Progress, no_progress
from models_app.siamese.sampling import FeedbackExample, prepare_data, training_data_digest
from models_app.siamese.specs import (
    PRETRAINED_KINDS,
    TOWER_SPEC,
    DistillConfig,
    TrainConfig,
    parse_distill_config,
    parse_model_spec,
    parse_search_config,
)
from models_app.siamese.text import comparison_key
from models_app.siamese.tfidf import CharNgramTfidfEncoder
from models_app.siamese.tower_finetune import tower_finetune
from models_app.siamese.train import TrainResult, train_encoder
from models_app.training.services.indexes import member_vectors
from models_app.training.services.training_data import (
    feedback_examples,
    feedback_is_held_out,
    feedback_last_id,
    held_out_texts,
)

logger = logging.getLogger(__name__)


@transaction.atomic
def model_version_create(*, taxonomy: Taxonomy, **fields: Any) -> ModelVersion:
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
    progress: Progress = no_progress,
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
    if parent is not None and training.finetune_recipe == "titles":
        # By the clock and from the start on a retry: no checkpoint to resume.
        result = tower_finetune(
            parent, members, feedback, training, anchor=anchor, progress=progress
        )
        digest = training_data_digest(members, feedback)
        return EncoderFit(result, len(members), 0, digest)
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
    folder_compile(artifact_path(relative))
    return model_version_create(
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


@dataclasses.dataclass(frozen=True)
class FitPlan:
    """What ``model_version_fit`` makes of a spec: the encoder, its training, and a student's
    distillation (None: trained on the taxonomy's pairs)."""

    encoder_config: dict[str, Any]
    training: TrainConfig
    distill: DistillConfig | None


def fit_plan(spec: dict[str, Any] | None, parent: ModelVersion | None) -> FitPlan:
    """The spec checked whole (a bad one fails before any work); with ``parent`` and no spec,
    the parent's encoder and training."""
    encoder_config, training = parse_model_spec(spec)
    if parent is not None and spec in (None, {}):
        encoder_config, training = parse_model_spec(parent.config)
    distill = parse_distill_config(spec) if parent is None else None
    return FitPlan(encoder_config, training, distill)


def encoder_like_fit(
    *, taxonomy: Taxonomy, plan: FitPlan, parent: ModelVersion | None, texts: list[str]
) -> tuple[Encoder, float]:
    """An encoder that encodes as fast as the one ``model_version_fit`` will store, and the
    seconds making it took (0 when none was made): a network's speed is its shape's, not its
    weights'. The parent's (a fine-tune of it); the live version's when it has the same
    encoder (the pretrained tower, before the tower is trained on the taxonomy); else one made
    from ``texts``, untrained (fitted, for TF-IDF; a tower loads its pretrained weights)."""
    if parent is not None:
        return encoder_for(parent), 0.0
    wanted = parse_config(plan.encoder_config)
    deployment = (
        Deployment.objects.filter(taxonomy=taxonomy)
        .select_related("index_build__model_version")
        .first()
    )
    if deployment is not None:
        live = deployment.index_build.model_version
        try:
            same = parse_config(live.config.get("encoder") or {}) == wanted
        except ConfigError:  # a version stored under an older schema
            same = False
        if same:
            return encoder_for(live), 0.0
    started = time.perf_counter()
    if wanted.kind == CharNgramTfidfEncoder.kind:
        made = CharNgramTfidfEncoder.fit(texts, wanted)
    else:
        made = encoder_class(wanted.kind).create(texts, wanted)
    return made, time.perf_counter() - started


def model_version_fit(
    *,
    taxonomy: Taxonomy,
    spec: dict[str, Any] | None = None,
    parent: ModelVersion | None = None,
    checkpoint_dir: Path | None = None,
    progress: Progress = no_progress,
    feedback_until: int | None = None,
) -> ModelVersion:
    """Train an encoder on the taxonomy's members and its curators' feedback; store a version.

    With ``parent`` the parent's weights are fine-tuned (same encoder config required) with the
    taxonomy pairs replayed beside the feedback, so earlier knowledge is kept. Feedback counts up
    to pair ``feedback_until`` (default: all there is now), less the held-out fifth.
    """
    if feedback_until is None:
        feedback_until = feedback_last_id(taxonomy)
    plan = fit_plan(spec, parent)
    encoder_config, training, distill = plan.encoder_config, plan.training, plan.distill
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


def student_text_count(taxonomy: Taxonomy, distill: DistillConfig) -> int:
    """At most how many texts a student's teacher encodes (``_student_fit``): every member and
    its augmented copies, and the newest inputs (fewer where some are the same text)."""
    members = Member.objects.filter(taxonomy=taxonomy).count()
    inputs = min(Input.objects.filter(taxonomy=taxonomy).count(), STUDENT_INPUTS)
    return members * (1 + distill.augmented_copies) + inputs


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
    teacher = encoder_for(teacher_version)
    # A student is searched in its teacher's place: unless its spec names a dimension, it takes
    # the live model's (a new taxonomy's tower 384, the shipped O*NET student 128), as
    # distill_encoder does for a config without one; this config arrives with defaults filled.
    if "output_dim" not in spec.get("encoder", {}):
        encoder_config = {**encoder_config, "output_dim": teacher.dim}
    result = distill_encoder(texts, teacher, encoder_config, distill, progress=progress)
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


# Cases in each generated set of a version's test suite.
SUITE_SIZE = 1000


def suite_verdicts(taxonomy: Taxonomy) -> list[tuple[str, int]]:
    """The curators' verdicts a version is tested on: the held-out fifth, as (text, group)."""
    return [
        (text, group_id)
        for text, group_id in FeedbackPair.objects.filter(
            taxonomy=taxonomy, label=True, group__isnull=False
        ).values_list("text_a", "group_id")
        if feedback_is_held_out(text)
    ]


# Members a test suite's making is timed on at a build's start (``suite_seconds``).
SUITE_TIMED_MEMBERS = 2048


def suite_seconds(taxonomy: Taxonomy) -> float:
    """Seconds making the taxonomy's test suite (``build_test_suite``) is expected to take,
    timed now on an even sample of its members with the cases cut in proportion: most of it is
    inducing the composition set's synonyms, which grows with the members (7.5 s of a 9.5 s
    evaluation on O*NET's 53,767)."""
    members = list(
        Member.objects.filter(taxonomy=taxonomy, source=Member.Source.TAXONOMY)
        .order_by("id")
        .values_list("group_id", "text")
    )
    if not members:
        return 0.0
    part = members[:: max(1, len(members) // SUITE_TIMED_MEMBERS)]
    started = time.perf_counter()
    build_test_suite(part, size=max(1, SUITE_SIZE * len(part) // len(members)))
    return (time.perf_counter() - started) * len(members) / len(part)


def model_version_evaluate(
    *,
    model_version: ModelVersion,
    size: int = SUITE_SIZE,
    seed: int = 0,
    index_build: IndexBuild | None = None,
) -> dict:
    """The paper's four tests on this taxonomy, plus retrieval metrics; stored on the version.

    With ``index_build`` (of this version) the members' vectors come from its index instead of
    being encoded again: for the tower that is most of a build's time."""
    taxonomy = model_version.taxonomy
    annotations = suite_verdicts(taxonomy)
    held_out = {comparison_key(text) for text, _ in annotations}
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
    suite = build_test_suite(taxonomy_members, seed=seed, size=size, verdicts=annotations)
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
    folder_compile(artifact_path(relative))
    spec = {"encoder": dataclasses.asdict(encoder.config)}
    if encoder.config.kind in PRETRAINED_KINDS:
        spec["search"] = TOWER_SPEC["search"]  # as a tower trained here would be served
    return model_version_create(
        taxonomy=taxonomy,
        encoder_kind=encoder.config.kind,
        config=info.get("spec", spec),
        artifact_path=relative,
        trained_on_members=info.get("trained_on_members", 0),
        data_sha256=info.get("data_sha256", ""),
        metrics=info.get("metrics", {}),
    )


def folder_compile(folder: Path) -> bool:
    """Compile the model saved in ``folder`` for serving where that pays (the tower through
    ONNX Runtime), here in the worker, before anything encodes with it: the gate, the index and
    the web then all use what serves. True when a compiled copy was written. A compile that
    fails leaves the version as it is, served by PyTorch: the version is whole without it."""
    started = time.perf_counter()
    try:
        written = compile_encoder(folder)
    except Exception as exc:  # the exporter and the runtime raise many kinds; none is fatal here
        logger.warning("%s cannot be compiled, PyTorch serves it: %s", folder, exc)
        return False
    if written:
        logger.info("%s compiled for serving in %.1f s", folder, time.perf_counter() - started)
    return written


def model_version_compile(*, model_version_id: int) -> bool:
    """The worker's task after a process found a version's compiled copy missing, stale or
    damaged: compile it again (nothing when a current one is there by then)."""
    version = ModelVersion.objects.filter(id=model_version_id).first()
    if version is None:  # deleted since it was asked for
        return False
    return folder_compile(artifact_path(version.artifact_path))
