"""Reads for the Models pages: the live version, every version, the runs and their reports.

Everything here is bounded by what a taxonomy has few of (versions, runs): one query each, with
the rows they show joined in, so a page costs the same however many inputs and verdicts exist.

By subject: ``versions``, ``runs``, ``reports`` (a version's test suite, a run's gate and flip
reports), ``charts`` (the history and training curves). Callers import from here.
"""

from __future__ import annotations

from models_app.selectors.charts import (
    HISTORY_RUNS,
    run_training_chart,
    taxonomy_history_chart,
)
from models_app.selectors.reports import (
    FLIP_SECTIONS,
    GATE_METRIC_LABELS,
    PRIMARY_METRIC,
    RUN_STAGE_ORDER,
    SUITE_SETS,
    FlipReport,
    FlipSection,
    GateReport,
    GateRow,
    SuiteRow,
    flip_report_of,
    gate_report_of,
    suite_key_metrics,
    suite_primary,
    suite_rows,
)
from models_app.selectors.runs import (
    RECENT_RUNS,
    RunRow,
    duration_text,
    run_is_active,
    training_run_active,
    training_run_get,
    training_runs_recent,
)
from models_app.selectors.versions import (
    VERSIONS_PER_PAGE,
    VersionRow,
    gate_candidate_metrics,
    live_version_get,
    model_version_get,
    model_version_was_live,
    model_versions_page,
    never_live_version_ids,
    taxonomies_for_models,
)

__all__ = [
    "FLIP_SECTIONS",
    "GATE_METRIC_LABELS",
    "HISTORY_RUNS",
    "PRIMARY_METRIC",
    "RECENT_RUNS",
    "RUN_STAGE_ORDER",
    "SUITE_SETS",
    "VERSIONS_PER_PAGE",
    "FlipReport",
    "FlipSection",
    "GateReport",
    "GateRow",
    "RunRow",
    "SuiteRow",
    "VersionRow",
    "duration_text",
    "flip_report_of",
    "gate_candidate_metrics",
    "gate_report_of",
    "live_version_get",
    "model_version_get",
    "model_version_was_live",
    "model_versions_page",
    "never_live_version_ids",
    "run_is_active",
    "run_training_chart",
    "suite_key_metrics",
    "suite_primary",
    "suite_rows",
    "taxonomies_for_models",
    "taxonomy_history_chart",
    "training_run_active",
    "training_run_get",
    "training_runs_recent",
]
