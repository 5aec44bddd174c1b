"""The ranker a live engine answers with: the taxonomy's live ranker when it was fitted for the
engine's model version, else the cold start (the starter ranker, fitted on real labelled titles:
what serves before the first fit, and between a promotion and the fit for the new model). Each
ranker is read from disk once per process.

A ranker whose files are missing, damaged or of another feature set is logged once and the cold
start serves: an answer ranked by it is the product's answer before any verdict, never a 500.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from models_app.models import RankerVersion
from models_app.serving.engines import LiveEngine, artifact_path
from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.ranker.files import cold_start_ranker, load_ranker
from models_app.siamese.ranker.model import LinearRanker
from models_app.siamese.ranker.verdict_history import VerdictHistory

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_loaded: dict[int, ServingRanker | None] = {}  # by ranker version id; None: cannot serve
_NOT_READ = object()
_MAX_LOADED = 8


@dataclass(frozen=True)
class ServingRanker:
    ranker: LinearRanker
    history: VerdictHistory | None
    version_id: int | None = None  # None: the model's prior
    model_version_id: int | None = None


def engine_prior(engine: LiveEngine) -> ServingRanker:
    """What answers before the taxonomy has a ranker of its own for ``engine``'s model: the
    starter ranker (``cold_start_ranker``), with no verdict history."""
    return ServingRanker(cold_start_ranker(), None)


def serving_ranker(engine: LiveEngine, ranker_id: int | None) -> ServingRanker:
    """The ranker to answer with beside ``engine`` (``ranker_id``: the live pointer's)."""
    if ranker_id is None:
        return engine_prior(engine)
    with _lock:
        found = _loaded.get(ranker_id, _NOT_READ)
    if found is _NOT_READ:
        found = _load(ranker_id)
        with _lock:
            if len(_loaded) >= _MAX_LOADED:
                _loaded.pop(next(iter(_loaded)))
            # A ranker that cannot serve is remembered too: logged once, not on every request.
            _loaded[ranker_id] = found
    if found is None or found.model_version_id != engine.model_version_id:
        return engine_prior(engine)  # unusable, or fitted for another model's scores
    return found


def _load(ranker_id: int) -> ServingRanker | None:
    version = RankerVersion.objects.filter(id=ranker_id).first()
    if version is None:
        return None
    try:
        ranker, history = load_ranker(artifact_path(version.artifact_path))
    except ArtifactError as exc:
        logger.error(
            "%s cannot serve, the cold start answers instead until it is fitted again: %s",
            version,
            exc,
        )
        return None
    return ServingRanker(ranker, history, version.id, version.model_version_id)


def forget_loaded_rankers() -> None:
    with _lock:
        _loaded.clear()
