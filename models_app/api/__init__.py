"""REST API, version 1, for models: versions (and which one is live) and training runs.

Curators read; only admins make a version live, start a run (build, reindex, fine-tune), roll
back to an earlier version, force a rejected candidate live or retry a failed run. See
annotations/api/ for the conventions every view follows. A refusal about the state of things
(a run already active, a run or version in the wrong state) is a 409 naming what is wrong.

By resource: ``base`` (choice fields, the querysets the views read, the 409s), ``versions``
(versions, making one live, rollback), ``runs`` (training runs), ``reports`` (a run's gate and
flip reports). Callers import from here.
"""

from __future__ import annotations

from models_app.api.base import (
    TrainingRunKindField,
    TrainingRunRequestKindField,
    TrainingRunStatusField,
    TrainingRunTriggerField,
)
from models_app.api.reports import (
    FlipCountsSerializer,
    FlipGroupSerializer,
    FlipReportSerializer,
    FlipRowSerializer,
    GateMetricSerializer,
    GateReportSerializer,
    GateVerdictsSerializer,
)
from models_app.api.runs import (
    TrainingRunDetailApi,
    TrainingRunDetailSerializer,
    TrainingRunListRequestApi,
    TrainingRunPromoteApi,
    TrainingRunRetryApi,
    TrainingRunSerializer,
)
from models_app.api.versions import (
    ModelVersionActivateApi,
    ModelVersionDetailApi,
    ModelVersionListApi,
    ModelVersionRollbackApi,
    ModelVersionSerializer,
)

__all__ = [
    "FlipCountsSerializer",
    "FlipGroupSerializer",
    "FlipReportSerializer",
    "FlipRowSerializer",
    "GateMetricSerializer",
    "GateReportSerializer",
    "GateVerdictsSerializer",
    "ModelVersionActivateApi",
    "ModelVersionDetailApi",
    "ModelVersionListApi",
    "ModelVersionRollbackApi",
    "ModelVersionSerializer",
    "TrainingRunDetailApi",
    "TrainingRunDetailSerializer",
    "TrainingRunKindField",
    "TrainingRunListRequestApi",
    "TrainingRunPromoteApi",
    "TrainingRunRequestKindField",
    "TrainingRunRetryApi",
    "TrainingRunSerializer",
    "TrainingRunStatusField",
    "TrainingRunTriggerField",
]
