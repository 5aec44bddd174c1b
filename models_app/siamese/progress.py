"""How long work reports how far it has come: every training, build, index and run stage calls a
``Progress`` with its stage's name, the fraction of it done and the seconds left when known."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

Progress = Callable[[str, float, float | None], None]


def no_progress(stage: str, fraction: float, eta: float | None = None) -> None:
    return None


# Texts encoded between two progress reports: a multiple of every encoder's batch, so that the
# vectors are those one call over all the texts gives.
ENCODE_CHUNK = 4096


def encode_reporting(encoder, texts: Sequence[str], progress: Progress, stage: str) -> np.ndarray:
    """``encoder.encode(texts)``, reporting ``stage``'s fraction done and the seconds left after
    each chunk: encoding a taxonomy with a tower takes minutes a bar should show moving."""
    started = time.monotonic()
    parts = []
    for start in range(0, len(texts), ENCODE_CHUNK):
        parts.append(encoder.encode(list(texts[start : start + ENCODE_CHUNK])))
        done = min(start + ENCODE_CHUNK, len(texts))
        elapsed = time.monotonic() - started
        progress(stage, done / len(texts), elapsed / done * (len(texts) - done))
    if not parts:
        return encoder.encode([])
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def budget_fraction(step: int, max_steps: int, started: float, max_minutes: float) -> float:
    """How far a training is through whichever of its budgets ends it first: its steps, or
    its minutes (a run on a slow machine stops by time long before its last step)."""
    by_steps = step / max_steps if max_steps else 1.0
    by_time = (time.monotonic() - started) / (max_minutes * 60) if max_minutes else 0.0
    return min(max(by_steps, by_time), 1.0)
