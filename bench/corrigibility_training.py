"""The training runs of bench/corrigibility_onet.py, carried out in-process as the training worker
would: the starting model's recipe and its BUILD run, and the fine-tune after each round."""

from __future__ import annotations

import time

ENCODER = {"kind": "ngram_bag", "buckets": 262144, "embedding_dim": 128, "output_dim": 128}
# docs/models/onet.json, the shipped model's recipe, with the time budget from --minutes and an
# evaluation every 250 steps, not 1,000: a 5-minute budget on a busy 2-core CPU may not reach
# step 1,000, and a build that never evaluated cannot store its metrics on PostgreSQL.
TRAINING = {
    "loss": "sdml",
    "batch_size": 512,
    "max_steps": 100000,
    "eval_every": 250,
    "patience": 5,
    "typo_share": 0.3,
    "extra_words_share": 0.3,
    "synonym_share": 0.2,
    "seed": 0,
}


def build_starting_model(taxonomy, *, minutes: float, eval_every: int):
    """Train the starting model on the reduced taxonomy through a BUILD run; it goes live."""
    from models_app.models import TrainingRun
    from models_app.training.run_execution import training_run_execute
    from models_app.training.services.runs import training_run_request

    training = {**TRAINING, "max_minutes": minutes, "eval_every": eval_every}
    spec = {"encoder": ENCODER, "training": training}
    started = time.perf_counter()
    run = training_run_request(
        taxonomy=taxonomy, kind=TrainingRun.Kind.BUILD, config=spec, enqueue=False
    )
    run = training_run_execute(run_id=run.id)
    if run.status != TrainingRun.Status.SUCCEEDED:
        raise SystemExit(f"the starting model's build run failed: {run.error}")
    version = run.model_version
    print(
        f"starting model {version.label}: {version.metrics.get('train_seconds')} s of training, "
        f"stopped because {version.metrics.get('stopped_because')} "
        f"({time.perf_counter() - started:.0f} s with index and evaluation)"
    )
    return run


# --- the retrain after a round ---------------------------------------------------------------


def retrain(taxonomy, admin, *, last_verdict_at: float) -> dict:
    """Act as the training worker right after the last verdict: run what the verdicts queued
    (their index refresh), then a fine-tune, to PROMOTED or REJECTED. Seconds from the last
    verdict's response."""
    from models_app.models import TrainingRun
    from models_app.training import retraining
    from models_app.training.run_execution import training_run_execute

    queued_seconds = 0.0
    queued_kinds = []
    for run in TrainingRun.objects.filter(
        taxonomy=taxonomy, status=TrainingRun.Status.QUEUED
    ).order_by("id"):
        started = time.perf_counter()
        done = training_run_execute(run_id=run.id)
        queued_seconds += time.perf_counter() - started
        queued_kinds.append(f"{run.kind}:{done.status if done else 'not claimed'}")
    started = time.perf_counter()
    run = retraining.finetune_run_request(
        taxonomy=taxonomy, trigger=TrainingRun.Trigger.MANUAL, requested_by=admin, enqueue=False
    )
    if run is None:
        active = TrainingRun.objects.filter(
            taxonomy=taxonomy, status__in=TrainingRun.ACTIVE_STATUSES
        ).first()
        raise SystemExit(f"no fine-tune: another run is active ({active})")
    training_run_execute(run_id=run.id)
    run.refresh_from_db()
    finished = time.perf_counter()
    gate = run.gate_report or {}
    return {
        "run_id": run.id,
        "status": run.status,
        "error": run.error,
        "decision": gate.get("decision"),
        "reasons": gate.get("reasons", []),
        "gate_metrics": gate.get("metrics", []),
        "gate_verdicts": gate.get("verdicts"),
        "new_verdicts": gate.get("new_verdicts"),
        "flip_counts": (run.flip_report or {}).get("counts"),
        "candidate": run.model_version.label if run.model_version else None,
        "candidate_train": {
            key: (run.model_version.metrics or {}).get(key)
            for key in ("train_seconds", "stopped_because", "steps")
        }
        if run.model_version
        else None,
        "stage_seconds": gate.get("stage_seconds"),
        "queued_runs": queued_kinds,
        "queued_runs_seconds": round(queued_seconds, 1),
        "finetune_run_seconds": round(finished - started, 1),
        "verdict_to_done_seconds": round(finished - last_verdict_at, 1),
    }
