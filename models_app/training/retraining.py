"""Corrigible retraining: fine-tune the live model on curator feedback in two phases, gate the
candidate (``models_app.training.gate``) and promote or reject it
(``models_app.training.promotion``); requests, retries and the schedule that starts fine-tunes.
"""

from __future__ import annotations

import logging
import shutil
import time
from datetime import timedelta
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import F, Max, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotations.models import FeedbackPair, Group, Input, Member, Taxonomy
from annotations.services.audit import audit_record
from models_app.models import TrainingRun
from models_app.serving.engines import (
    LiveEngine,
    NoLiveModel,
    encoder_for,
    engine_for_build,
    engine_unstored,
    live_engine,
    live_engine_and_ranker,
)
from models_app.serving.rankers import serving_ranker
from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.encoders import as_stored
from models_app.siamese.progress import Progress
from models_app.siamese.sampling import FeedbackExample
from models_app.siamese.specs import parse_model_spec, parse_search_config
from models_app.siamese.text import comparison_key
from models_app.training.finetune_recipe import (
    FINETUNE_CATCH_UP_SHARE,
    FINETUNE_FRESH_MAX_REPEATS,
    catch_up_feedback,
    finetune_spec,
    half_fresh,
    share_of_budget,
)
from models_app.training.gate import FLIP_INPUTS_COMPARED, FROZEN_SETS, Comparison, gate_reference
from models_app.training.promotion import RunStateError, go_live, live_build, live_version
from models_app.training.ranker_training import held_out_served_hits, ranker_fitted_for
from models_app.training.selectors.runs import run_retried_as
from models_app.training.services.builds import encoder_fit, model_version_store, version_config
from models_app.training.services.indexes import index_build_create
from models_app.training.services.run_clock import RunClock, calibration, encode_rates
from models_app.training.services.runs import (
    RunAbandoned,
    queued_reindex_supersede,
    run_checkpoint_dir,
    run_first_attempt,
    training_run_request,
)
from models_app.training.services.training_data import (
    feedback_examples,
    feedback_last_id,
    held_out_texts,
)

logger = logging.getLogger(__name__)

# --- requests --------------------------------------------------------------------------------


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
        waiting = queued_reindex_supersede(taxonomy=taxonomy, why="superseded by a fine-tune")
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
        TrainingRun.objects.filter(id__in=waiting).update(
            error=f"superseded by fine-tune run {run.id}, which indexes every member"
        )
    return run


def is_pretrained_as_it_comes(version) -> bool:
    """A version that only encoded the taxonomy with a pretrained tower, trained on nothing
    (``PRETRAINED_SPEC``): what a new taxonomy serves until its first training ends."""
    return (version.config.get("training") or {}).get("max_steps") == 0


# Why a pretrained tower as it comes is not fine-tuned on verdicts, in the words the page and
# the API give an admin.
PRETRAINED_LEARNS_BY_RANKER = (
    "is the pretrained tower as it comes: verdicts are learnt by the ranker, refitted on the "
    "ranker worker every {refit} verdicts, and the tower is trained on the taxonomy by its first "
    "training run. A fine-tune of it on a CPU learnt nothing it could keep from 500 real "
    "verdicts (docs/retraining.md)"
)


def finetune_now_request(*, taxonomy: Taxonomy, requested_by) -> TrainingRun | None:
    """An admin's "Fine-tune now": refused while no verdict is new since what the live version
    and the last fine-tune that finished learnt (``feedback_learnt``), whatever that run's
    outcome: a run rejected by the gate on the same verdicts would be run again for nothing;
    and refused for the pretrained tower as it comes, whose verdicts the ranker learns."""
    live = live_version(taxonomy)
    if live is None:
        raise NoLiveModel(taxonomy)
    if is_pretrained_as_it_comes(live):
        raise RunStateError(
            f"{taxonomy.slug}: {live.label} "
            + PRETRAINED_LEARNS_BY_RANKER.format(refit=settings.SIAMWEB_RANKER_REFIT_VERDICTS)
        )
    seen, last_run = feedback_learnt(taxonomy, live=live)
    if not new_verdict_count(taxonomy, after=seen):
        if last_run is not None and last_run.feedback_until > live.feedback_until:
            finished = timezone.localtime(last_run.finished_at).strftime("%Y-%m-%d %H:%M")
            raise RunStateError(
                f"{taxonomy.slug}: no verdict is new since fine-tune run #{last_run.id} "
                f"learnt them ({last_run.get_status_display().lower()}, {finished}), so a "
                "fine-tune would learn nothing it has not; judge some inputs first"
            )
        raise RunStateError(
            f"{taxonomy.slug}: no verdict is new since {live.label} was trained, so a fine-tune "
            "would have nothing to learn; judge some inputs first"
        )
    return finetune_run_request(
        taxonomy=taxonomy, trigger=TrainingRun.Trigger.MANUAL, requested_by=requested_by
    )


# A fine-tune finished when the gate decided: its candidate went live or was turned down.
FINETUNE_FINISHED = (TrainingRun.Status.PROMOTED, TrainingRun.Status.REJECTED)


def feedback_learnt(taxonomy: Taxonomy, *, live) -> tuple[int, TrainingRun | None]:
    """The last feedback pair the live version or the latest finished fine-tune learnt from
    (a rejected one included: its verdicts were tried), and that fine-tune. Verdicts after it
    are what a new fine-tune, scheduled or asked for, would have to learn."""
    last_run = (
        TrainingRun.objects.filter(
            taxonomy=taxonomy,
            kind=TrainingRun.Kind.FINETUNE,
            status__in=FINETUNE_FINISHED,
            feedback_until__isnull=False,
        )
        .order_by("-feedback_until", "-id")
        .first()
    )
    if last_run is None:
        return live.feedback_until, None
    return max(live.feedback_until, last_run.feedback_until), last_run


def training_run_retry(*, run: TrainingRun, actor) -> TrainingRun | None:
    """Queue a failed run again; a fine-tune resumes from the failed run's checkpoints."""
    if run.status != TrainingRun.Status.FAILED:
        raise RunStateError(f"run {run.id} is {run.status}; only a failed run can be retried")
    retried = run_retried_as(run)
    if retried is not None:
        # Its retry resumed from its checkpoints and took its place: a second would train again
        # what the first may already have made live.
        raise RunStateError(
            f"run {run.id} was retried already, as run #{retried.id} ({retried.status}); "
            "retry that one if it failed"
        )
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


def training_run_cancel(*, run: TrainingRun, actor) -> TrainingRun:
    """An admin stops a run: a queued one at once, a running one at its next progress report
    (a training's next steps, an index's next batch, a fine-tune's report before its switch),
    which comes before anything goes live.
    Refused for a run that has ended; asked again, nothing more happens. Audited."""
    now = timezone.now()
    runs = TrainingRun.objects.filter(id=run.id)
    # A fine-tune fixes its verdicts when it starts; one stopped before keeps those there are
    # now, which the schedule then counts as tried (``stopped_until``).
    until = feedback_last_id(run.taxonomy) if run.kind == TrainingRun.Kind.FINETUNE else None
    stopped = runs.filter(status=TrainingRun.Status.QUEUED).update(
        status=TrainingRun.Status.CANCELLED,
        cancel_requested_at=now,
        feedback_until=until,
        error="cancelled by an admin before it started",
        finished_at=now,
    )
    if not stopped:
        stopped = runs.filter(
            status__in=[TrainingRun.Status.RUNNING, TrainingRun.Status.EVALUATED],
            cancel_requested_at__isnull=True,
        ).update(
            cancel_requested_at=now,
            feedback_until=Coalesce(F("feedback_until"), Value(until)),
        )
    run.refresh_from_db()
    if not stopped:
        if run.status in TrainingRun.ACTIVE_STATUSES:
            return run  # asked already: it stops at its next report
        raise RunStateError(
            f"run {run.id} is {run.get_status_display().lower()}: only a queued or running run "
            "can be cancelled"
        )
    audit_record(actor=actor, action="training_run.cancel", obj=run, taxonomy=run.taxonomy,
                 after={"status": run.status})  # fmt: skip
    return run


def stopped_until(taxonomy: Taxonomy) -> int:
    """The last feedback pair any cancelled or failed fine-tune kept (0 without one): the
    schedule waits for as many new verdicts after it as it needs to start one, so that a
    cancel is not undone by the next check, nor a fine-tune that fails (out of memory, past
    its time limit) started again on the same verdicts every check. An admin's Retry resumes
    a failed one from its checkpoints."""
    stopped = TrainingRun.objects.filter(
        taxonomy=taxonomy,
        kind=TrainingRun.Kind.FINETUNE,
        status__in=(TrainingRun.Status.CANCELLED, TrainingRun.Status.FAILED),
    )
    return stopped.aggregate(until=Max("feedback_until"))["until"] or 0


def retrain_due_taxonomies(*, now=None) -> list[TrainingRun]:
    """Beat: start a fine-tune where enough new verdicts arrived, or where the live version is
    old and at least one verdict is new; never of the pretrained tower as it comes. "New"
    means after what the live version and the last fine-tune already used, so a rejected
    candidate is not retried on the same verdicts."""
    now = now or timezone.now()
    started = []
    for taxonomy in Taxonomy.objects.filter(deployment__isnull=False):
        live = live_version(taxonomy)
        if is_pretrained_as_it_comes(live):
            continue  # the ranker learns its verdicts; its first training trains the tower
        seen, _ = feedback_learnt(taxonomy, live=live)
        new_verdicts = new_verdict_count(taxonomy, after=max(seen, stopped_until(taxonomy)))
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
       earlier ones, and a fixed budget spread evenly over a growing pile of verdicts learns
       each round's corrections less well (docs/decisions/finetune-recipe.md).
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
    spec = finetune_spec(parent, run.config, new_verdicts=new_verdicts)
    encoder_config, training = parse_model_spec(spec)
    held_out = held_out_texts(taxonomy, after=parent.feedback_until, until=until)
    catch_up = FINETUNE_CATCH_UP_SHARE if held_out else 0.0
    started = time.monotonic()
    laps = _Laps()
    live_encoder = encoder_for(parent)
    reference = gate_reference(parent)
    clock = _finetune_clock(
        taxonomy,
        progress,
        live_encoder,
        held_out=len(held_out),
        catch_up=catch_up,
        learn_seconds=share_of_budget(training, 1 - catch_up).max_minutes * 60,
        reference=reference != parent,
    )
    progress("pairs", 1.0, clock.left())

    def learnable(after: int, up_to: int) -> list[FeedbackExample]:
        return [
            example
            for example in feedback_examples(
                taxonomy,
                after=after,
                until=up_to,
                keep=lambda text: comparison_key(text) not in held_out,
            )
            # A later verdict's evidence may be a held-out text's curator member.
            if comparison_key(example.member_text or "") not in held_out
        ]

    learnt = encoder_fit(
        taxonomy=taxonomy,
        encoder_config=encoder_config,
        training=share_of_budget(training, 1 - catch_up),
        feedback=half_fresh(
            fresh=learnable(parent.feedback_until, until),
            rest=learnable(0, min(parent.feedback_until, until)),
            max_repeats=FINETUNE_FRESH_MAX_REPEATS,
        ),
        left_out_members=held_out,
        parent=live_encoder,
        checkpoint_dir=checkpoints / "learn",
        # Members change with every verdict: a retry's data may differ from the first attempt's.
        discard_stale_checkpoint=True,
        progress=clock.phase("learn"),
    )
    laps.lap("learn")
    clock.done("learn")
    learn_steps = learnt.result.steps
    resumed_from_step = learnt.result.metrics.get("resumed_from_step", 0.0)
    comparison = Comparison.build(taxonomy)
    comparison.add(
        "live", live_encoder, parse_search_config(parent.config), index_build=live_build(taxonomy)
    )
    held_out_hits = held_out_served = None
    final = learnt
    if held_out:
        clock.phase("held_out")("evaluate", 0.0, None)
        # As it would be served (stored smaller than it trains), as the live one is.
        # Phase 1's model over every member, in memory: it answers the held-out verdicts alone
        # and with a ranker fitted for it.
        learnt_engine = engine_unstored(
            taxonomy,
            encoder=as_stored(learnt.result.encoder),
            search_config=parse_search_config(spec),
            label="the fine-tune's first phase",
        )
        comparison.add(
            "learnt",
            learnt_engine.encoder,
            parse_search_config(spec),
            vectors=learnt_engine.index.vectors_of(np.array(comparison.member_ids, np.int64)),
        )
        held_out_hits = comparison.held_out_hits(held_out)
        comparison.drop("learnt")
        held_out_served = _held_out_served(taxonomy, parent, learnt_engine, held_out)
        del learnt_engine
        laps.lap("held_out")
        clock.done("held_out")
        final = encoder_fit(
            taxonomy=taxonomy,
            encoder_config=encoder_config,
            training=share_of_budget(training, catch_up),
            feedback=catch_up_feedback(
                feedback_examples(taxonomy, until=until, keep=lambda text: True), held_out
            ),
            # Phase 1's weights as trained, not its blend (which the held-out row measured):
            # the result is blended toward the live version once, as a one-phase run is.
            parent=learnt.result.trained_encoder,
            anchor=live_encoder,
            checkpoint_dir=checkpoints / "catch_up",
            discard_stale_checkpoint=True,
            progress=_as_stage(CATCH_UP_STAGE, clock.phase("catch_up")),
        )
        del learnt  # phase 1's two models, blended and as trained, are not needed any more
        laps.lap("catch_up")
        clock.done("catch_up")
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
    # Named on the run at once, as a build's is: a cancel or failure while indexing it then
    # deletes it (``run_version_discard``) instead of leaving a version no run names.
    TrainingRun.objects.filter(id=run.id).update(model_version=candidate)
    build = index_build_create(model_version=candidate, progress=clock.phase("index"))
    TrainingRun.objects.filter(id=run.id).update(index_build=build)
    laps.lap("index")
    clock.done("index")

    clock.phase("gate")("evaluate", 0.5, None)
    # The candidate as stored and served (its index was just built with it), not as trained: the
    # gate compares what would go live with what is live.
    comparison.add(
        "candidate",
        encoder_for(candidate),
        parse_search_config(candidate.config),
        index_build=build,
    )
    if reference != parent:
        comparison.add("reference", encoder_for(reference), parse_search_config(reference.config))
    _serve_both(comparison, taxonomy, parent, build)
    report = comparison.gate(
        alpha=settings.SIAMWEB_GATE_ALPHA,
        held_out=held_out_hits,
        held_out_served=held_out_served,
        reference_label=reference.label,
    )
    if reference != parent:
        comparison.drop("reference")
    report["new_verdicts"] = new_verdicts
    laps.lap("gate")
    clock.done("gate")
    report["stage_seconds"] = laps.seconds
    # What the run's time left was worked out from, to set beside what each stage took.
    report["eta"] = clock.report()
    candidate.metrics = {**candidate.metrics, "gate": report}
    candidate.save(update_fields=["metrics"])
    given_up = (TrainingRun.Status.FAILED, TrainingRun.Status.CANCELLED)
    evaluated = (
        TrainingRun.objects.filter(id=run.id)
        .exclude(status__in=given_up)
        .update(
            status=TrainingRun.Status.EVALUATED, gate_report=report, heartbeat_at=timezone.now()
        )
    )
    if not evaluated:
        raise RunAbandoned("given up on as silent during the gate")
    now_live = live_version(taxonomy)
    if now_live != parent:
        # An admin's switch raced this run's request (a switch waits for an active run): the
        # gate compared with a pair no longer live, and going live would undo the switch.
        why = (
            f"{now_live.label if now_live else 'no version'} went live during the run, which "
            f"started from {parent.label}: fine-tune again to measure against it"
        )
        report = {**report, "decision": "reject", "reasons": [*report["reasons"], why]}
        candidate.metrics = {**candidate.metrics, "gate": report}
        candidate.save(update_fields=["metrics"])
        TrainingRun.objects.filter(id=run.id).update(gate_report=report)
    if report["decision"] != "promote":
        return {"status": TrainingRun.Status.REJECTED}

    clock.phase("promote")("promote", 0.0, None)
    flips = comparison.flips()
    laps.lap("flips")
    # The last report before the switch: a cancel asked while the flips were listed stops here.
    clock.phase("promote")("promote", 1.0, 0.0)
    go_live(build=build, actor=None)
    return {
        "status": TrainingRun.Status.PROMOTED,
        "flip_report": flips,
        "gate_report": {**report, "stage_seconds": laps.seconds},
    }


def _live_pair_of(taxonomy: Taxonomy, parent) -> tuple[LiveEngine, int | None] | None:
    """The live engine and ranker id, when the live engine is ``parent``'s and loads; else None
    (logged), and the gate compares the models alone, as its report then says."""
    try:
        live, ranker_id = live_engine_and_ranker(taxonomy)
    except (ArtifactError, OSError) as exc:
        logger.warning("%s: the gate compares the models alone: %s", taxonomy.slug, exc)
        return None
    if live is None or live.model_version_id != parent.id:
        return None
    return live, ranker_id


def _serve_both(comparison: Comparison, taxonomy: Taxonomy, parent, build) -> None:
    """Real traffic as users would see it: the live pair, and the candidate with a ranker fitted
    for it on every verdict (as the worker fits one seconds after a promotion)."""
    live_pair = _live_pair_of(taxonomy, parent)
    if live_pair is None:
        return
    try:
        candidate = engine_for_build(taxonomy, build)
    except (ArtifactError, OSError) as exc:
        logger.warning("%s: the gate compares the models alone: %s", taxonomy.slug, exc)
        return
    live, ranker_id = live_pair
    comparison.add_served("live", live, serving_ranker(live, ranker_id))
    comparison.add_served("candidate", candidate, ranker_fitted_for(candidate, taxonomy))


def _held_out_served(
    taxonomy: Taxonomy, parent, learnt: LiveEngine, held_out: frozenset[str]
) -> tuple[list[bool], list[bool]] | None:
    """The held-out verdicts as users would see them: the live model and phase 1's, each with
    a ranker fitted for it on the other verdicts (``ranker_training.held_out_served_hits``)."""
    live_pair = _live_pair_of(taxonomy, parent)
    if live_pair is None:
        return None
    found = held_out_served_hits(taxonomy, [live_pair[0], learnt], held_out)
    return None if found is None else (found[0], found[1])


# The stage a fine-tune's second training shows: not "train" again after "evaluate", which
# read as a run that went back (run panel, STAGE_MEANINGS).
CATCH_UP_STAGE = "catch up"


def _as_stage(stage: str, progress: Progress) -> Progress:
    """``progress`` with every report made as ``stage`` (a phase's training and its periodic
    validation show as one stage)."""
    return lambda _stage, fraction, eta=None: progress(stage, fraction, eta)


def _finetune_clock(
    taxonomy: Taxonomy,
    progress: Progress,
    encoder,
    *,
    held_out: int,
    catch_up: float,
    learn_seconds: float,
    reference: bool,
) -> RunClock:
    """A fine-tune's phases with the seconds each is expected to take, from the live model's
    rates measured now on the taxonomy's own titles. Phase 1 takes its time budget until its
    training says its time left from its pace; the held-out check encodes every member
    with the phase-1 model and answers the held-out verdicts with two, alone and with a ranker
    fitted for each on every judged text; the catch-up trains on
    ``catch_up`` of the budget, as fast as phase 1 did; the index encodes every member and
    group description with the candidate (the same network, so the same rate); the gate answers
    the frozen suite twice (its hits, then its ranks) and every verdict with each model, and
    encodes every member with the reference version when that is another, fits a ranker for
    the candidate on every verdict, and answers the recent inputs with live and candidate as
    served (a promotion's flip report reuses those answers).
    Each is then scaled by how much longer than its counted work
    that phase took in the taxonomy's last finished fine-tune (``run_clock.calibration``)."""
    members = list(Member.objects.filter(taxonomy=taxonomy).values_list("text", flat=True))
    rates = encode_rates(encoder, live_engine(taxonomy), members[:: max(1, len(members) // 256)])
    groups = Group.objects.filter(taxonomy=taxonomy).count()
    verdicts = new_verdict_count(taxonomy, after=0)
    suite = min(
        len(FROZEN_SETS) * settings.SIAMWEB_GATE_SUITE_SIZE, len(FROZEN_SETS) * len(members)
    )
    models = 3 if reference else 2
    inputs = min(Input.objects.filter(taxonomy=taxonomy).count(), FLIP_INPUTS_COMPARED)
    phases = {
        "learn": learn_seconds,  # its time budget, until training says its own time left
        # Every judged text is searched again by live and phase 1 for the rankers fitted there.
        "held_out": (len(members) * rates.encode + 2 * (held_out + verdicts) * rates.answer)
        if held_out
        else 0,
        "catch_up": 0.0,
        "index": (len(members) + groups) * rates.encode,
        # The recent inputs answered by live and candidate: the gate weighs the answers moved
        # (gate.Comparison.answers_moved) and the promotion's flip report reuses them.
        "gate": models * (2 * suite + verdicts) * rates.answer
        + (len(members) * rates.encode if reference else 0.0)
        + (2 * inputs + verdicts) * rates.answer,
        "promote": 0.0,
    }
    last = (
        TrainingRun.objects.filter(
            taxonomy=taxonomy, kind=TrainingRun.Kind.FINETUNE, status__in=FINETUNE_FINISHED
        )
        .order_by("-finished_at", "-id")
        .values_list("gate_report", flat=True)
        .first()
    ) or {}
    took = dict(last.get("stage_seconds") or {})
    if "flips" in took:  # the promotion's lap
        took["promote"] = took.pop("flips")
    return RunClock(
        progress,
        phases,
        like={"catch_up": ("learn", catch_up / (1 - catch_up))},
        rates={"encode_seconds_per_text": rates.encode, "answer_seconds_per_text": rates.answer},
        factors=calibration(last.get("eta"), took),
    )


class _Laps:
    """Seconds each stage of a run took, for the run's report."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._mark = time.monotonic()

    def lap(self, stage: str) -> None:
        now = time.monotonic()
        self.seconds[stage] = round(now - self._mark, 1)
        self._mark = now
