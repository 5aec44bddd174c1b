"""Writes for the review loop, by capability: inputs in and predictions stored (``inputs``),
cards leased (``leases``), verdicts recorded one at a time (``verdicts``) or for a group's batch
(``batch``), verdicts undone and conflicts between curators settled (``undo``). Callers import
from the module that defines what they need.

A verdict's curator member serves at once from the live engine's delta
(``models_app.serving.engines``), so no verdict asks for a rebuild: the scheduled check folds
new members into the index in batches (``SIAMWEB_REINDEX_CHECK_SECONDS``), one load per process
instead of one per verdict.
"""
