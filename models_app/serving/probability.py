"""Reads for the match probability: a calibrator fitted on the taxonomy's own verdicts.

A verdict on a prediction says whether its top group was right: confirm of the top group (right),
reassign or none of these (wrong). Each such verdict is one answer with the prediction's top
score and margin; ``models_app.siamese.calibration`` fits the probability on them. Refitted when
verdicts change (a per-process cache keyed by the verdicts' count and newest id), so a fit costs
one query a new verdict, never one a request.
"""

from __future__ import annotations

import threading

from django.db import connection

from annotations.models import Judgement, Prediction, ReviewItem, Taxonomy
from models_app.siamese.calibration import MIN_ANSWERS as MIN_VERDICTS
from models_app.siamese.calibration import Calibrator
from models_app.siamese.encoders import ConfigError

_lock = threading.Lock()
# What ``_verdicts`` selects, counted: the fitted calibrator stands while this stays the same.
# One parameter the taxonomy's id, then ``Judgement.FINAL_VERDICTS``.
VERDICTS_KEY_SQL = (
    f"SELECT COUNT(j.id), MAX(j.id) FROM {Judgement._meta.db_table} j "
    f"JOIN {ReviewItem._meta.db_table} r ON r.id = j.review_item_id "
    f"JOIN {Prediction._meta.db_table} p ON p.id = j.prediction_id "
    "WHERE r.taxonomy_id = %s AND j.undone_at IS NULL AND p.top_score IS NOT NULL "
    f"AND j.verdict IN ({', '.join(['%s'] * len(Judgement.FINAL_VERDICTS))})"
)
_fitted: dict[int, tuple[tuple, Calibrator | None]] = {}


def _verdicts(taxonomy_id: int):
    return Judgement.objects.live().filter(
        review_item__taxonomy_id=taxonomy_id,
        verdict__in=Judgement.FINAL_VERDICTS,
        prediction__top_score__isnull=False,
    )


def taxonomy_calibrator(
    taxonomy: Taxonomy | int, *, key: tuple[int, int | None] | None = None
) -> Calibrator | None:
    """The calibrator of the taxonomy's verdicts (a taxonomy or its id); None until they hold
    right and wrong answers (ten at least). ``key``: their count and newest id, where the
    caller read them already (``VERDICTS_KEY_SQL``)."""
    taxonomy_id = taxonomy if isinstance(taxonomy, int) else taxonomy.id
    if key is None:
        # Plain SQL: the ORM's aggregate cost more than the database.
        with connection.cursor() as cursor:
            cursor.execute(VERDICTS_KEY_SQL, [taxonomy_id, *Judgement.FINAL_VERDICTS])
            key = tuple(cursor.fetchone())
    with _lock:
        cached = _fitted.get(taxonomy_id)
    if cached is not None and cached[0] == key:
        return cached[1]
    if key[0] < MIN_VERDICTS:
        return None  # too few to fit on: no need to read them
    rows = _verdicts(taxonomy_id).values_list(
        "verdict", "group_id", "prediction__top_group_id", "prediction__top_score",
        "prediction__margin",
    )  # fmt: skip
    scores, margins, right = [], [], []
    for verdict, group_id, top_group_id, score, margin in rows:
        scores.append(score)
        margins.append(margin if margin is not None else 1.0)
        right.append(verdict == Judgement.Verdict.CONFIRM and group_id == top_group_id)
    try:
        calibrator = Calibrator.fit(scores, margins, right)
    except ConfigError:
        calibrator = None
    with _lock:
        _fitted[taxonomy_id] = (key, calibrator)
    return calibrator


def review_items_probability(items) -> dict[int, float]:
    """The match probability of each open item's top group, by item id (review items with their
    prediction loaded, all of one taxonomy); empty while the taxonomy has no calibrator."""
    items = list(items)
    if not items:
        return {}
    calibrator = taxonomy_calibrator(items[0].taxonomy_id)
    if calibrator is None:
        return {}
    return {
        item.id: calibrator.probability(
            item.prediction.top_score,
            item.prediction.margin if item.prediction.margin is not None else 1.0,
        )
        for item in items
        if item.prediction.top_score is not None
    }
