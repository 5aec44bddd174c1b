"""Writes for the review loop, by capability: inputs in and predictions stored (``inputs``),
cards leased (``leases``), verdicts recorded one at a time (``verdicts``) or for a group's batch
(``batch``), verdicts undone and conflicts between curators settled (``undo``). Callers import
from here.

A verdict's curator member serves at once from the live engine's delta
(``models_app.serving.engines``), so no verdict asks for a rebuild: the scheduled check folds
new members into the index in batches (``SIAMWEB_REINDEX_CHECK_SECONDS``), one load per process
instead of one per verdict.
"""

from __future__ import annotations

from annotations.services.review.batch import (
    BatchResult,
    judgements_create_for_group,
)
from annotations.services.review.inputs import (
    inputs_submit,
    review_items_repredict,
)
from annotations.services.review.leases import (
    review_item_claim,
    review_item_release,
    review_items_claim_for_group,
)
from annotations.services.review.undo import (
    judgement_undo,
    judgements_undo,
    review_conflict_resolve,
)
from annotations.services.review.verdicts import (
    VerdictError,
    judgement_create,
)

__all__ = [
    "BatchResult",
    "VerdictError",
    "inputs_submit",
    "judgement_create",
    "judgement_undo",
    "judgements_create_for_group",
    "judgements_undo",
    "review_conflict_resolve",
    "review_item_claim",
    "review_item_release",
    "review_items_claim_for_group",
    "review_items_repredict",
]
