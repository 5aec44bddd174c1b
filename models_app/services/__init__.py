"""Writes for models, by capability: the data a model learns from (``training_data``), model
versions fitted, stored and imported (``builds``), indexes and the live pointer (``indexes``),
and training runs (``runs``). Callers import from here; a module of the package imports its
siblings directly."""

from __future__ import annotations

from models_app.services.builds import (
    SHIPPED_INFO,
    STUDENT_INPUTS,
    EncoderFit,
    encoder_fit,
    model_version_create,
    model_version_evaluate,
    model_version_fit,
    model_version_import,
    model_version_store,
    version_config,
)
from models_app.services.indexes import (
    KEEP_INDEX_BUILDS,
    deployment_activate,
    index_build_create,
    index_builds_prune,
    member_vectors,
    taxonomy_needs_reindex,
)
from models_app.services.runs import (
    EXECUTE_TRAINING_RUN,
    PROGRESS_BANDS,
    first_training_request,
    run_checkpoint_dir,
    run_first_attempt,
    run_progress_overall,
    taxonomy_has_trained_version,
    taxonomy_model_refresh,
    training_run_enqueue,
    training_run_progress_writer,
    training_run_request,
    training_runs_fail_stale,
    training_runs_resend_queued,
)
from models_app.services.training_data import (
    Progress,
    feedback_examples,
    feedback_is_held_out,
    feedback_last_id,
    held_out_texts,
    member_rows,
    no_progress,
)
from models_app.serving.engines import NoLiveModel

__all__ = [
    "EXECUTE_TRAINING_RUN",
    "KEEP_INDEX_BUILDS",
    "PROGRESS_BANDS",
    "SHIPPED_INFO",
    "STUDENT_INPUTS",
    "EncoderFit",
    "NoLiveModel",
    "Progress",
    "deployment_activate",
    "encoder_fit",
    "feedback_examples",
    "feedback_is_held_out",
    "feedback_last_id",
    "first_training_request",
    "held_out_texts",
    "index_build_create",
    "index_builds_prune",
    "member_rows",
    "member_vectors",
    "model_version_create",
    "model_version_evaluate",
    "model_version_fit",
    "model_version_import",
    "model_version_store",
    "no_progress",
    "run_checkpoint_dir",
    "run_first_attempt",
    "run_progress_overall",
    "taxonomy_has_trained_version",
    "taxonomy_model_refresh",
    "taxonomy_needs_reindex",
    "training_run_enqueue",
    "training_run_progress_writer",
    "training_run_request",
    "training_runs_fail_stale",
    "training_runs_resend_queued",
    "version_config",
]
