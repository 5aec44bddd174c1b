"""How far a probability is from what it claims: of the answers given p, about p should be
right. The expected calibration error (ECE) weighs each probability bin's gap between its mean
probability and the share right in it by its answers."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def reliability(
    probabilities: Sequence[float], correct: Sequence[bool], *, bins: int = 10
) -> list[dict[str, float]]:
    """Per equal-width bin of probability: the answers in it, their mean probability and the
    share of them that were right."""
    p, y = np.asarray(probabilities, float), np.asarray(correct, float)
    rows = []
    for i in range(bins):
        low, high = i / bins, (i + 1) / bins
        inside = (p >= low) & ((p < high) if i < bins - 1 else (p <= high))
        if inside.any():
            rows.append({
                "low": low, "high": high, "count": int(inside.sum()),
                "mean_probability": float(p[inside].mean()), "right": float(y[inside].mean()),
            })  # fmt: skip
    return rows


def expected_calibration_error(
    probabilities: Sequence[float], correct: Sequence[bool], *, bins: int = 10
) -> float:
    """The bins' gaps between mean probability and share right, weighted by their answers."""
    rows = reliability(probabilities, correct, bins=bins)
    total = sum(row["count"] for row in rows)
    if not total:
        raise ValueError("no answers to measure")
    return sum(row["count"] * abs(row["mean_probability"] - row["right"]) for row in rows) / total
