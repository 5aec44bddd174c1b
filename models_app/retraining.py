"""Corrigible retraining: fine-tune the live model on curator feedback, gate the candidate against
the live model, promote it (model and index together) or reject it, and report what flipped.

The gate compares both models on the same cases:
- the frozen suite, the paper's tests generated from the taxonomy's own strings with a fixed
  seed, so every run sees the same cases;
- the held-out fifth of the verdicts new since the live version, answered by the run's
  phase-1 model before the run learns them (it trains on them after that measurement, see
  finetune_execute);
- every past verdict as a regression suite, answered by the model by itself: a verdict's own
  curator member is left out of the search, or the model would only be finding the answer it
  was given.
A candidate is promoted only when no metric drops by more than the tolerance and the share of
verdicts it gets right by itself rises. Each promotion may lose up to the tolerance, so the frozen
suite is also measured against the *reference*, the version the chain of gate promotions behind
the live one started from (``gate_reference``): the candidate may not be below it by more than
the drift tolerance either, however the loss was spread over rounds.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotations.models import FeedbackPair, Group, Input, Judgement, Member, Taxonomy
from annotations.services.audit import audit_record
from models_app.live import encoder_for
from models_app.models import Deployment, IndexBuild, ModelVersion, TrainingRun
from models_app.selectors import model_version_was_live
from models_app.services import (
    NoLiveModel,
    deployment_activate,
    encoder_fit,
    feedback_examples,
    feedback_last_id,
    held_out_texts,
    index_build_create,
    model_version_store,
    run_checkpoint_dir,
    run_first_attempt,
    training_run_request,
    version_config,
)
from models_app.services import member_vectors as _member_vectors
from models_app.siamese.encoders import as_stored
from models_app.siamese.evaluation import build_test_suite, evaluate
from models_app.siamese.search import HybridMatcher, SearchConfig
from models_app.siamese.stats import paired_comparison
from models_app.siamese.text import normalize_text
from models_app.siamese.train import (
    MARGIN_LOSSES,
    FeedbackExample,
    TrainConfig,
    parse_model_spec,
    parse_search_config,
)

Progress = Callable[[str, float, "float | None"], None]

FROZEN_SETS = ("typos", "composition", "extra_words")
FLIP_ROWS_KEPT = 200
# Half of a fine-tune's positive pairs come from curator feedback, half replay the taxonomy's
# own pairs, so the corrections are learned without forgetting what the parent knew.
FINETUNE_REPLAY_SHARE = 0.5
# Curator inputs go through the augmentations member strings do (typos, a synonym, job-ad
# words): learnt only as typed, 500 verdicts cost the frozen Extra Words test 1.3-1.7 points
# and the gate rejected the candidate; augmented, +0.7 (bench/finetune_drift.py).
FINETUNE_FEEDBACK_AUGMENT_SHARE = 1.0
# A fine-tune's weights keep this share of the live version's (TrainConfig.keep_parent_share).
# Each promotion's loss on the frozen suite counts against the gate's drift budget. One-phase
# fine-tunes, two seeds: Typos 0.0/0.0 and Extra Words +0.7/+0.5 points blended, against
# -0.4/-0.1 and +0.2/0.0 unblended; 0.922/0.938 of the corrections against 0.946/0.960
# (bench/finetune_drift.py --blends; the product's two phases in bench/corrigibility.py,
# docs/benchmarks.md). A manual fine-tune from a version inherits its spec, this share too.
FINETUNE_KEEP_PARENT_SHARE = 0.25
# A curator's input is pulled until it is nearer its group's string than the in-batch negatives
# (its false match among them when the batch carries it) by about this much cosine
# (TrainConfig.feedback_margin): more than the search's trigram window
# (SearchConfig.lexical_window, 0.03), inside which string overlap with the wrong group would
# take the correction back. Fine-tunes of a loss without margins go without.
FINETUNE_FEEDBACK_MARGIN = 0.05
# A fine-tune's first phase repeats the verdicts since the live version until they are about
# as many as all earlier ones, but at most this many times: a run started by the clock on a
# handful of new verdicts must not spend half its feedback on them.
FINETUNE_FRESH_MAX_REPEATS = 8
# A fine-tune on more new verdicts than settings.SIAMWEB_FINETUNE_BUDGET_VERDICTS trains
# proportionally longer, up to this factor. On a fixed budget each new verdict is drawn less
# often the more there are: after a rejected round the next run learns two rounds' verdicts, and
# on a 2-core AMD EPYC VM (1,297 steps) got 0.934 of a round's corrections right by itself where
# 1,858 steps on a faster VM got 0.972; on the grown budget 0.956 (docs/benchmarks.md, "A
# backlog of new verdicts"). The cap bounds how long a backlog keeps the training worker busy:
# such a run takes about 320 s from the last verdict there, a round of 500 about 230 s.
FINETUNE_BUDGET_GROWTH_CAP = 1.5
# The share of a fine-tune's time budget that catches up on the held-out verdicts once the
# gate has measured them (see finetune_execute).
FINETUNE_CATCH_UP_SHARE = 0.25
# What the gate tests: each frozen test's accuracy against the live version (and the chain's
# reference, see gate_reference) and the held-out verdicts, each a paired McNemar test of the
# same cases (models_app/siamese/stats.py). MRR and P@10 are reported beside them, not tested:
# they move with the accuracies and would test the same losses twice.
# The flip report compares the newest inputs; beyond this many it reports a sample of them.
FLIP_INPUTS_COMPARED = 20_000
# By name, so this module does not import the worker layer that calls it.
FINISH_PROMOTION = "worker.tasks.finish_promotion"


class RunStateError(ValueError):
    """The run or version is not in a state that allows what was asked."""


# --- requests --------------------------------------------------------------------------------


def live_version(taxonomy: Taxonomy) -> ModelVersion | None:
    deployment = (
        Deployment.objects.filter(taxonomy=taxonomy)
        .select_related("index_build__model_version__taxonomy")
        .first()
    )
    return deployment.index_build.model_version if deployment else None


def _live_build(taxonomy: Taxonomy) -> IndexBuild | None:
    deployment = Deployment.objects.filter(taxonomy=taxonomy).select_related("index_build").first()
    return deployment.index_build if deployment else None


def gate_reference(version: ModelVersion) -> ModelVersion:
    """The version the chain of gate promotions that led to ``version`` started from.

    Walks up the parents while a version went live through the gate. It stops at one that did
    not: built from scratch, shipped, or promoted by an admin against the gate (a person
    accepted what it lost, so it becomes the new reference). ``version`` itself when it did
    not go live through the gate.
    """
    # The gate's own decision, stored before the version goes live: a run that failed after
    # that still put its version live through the gate, and a forced one says "reject".
    gated = set(
        TrainingRun.objects.filter(
            taxonomy_id=version.taxonomy_id,
            kind=TrainingRun.Kind.FINETUNE,
            gate_report__decision="promote",
        ).values_list("model_version_id", flat=True)
    )
    parents = dict(
        ModelVersion.objects.filter(taxonomy_id=version.taxonomy_id).values_list("id", "parent_id")
    )
    reference_id, walked = version.id, {version.id}
    while reference_id in gated and parents.get(reference_id) not in (None, *walked):
        reference_id = parents[reference_id]
        walked.add(reference_id)
    return version if reference_id == version.id else ModelVersion.objects.get(id=reference_id)


def finetune_run_request(
    *,
    taxonomy: Taxonomy,
    trigger: str,
    requested_by=None,
    config: dict | None = None,
    enqueue: bool = True,
) -> TrainingRun | None:
    """Queue a fine-tune of the live version; None when the taxonomy already has a run.

    A reindex still waiting in the queue (the scheduled check's or an edit's) gives its slot up: the
    fine-tune indexes every member as well, and until it is done the live engine scores members
    added since its index was built on the fly.
    """
    parent = live_version(taxonomy)
    if parent is None:
        raise NoLiveModel(taxonomy)
    with transaction.atomic():
        waiting = list(
            TrainingRun.objects.select_for_update().filter(
                taxonomy=taxonomy, kind=TrainingRun.Kind.REINDEX, status=TrainingRun.Status.QUEUED
            )
        )
        TrainingRun.objects.filter(
            id__in=[r.id for r in waiting], status=TrainingRun.Status.QUEUED
        ).update(status=TrainingRun.Status.SUPERSEDED, finished_at=timezone.now())
        run = training_run_request(
            taxonomy=taxonomy,
            kind=TrainingRun.Kind.FINETUNE,
            trigger=trigger,
            config=config or {},
            parent_version=parent,
            requested_by=requested_by,
            enqueue=enqueue,
        )
        if run is None:  # something else holds the slot: the reindex keeps its place
            transaction.set_rollback(True)
            return None
        TrainingRun.objects.filter(id__in=[r.id for r in waiting]).update(
            error=f"superseded by fine-tune run {run.id}, which indexes every member"
        )
    return run


def model_version_rollback(*, model_version: ModelVersion, actor) -> TrainingRun | None:
    """Queue making ``model_version`` live again, with an index rebuilt over today's members
    (model and index swap together at the end). None when the taxonomy already has a run."""
    if live_version(model_version.taxonomy) == model_version:
        raise RunStateError(f"{model_version.label} is already live")
    if not model_version_was_live(model_version):
        raise RunStateError(
            f"{model_version.label} was never live (a candidate its gate did not promote): "
            "there is nothing to roll back to; promote its run instead"
        )
    with transaction.atomic():
        run = training_run_request(
            taxonomy=model_version.taxonomy,
            kind=TrainingRun.Kind.ROLLBACK,
            trigger=TrainingRun.Trigger.MANUAL,
            model_version=model_version,
            requested_by=actor,
        )
        if run is not None:
            audit_record(
                actor=actor,
                action="model_version.rollback",
                obj=model_version,
                taxonomy=model_version.taxonomy,
                after={"model_version": model_version.id, "run": run.id},
            )
    return run


def training_run_retry(*, run: TrainingRun, actor) -> TrainingRun | None:
    """Queue a failed run again; a fine-tune resumes from the failed run's checkpoints."""
    if run.status != TrainingRun.Status.FAILED:
        raise RunStateError(f"run {run.id} is {run.status}; only a failed run can be retried")
    retry = training_run_request(
        taxonomy=run.taxonomy,
        kind=run.kind,
        trigger=run.trigger,
        config=run.config,
        activate=run.activate,
        parent_version=run.parent_version,
        model_version=run.model_version if run.kind == TrainingRun.Kind.ROLLBACK else None,
        retry_of=run,
        requested_by=actor,
    )
    return retry


def retrain_due_taxonomies(*, now=None) -> list[TrainingRun]:
    """Beat: start a fine-tune where enough new verdicts arrived, or where the live version is
    old and at least one verdict is new. "New" means after what the live version and the last
    fine-tune already used, so a rejected candidate is not retried on the same verdicts."""
    now = now or timezone.now()
    started = []
    for taxonomy in Taxonomy.objects.filter(deployment__isnull=False):
        live = live_version(taxonomy)
        seen = max(
            live.feedback_until,
            TrainingRun.objects.filter(
                taxonomy=taxonomy, kind=TrainingRun.Kind.FINETUNE, feedback_until__isnull=False
            )
            .exclude(status=TrainingRun.Status.FAILED)
            .order_by("-feedback_until")
            .values_list("feedback_until", flat=True)
            .first()
            or 0,
        )
        new_verdicts = new_verdict_count(taxonomy, after=seen)
        old = now - live.created_at > timedelta(hours=settings.SIAMWEB_RETRAIN_MAX_AGE_HOURS)
        if new_verdicts >= settings.SIAMWEB_RETRAIN_MIN_VERDICTS or (old and new_verdicts):
            trigger = (
                TrainingRun.Trigger.VERDICTS
                if new_verdicts >= settings.SIAMWEB_RETRAIN_MIN_VERDICTS
                else TrainingRun.Trigger.SCHEDULE
            )
            run = finetune_run_request(taxonomy=taxonomy, trigger=trigger)
            if run is not None:
                started.append(run)
    return started


def new_verdict_count(taxonomy: Taxonomy, *, after: int, until: int | None = None) -> int:
    """Verdicts whose feedback pairs came after pair ``after`` (and, given ``until``, not after
    pair ``until``: what a run that stops there trains on)."""
    pairs = FeedbackPair.objects.filter(taxonomy=taxonomy, id__gt=after, judgement__isnull=False)
    if until is not None:
        pairs = pairs.filter(id__lte=until)
    return pairs.values("judgement").distinct().count()


# --- execution (called by training_run_execute, inside its failure handling) -----------------


def finetune_execute(*, run: TrainingRun, progress: Progress) -> dict[str, Any]:
    """Fine-tune the live version in two phases, gate the candidate, promote or reject it.

    1. *Learn*: every verdict but the held-out fifth of the new ones (those since the live
       version's feedback), with replay; their curator members are left out too. The new
       verdicts are drawn as often as all earlier ones together: the live version learnt the
       earlier ones, and a fixed budget spread evenly over a growing pile of verdicts learnt
       each round's corrections less well (0.93 of round 1's right by the model alone, 0.83
       of round 4's; docs/benchmarks.md).
    2. The held-out verdicts are answered by the phase-1 model and by the live one: the gate's
       test of verdicts neither has seen.
    3. *Catch up* (``FINETUNE_CATCH_UP_SHARE`` of the budget): every verdict, the held-out
       ones weighted to half of the feedback drawn, so that a correction is learnt by the run
       that follows it and not one run later. Verdicts held out in an earlier run were
       measured then and are trained on.
    Each phase's result keeps ``FINETUNE_KEEP_PARENT_SHARE`` of the live version's weights: the
    held-out verdicts are measured on phase 1's blend, and the catch-up phase continues from
    phase 1's weights before that blend, so the candidate keeps the share once, not twice.
    """
    taxonomy = run.taxonomy
    parent = run.parent_version or live_version(taxonomy)
    if parent is None:
        raise NoLiveModel(taxonomy)
    progress("pairs", 0.0, None)
    checkpoints = run_checkpoint_dir(run)
    first_attempt = run_first_attempt(run)
    # A retry trains on what the failed attempt did, so its checkpoints still fit.
    until = first_attempt.feedback_until or feedback_last_id(taxonomy)
    TrainingRun.objects.filter(id=run.id).update(feedback_until=until)
    if run.retry_of_id is not None:
        # Phase 1 resumes from its checkpoint and runs to its budget again: a catch-up
        # checkpoint grew from the earlier attempt's phase-1 weights, not from this attempt's.
        shutil.rmtree(checkpoints / "catch_up", ignore_errors=True)
    # The verdicts this run trains on: one given since ``until`` waits for the next run, and a
    # retry keeps its first attempt's ``until``, so its budget and checkpoints.
    new_verdicts = new_verdict_count(taxonomy, after=parent.feedback_until, until=until)
    spec = _finetune_spec(parent, run.config, new_verdicts=new_verdicts)
    encoder_config, training = parse_model_spec(spec)
    held_out = held_out_texts(taxonomy, after=parent.feedback_until, until=until)
    catch_up = FINETUNE_CATCH_UP_SHARE if held_out else 0.0
    started = time.monotonic()
    laps = _Laps()
    live_encoder = encoder_for(parent)

    def learnable(after: int, up_to: int) -> list[FeedbackExample]:
        return [
            example
            for example in feedback_examples(
                taxonomy,
                after=after,
                until=up_to,
                keep=lambda text: normalize_text(text) not in held_out,
            )
            # A later verdict's evidence may be a held-out text's curator member.
            if normalize_text(example.member_text or "") not in held_out
        ]

    learnt = encoder_fit(
        taxonomy=taxonomy,
        encoder_config=encoder_config,
        training=_share_of_budget(training, 1 - catch_up),
        feedback=_half_fresh(
            fresh=learnable(parent.feedback_until, until),
            rest=learnable(0, min(parent.feedback_until, until)),
            max_repeats=FINETUNE_FRESH_MAX_REPEATS,
        ),
        left_out_members=held_out,
        parent=live_encoder,
        checkpoint_dir=checkpoints / "learn",
        # Members change with every verdict: a retry's data may differ from the first attempt's.
        discard_stale_checkpoint=True,
        progress=progress,
    )
    laps.lap("learn")
    learn_steps = learnt.result.steps
    resumed_from_step = learnt.result.metrics.get("resumed_from_step", 0.0)
    comparison = _Comparison.build(taxonomy)
    comparison.add(
        "live", live_encoder, parse_search_config(parent.config), index_build=_live_build(taxonomy)
    )
    held_out_hits = None
    final = learnt
    if held_out:
        progress("evaluate", 0.0, None)
        # As it would be served (stored smaller than it trains), as the live one is.
        comparison.add("learnt", as_stored(learnt.result.encoder), parse_search_config(spec))
        held_out_hits = comparison.held_out_hits(held_out)
        comparison.drop("learnt")
        laps.lap("held_out")
        final = encoder_fit(
            taxonomy=taxonomy,
            encoder_config=encoder_config,
            training=_share_of_budget(training, catch_up),
            feedback=_catch_up_feedback(
                feedback_examples(taxonomy, until=until, keep=lambda text: True), held_out
            ),
            # Phase 1's weights as trained, not its blend (which the held-out row measured):
            # the result is blended toward the live version once, as a one-phase run is.
            parent=learnt.result.trained_encoder,
            anchor=live_encoder,
            checkpoint_dir=checkpoints / "catch_up",
            discard_stale_checkpoint=True,
            progress=progress,
        )
        del learnt  # phase 1's two models, blended and as trained, are not needed any more
        laps.lap("catch_up")
    candidate = model_version_store(
        taxonomy=taxonomy,
        fit=final,
        config=version_config(encoder_config, training, spec),
        parent=parent,
        feedback_until=until,
        seconds=time.monotonic() - started,
        metrics={
            "steps": float(learn_steps + (final.result.steps if held_out else 0)),
            "catch_up_steps": float(final.result.steps if held_out else 0),
            "held_out_verdicts": float(len(held_out)),
            "resumed_from_step": resumed_from_step,
        },
    )
    build = index_build_create(model_version=candidate, progress=progress)
    TrainingRun.objects.filter(id=run.id).update(model_version=candidate, index_build=build)
    laps.lap("index")

    progress("evaluate", 0.5, None)
    # The candidate as stored and served (its index was just built with it), not as trained: the
    # gate compares what would go live with what is live.
    comparison.add(
        "candidate",
        encoder_for(candidate),
        parse_search_config(candidate.config),
        index_build=build,
    )
    reference = gate_reference(parent)
    if reference != parent:
        comparison.add("reference", encoder_for(reference), parse_search_config(reference.config))
    report = comparison.gate(
        alpha=settings.SIAMWEB_GATE_ALPHA,
        held_out=held_out_hits,
        reference_label=reference.label,
    )
    if reference != parent:
        comparison.drop("reference")
    report["new_verdicts"] = new_verdicts
    laps.lap("gate")
    report["stage_seconds"] = laps.seconds
    candidate.metrics = {**candidate.metrics, "gate": report}
    candidate.save(update_fields=["metrics"])
    TrainingRun.objects.filter(id=run.id).update(
        status=TrainingRun.Status.EVALUATED, gate_report=report, heartbeat_at=timezone.now()
    )
    if report["decision"] != "promote":
        return {"status": TrainingRun.Status.REJECTED}

    progress("promote", 0.0, None)
    flips = comparison.flips()
    laps.lap("flips")
    _go_live(build=build, actor=None)
    return {
        "status": TrainingRun.Status.PROMOTED,
        "flip_report": flips,
        "gate_report": {**report, "stage_seconds": laps.seconds},
    }


def _share_of_budget(training: TrainConfig, share: float) -> TrainConfig:
    """The training config with ``share`` of its time and of its steps (a GPU run may stop on
    steps before time)."""
    return dataclasses.replace(
        training,
        max_minutes=training.max_minutes * share,
        max_steps=max(1, math.ceil(training.max_steps * share)),
    )


def _half_fresh(
    *,
    fresh: list[FeedbackExample],
    rest: list[FeedbackExample],
    max_repeats: int | None = None,
) -> list[FeedbackExample]:
    """Every pair, the ``fresh`` ones repeated until their judged texts are about as many as
    the rest's (at least once, at most ``max_repeats`` times). Texts, not pairs: a reassign
    gives two pairs and a confirm one, and the sampler draws a text's rejections through its
    positive pair. The rest stay in, or training would wear off what they taught."""
    fresh_texts = len({normalize_text(f.text) for f in fresh})
    rest_texts = len({normalize_text(f.text) for f in rest})
    repeats = max(1, round(rest_texts / fresh_texts)) if fresh_texts else 1
    if max_repeats is not None:
        repeats = min(repeats, max_repeats)
    return fresh * repeats + rest


def _catch_up_feedback(
    feedback: list[FeedbackExample], held_out: frozenset[str]
) -> list[FeedbackExample]:
    """Every pair, the held-out verdicts' repeated to about half of them: the catch-up phase
    is short, and the others were learnt in the first phase already."""
    return _half_fresh(
        fresh=[f for f in feedback if normalize_text(f.text) in held_out],
        rest=[f for f in feedback if normalize_text(f.text) not in held_out],
    )


def rollback_execute(*, run: TrainingRun, progress: Progress) -> dict[str, Any]:
    target = run.model_version
    if target is None:
        raise RunStateError("a rollback run needs the version to restore")
    build = index_build_create(model_version=target, progress=progress)
    _go_live(build=build, actor=None)
    return {"status": TrainingRun.Status.SUCCEEDED, "index_build": build}


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
        replaced = live_version(run.taxonomy)
        report = {
            **run.gate_report,
            "forced_by": actor.username,
            "replaced_version": replaced.id if replaced else None,
        }
        _go_live(build=run.index_build, actor=actor)
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
        _Comparison.of_versions(run.taxonomy, replaced, run.model_version).flips()
        if replaced is not None
        else {}
    )
    TrainingRun.objects.filter(id=run.id).update(flip_report=flips)
    run.refresh_from_db()
    return run


class _Laps:
    """Seconds each stage of a run took, for the run's report."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._mark = time.monotonic()

    def lap(self, stage: str) -> None:
        now = time.monotonic()
        self.seconds[stage] = round(now - self._mark, 1)
        self._mark = now


def _go_live(*, build: IndexBuild, actor) -> None:
    # Model and index are one pointer: every web and worker process picks both up on its next
    # request (models_app.live compares the deployment it loaded with the current one).
    deployment_activate(index_build=build, actor=actor)


def finetune_minutes(new_verdicts: int) -> float:
    """A fine-tune's time budget: ``SIAMWEB_FINETUNE_MAX_MINUTES`` for up to
    ``SIAMWEB_FINETUNE_BUDGET_VERDICTS`` new verdicts, in proportion beyond that, at most
    ``FINETUNE_BUDGET_GROWTH_CAP`` times as long."""
    growth = new_verdicts / settings.SIAMWEB_FINETUNE_BUDGET_VERDICTS
    return settings.SIAMWEB_FINETUNE_MAX_MINUTES * min(FINETUNE_BUDGET_GROWTH_CAP, max(1.0, growth))


def _finetune_spec(parent: ModelVersion, overrides: dict, *, new_verdicts: int = 0) -> dict:
    """The parent's spec with a short training budget for ``new_verdicts`` (see
    ``finetune_minutes``); ``overrides`` may change its training, the budget too."""
    spec = {key: dict(value) for key, value in parent.config.items()}
    # A student was distilled once; its fine-tunes learn the verdicts like any trained model.
    spec.pop("distill", None)
    training = spec.setdefault("training", {})
    training["max_minutes"] = finetune_minutes(new_verdicts)
    if not training.get("max_steps", TrainConfig.max_steps):
        # A pretrained version served as it came (0 steps): its fine-tunes train, by the clock.
        training["max_steps"] = TrainConfig.max_steps
    training["replay_share"] = FINETUNE_REPLAY_SHARE
    training["feedback_augment_share"] = FINETUNE_FEEDBACK_AUGMENT_SHARE
    training["select_best"] = False
    training["keep_parent_share"] = FINETUNE_KEEP_PARENT_SHARE
    requested = overrides.get("training", {})
    training.update(requested)
    if "feedback_margin" not in requested:
        # By the loss the run will train with: an override may change it, and a parent
        # fine-tuned under sdml carries a margin another loss cannot take.
        if training.get("loss", TrainConfig.loss) in MARGIN_LOSSES:
            training["feedback_margin"] = FINETUNE_FEEDBACK_MARGIN
        else:
            training.pop("feedback_margin", None)
    return spec


# --- the gate and the flip report -------------------------------------------------------------


@dataclass(frozen=True)
class _Verdict:
    text: str
    group_id: int | None  # None: "none of these"
    verdict: str


class _Comparison:
    """Models over the same members, ready to answer the same cases: "live", "candidate", and
    while the gate needs them "learnt" (the phase-1 model) and "reference" (see
    gate_reference)."""

    def __init__(self, taxonomy, texts, labels, verdicts) -> None:
        self.taxonomy = taxonomy
        self.texts, self.labels = texts, labels
        self.verdicts: dict[str, _Verdict] = verdicts
        self.matchers: dict[str, HybridMatcher] = {}
        self.member_ids: list[int] = []  # of ``texts``, where known

    @classmethod
    def build(cls, taxonomy: Taxonomy) -> _Comparison:
        verdicts = _final_verdicts(taxonomy)
        # Curator members of judged texts are left out: the models answer those by themselves.
        rows = Member.objects.filter(taxonomy=taxonomy).values_list(
            "id", "group_id", "text", "normalized_text", "source"
        )
        members = [
            (member_id, group_id, text)
            for member_id, group_id, text, key, source in rows.order_by("id")
            if not (source == Member.Source.CURATOR and key in verdicts)
        ]
        comparison = cls(
            taxonomy, [text for *_, text in members], [g for _, g, _ in members], verdicts
        )
        comparison.member_ids = [member_id for member_id, _, _ in members]
        return comparison

    @classmethod
    def of_versions(cls, taxonomy: Taxonomy, live: ModelVersion, candidate: ModelVersion):
        comparison = cls.build(taxonomy)
        for name, version in (("live", live), ("candidate", candidate)):
            comparison.add(name, encoder_for(version), parse_search_config(version.config))
        return comparison

    def add(
        self, name: str, encoder, search: SearchConfig, *, index_build: IndexBuild | None = None
    ) -> None:
        """``index_build``: one built with ``encoder``, whose vectors stand in for encoding the
        members it holds again (the tower takes minutes to encode a large taxonomy)."""
        vectors = None
        if index_build is not None and self.member_ids:
            vectors = _member_vectors(encoder, index_build, self.member_ids, self.texts)
        self.matchers[name] = HybridMatcher(
            encoder, self.texts, self.labels, config=search, vectors=vectors
        )

    def drop(self, name: str) -> None:
        del self.matchers[name]

    def held_out_hits(self, held_out: frozenset[str]) -> tuple[list[bool], list[bool]] | None:
        """The held-out verdicts, answered by the live model and the phase-1 ("learnt") one:
        per verdict, whether each model's top group is the curator's."""
        cases = [
            (verdict.text, verdict.group_id)
            for key, verdict in self.verdicts.items()
            if key in held_out and verdict.group_id
        ]
        if not cases:
            return None
        return self._hits(self.matchers["live"], cases), self._hits(self.matchers["learnt"], cases)

    def gate(
        self,
        *,
        alpha: float,
        held_out: tuple[list[bool], list[bool]] | None = None,
        reference_label: str | None = None,
    ) -> dict[str, Any]:
        """Live against candidate on each frozen test and the held-out verdicts; where a
        "reference" matcher was added (the version labelled ``reference_label``), reference
        against candidate on the frozen tests too. A row blocks only when the candidate is
        significantly worse on its cases: McNemar's exact one-sided p below ``alpha`` divided
        by the number of rows tested (Bonferroni), so that one of many rows failing by chance
        stays below ``alpha`` for a candidate that is no worse."""
        if "reference" in self.matchers and not reference_label:
            raise ValueError("a reference matcher needs the label of its version")
        taxonomy_members = list(
            Member.objects.filter(taxonomy=self.taxonomy, source=Member.Source.TAXONOMY)
            .order_by("id")
            .values_list("group_id", "text")
        )
        suite = build_test_suite(taxonomy_members, seed=0, size=settings.SIAMWEB_GATE_SUITE_SIZE)
        frozen = {name: cases for name, cases in suite.items() if name in FROZEN_SETS and cases}
        hits = {
            model: {name: self._hits(matcher, cases) for name, cases in frozen.items()}
            for model, matcher in self.matchers.items()
        }
        pairs: list[tuple[str, str, str, list[bool], list[bool]]] = [
            (name, "frozen", "live", hits["live"][name], hits["candidate"][name]) for name in frozen
        ]
        if "reference" in hits:
            pairs += [
                (name, "drift", "reference", hits["reference"][name], hits["candidate"][name])
                for name in frozen
            ]
        if held_out is not None:
            pairs.append(("held_out_feedback", "feedback", "live", *held_out))
        per_test = alpha / max(len(pairs), 1)
        rows = [
            gate_row(name, suite_name, baseline, before, after, alpha=per_test,
                     against=reference_label if suite_name == "drift" else None)
            for name, suite_name, baseline, before, after in pairs
        ]  # fmt: skip

        judged = [(v.text, v.group_id) for v in self.verdicts.values() if v.group_id]
        verdicts = {
            "count": len(judged),
            "live": self._share_right(self.matchers["live"], judged) if judged else 0.0,
            "candidate": self._share_right(self.matchers["candidate"], judged) if judged else 0.0,
        }
        verdicts["rose"] = bool(judged) and verdicts["candidate"] > verdicts["live"]

        reasons = [row["why"] for row in rows if not row["passed"]]
        if not judged:
            reasons.append("there are no verdicts to learn from")
        elif not verdicts["rose"]:
            reasons.append(
                f"the share of verdicts it gets right by itself did not rise "
                f"({verdicts['live']:.3f} → {verdicts['candidate']:.3f})"
            )
        summary = {
            model: {
                key: round(_mean([scores[f"{name}/{metric}"] for name in frozen]), 4)
                for key, metric in (("mrr", "mrr"), ("p_at_10", "p@10"))
            }
            for model, scores in (
                (model, evaluate(matcher, frozen)) for model, matcher in self.matchers.items()
            )
        }
        return {
            "test": "McNemar exact, one-sided, paired on the same cases",
            "alpha": alpha,
            "alpha_per_test": round(per_test, 6),
            **({"reference_version": reference_label} if "reference" in hits else {}),
            "decision": "reject" if reasons else "promote",
            "reasons": reasons,
            "metrics": rows,
            "frozen_summary": summary,
            "verdicts": verdicts,
        }

    def flips(self) -> dict[str, Any]:
        """Inputs whose top group (by the model alone) changes: fixed, broken, or just changed."""
        inputs = list(
            Input.objects.filter(taxonomy=self.taxonomy)
            .order_by("-id")
            .values_list("text", flat=True)[:FLIP_INPUTS_COMPARED]
        )
        tops = {
            name: [ranking[0] if ranking else None for ranking in matcher.rank(inputs, 1)]
            for name, matcher in self.matchers.items()
        }
        groups = Group.objects.in_bulk(
            {g for top in tops.values() for g in top if g}
            | {v.group_id for v in self.verdicts.values() if v.group_id}
        )
        report: dict[str, Any] = {
            "compared": len(inputs),
            "counts": {"fixed": 0, "broken": 0, "changed": 0, "confirmed_now_wrong": 0},
            "fixed": [],
            "broken": [],
            "changed": [],
        }
        for text, before, after in zip(inputs, tops["live"], tops["candidate"], strict=True):
            verdict = self.verdicts.get(normalize_text(text))
            if verdict is not None and verdict.group_id is not None:
                gold = verdict.group_id
                kind = (
                    "fixed"
                    if before != gold and after == gold
                    else "broken"
                    if before == gold and after != gold
                    else None
                )
            else:
                kind = "changed" if before != after else None
            if kind is None:
                continue
            confirmed = kind == "broken" and verdict.verdict == Judgement.Verdict.CONFIRM
            report["counts"][kind] += 1
            report["counts"]["confirmed_now_wrong"] += confirmed
            if len(report[kind]) < FLIP_ROWS_KEPT:
                report[kind].append(
                    {
                        "input": text,
                        "before": _group_ref(groups.get(before)),
                        "after": _group_ref(groups.get(after)),
                        "curator": _group_ref(groups.get(verdict.group_id)) if verdict else None,
                        "verdict": verdict.verdict if verdict else None,
                        "confirmed": confirmed,
                    }
                )
        # Confirmed items the new model now gets wrong stand out: they come first.
        report["broken"].sort(key=lambda row: not row["confirmed"])
        return report

    @staticmethod
    def _share_right(matcher: HybridMatcher, cases: list[tuple[str, int]]) -> float:
        return sum(_Comparison._hits(matcher, cases)) / len(cases)

    @staticmethod
    def _hits(matcher: HybridMatcher, cases: list[tuple[str, int]]) -> list[bool]:
        """Per case, whether the matcher's top group is the case's."""
        rankings = matcher.rank([text for text, _ in cases], 1)
        return [bool(r) and r[0] == group for r, (_, group) in zip(rankings, cases, strict=True)]


def _final_verdicts(taxonomy: Taxonomy) -> dict[str, _Verdict]:
    """Per judged text, where curators put it: the latest live final verdict wins."""
    found: dict[str, _Verdict] = {}
    rows = (
        Judgement.objects.live()
        .filter(review_item__taxonomy=taxonomy, verdict__in=Judgement.FINAL_VERDICTS)
        .order_by("created_at", "id")
        .values_list(
            "review_item__input__text", "review_item__input__normalized_text", "verdict", "group_id"
        )
    )
    for text, key, verdict, group_id in rows:
        found[key] = _Verdict(text=text, group_id=group_id, verdict=verdict)
    return found


def _frozen_scores(scores: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per model, the frozen suite's gate metrics: each test's accuracy, then MRR and P@10
    averaged over the tests."""
    frozen = {}
    for model, found in scores.items():
        metrics = {
            name: found[f"{name}/accuracy"] for name in FROZEN_SETS if f"{name}/accuracy" in found
        }
        for name, key in (("mrr", "mrr"), ("p_at_10", "p@10")):
            metrics[name] = _mean(
                [found[f"{n}/{key}"] for n in FROZEN_SETS if f"{n}/{key}" in found]
            )
        frozen[model] = metrics
    return frozen


def gate_row(
    name: str,
    suite: str,
    baseline: str,
    before: list[bool],
    after: list[bool],
    *,
    alpha: float,
    against: str | None = None,
) -> dict:
    """One gate row: ``baseline`` ("live" or "reference") against the candidate, case by case,
    with the paired test's numbers and, in words, why it passed or blocked."""
    found = paired_comparison(before, after, alpha=alpha)
    row = {"name": name, "suite": suite, **found}
    if baseline != "live":
        row[baseline] = row.pop("live")
    if against:
        row["against"] = against
    since = f" since {against}" if against else ""
    odds = (
        f"{found['lost']} lost, {found['gained']} gained of {found['n']}; "
        f"p = {found['p_worse']:.4f}, {'below' if found['p_worse'] < alpha else 'not below'} "
        f"{alpha:.4f}"
    )
    if found["significantly_worse"]:
        row["passed"] = False
        row["why"] = f"{name} fell by {-found['delta']:.3f}{since} ({odds}): significantly worse"
    else:
        row["passed"] = True
        change = "fell" if found["delta"] < 0 else "rose" if found["delta"] > 0 else "held"
        amount = f" by {abs(found['delta']):.3f}" if found["delta"] else ""
        row["why"] = f"{name} {change}{amount}{since} ({odds}): within noise or better"
    return row


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _group_ref(group: Group | None) -> dict | None:
    return {"code": group.code, "name": group.name} if group is not None else None


__all__ = [
    "RunStateError",
    "finetune_execute",
    "finetune_run_request",
    "gate_reference",
    "live_version",
    "model_version_rollback",
    "retrain_due_taxonomies",
    "rollback_execute",
    "training_run_promote",
    "training_run_retry",
]
