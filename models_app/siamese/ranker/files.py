"""A fitted ranker on disk: its weights and calibration (``ranker.json``) and the verdict
history its features were computed with (``history.npz``); and the starter ranker the
project ships, every taxonomy's cold start."""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path

import numpy as np

from models_app.siamese.artifacts import DAMAGED_FILE_ERRORS, ArtifactError
from models_app.siamese.ranker.model import LinearRanker, hand_prior
from models_app.siamese.ranker.verdict_history import VerdictHistory

logger = logging.getLogger(__name__)

RANKER_FILE = "ranker.json"
HISTORY_FILE = "history.npz"
# Weights and calibration fitted on real labelled vacancy titles (``bench/starter_ranker.py``;
# docs/decisions/starter-ranker.md): no title, only numbers.
STARTER_FILE = Path(__file__).resolve().parent.parent / "resources" / "starter_ranker.json"


def save_ranker(folder: Path, ranker: LinearRanker, history: VerdictHistory) -> None:
    """The ranker and the verdict history its features were computed with, in ``folder``."""
    folder = Path(folder)
    (folder / RANKER_FILE).write_text(json.dumps(ranker.as_dict()), encoding="utf-8")
    counts = {
        "confirmed": {str(g): n for g, n in history.confirmed.items()},
        "rejected": {str(g): n for g, n in history.rejected.items()},
        "group_count": history.group_count,
    }
    with (folder / HISTORY_FILE).open("wb") as handle:
        np.savez(
            handle,
            counts=np.array(json.dumps(counts)),
            rejected_groups=np.asarray(history.rejected_groups, np.int64),
            rejected_vectors=np.asarray(history.rejected_vectors, np.float32),
        )


def load_ranker(folder: Path) -> tuple[LinearRanker, VerdictHistory]:
    """What ``save_ranker`` wrote; ``ArtifactError`` when anything is missing or damaged."""
    ranker = load_linear_ranker(folder)
    try:
        with np.load(Path(folder) / HISTORY_FILE, allow_pickle=False) as stored:
            counts = json.loads(str(stored["counts"]))
            groups = np.asarray(stored["rejected_groups"], np.int64)
            vectors = np.asarray(stored["rejected_vectors"], np.float32)
        history = VerdictHistory(
            confirmed={int(g): int(n) for g, n in counts["confirmed"].items()},
            rejected={int(g): int(n) for g, n in counts["rejected"].items()},
            rejected_groups=groups,
            rejected_vectors=vectors.reshape(len(groups), -1) if len(groups) else vectors,
            group_count=int(counts["group_count"]),
        )
    except DAMAGED_FILE_ERRORS as exc:
        raise ArtifactError(f"the verdict history in {folder} cannot be read: {exc}") from None
    if not np.isfinite(history.rejected_vectors).all():
        raise ArtifactError(f"the verdict history in {folder} holds non-finite vectors")
    return ranker, history


def load_linear_ranker(folder: Path) -> LinearRanker:
    """The ranker of ``folder`` alone; ``ArtifactError`` when it cannot be read or used."""
    return load_linear_ranker_file(Path(folder) / RANKER_FILE)


@functools.cache
def cold_start_ranker() -> LinearRanker:
    """What every taxonomy answers with before a ranker of its own is fitted: the shipped
    starter, calibrated, so a probability is shown from the first answer. Read once a process;
    a starter missing, damaged or of another feature set is logged once and the hand prior
    ranks instead, with no probability, until the taxonomy's own ranker is fitted."""
    try:
        return load_linear_ranker_file(STARTER_FILE)
    except ArtifactError as exc:
        logger.error(
            "the starter ranker cannot serve, the hand prior ranks without a probability: %s", exc
        )
        return hand_prior()


def load_linear_ranker_file(path: Path) -> LinearRanker:
    """A ranker stored as one JSON file (the starter); ``ArtifactError`` when unusable."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{path} cannot be read: {exc}") from None
    return LinearRanker.from_dict(raw)
