"""A match probability a curator can act on: P(the top group is right | its score, its margin).

Raw scores are cosines: a junk answer at 0.52 and a good one at 0.96 differ, but neither says
how often such an answer is right, and ties at the top are common. A logistic regression on two
features of an answer, the top group's score and its margin over the runner-up, fitted on
answers whose right group is known (curators' verdicts), turns them into a probability whose
"accept everything above p" can be checked: of the answers given p, about p are right. The
expected calibration error (ECE) measures how far from that it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from models_app.siamese.encoders import ConfigError

# Answers below this probability are flagged for a closer look.
LOW_CONFIDENCE = 0.5
MIN_ANSWERS = 10  # fewer cannot say much of either outcome


def _features(scores: Sequence[float], margins: Sequence[float]) -> np.ndarray:
    return np.column_stack(
        [np.asarray(scores, float), np.asarray(margins, float), np.ones(len(scores))]
    )


@dataclass(frozen=True)
class Calibrator:
    """``probability = sigmoid(a * score + b * margin + c)``."""

    score_weight: float
    margin_weight: float
    bias: float
    fitted_on: int = 0  # answers it was fitted on

    @classmethod
    def fit(
        cls,
        scores: Sequence[float],
        margins: Sequence[float],
        correct: Sequence[bool],
        *,
        l2: float = 1e-3,
        iterations: int = 50,
    ) -> Calibrator:
        """Maximum likelihood by Newton's method (a small ridge keeps it finite when the two
        classes separate); needs right and wrong answers both."""
        y = np.asarray(correct, float)
        if not (len(scores) == len(margins) == len(y)):
            raise ConfigError("scores, margins and outcomes must be as many")
        if len(y) < MIN_ANSWERS or y.min() == y.max():
            raise ConfigError(
                f"calibration needs at least {MIN_ANSWERS} answers, right and wrong ones both"
            )
        x = _features(scores, margins)
        w = np.zeros(3)
        for _ in range(iterations):
            p = 1 / (1 + np.exp(-(x @ w)))
            gradient = x.T @ (p - y) + l2 * w
            hessian = (x * (p * (1 - p))[:, None]).T @ x + l2 * np.eye(3)
            step = np.linalg.solve(hessian, gradient)
            w -= step
            if np.abs(step).max() < 1e-8:
                break
        return cls(float(w[0]), float(w[1]), float(w[2]), fitted_on=len(y))

    def probabilities(self, scores: Sequence[float], margins: Sequence[float]) -> np.ndarray:
        z = _features(scores, margins) @ np.array(
            [self.score_weight, self.margin_weight, self.bias]
        )
        return 1 / (1 + np.exp(-z))

    def probability(self, score: float, margin: float) -> float:
        z = self.score_weight * score + self.margin_weight * margin + self.bias
        return 1 / (1 + math.exp(-max(min(z, 50.0), -50.0)))

    def as_dict(self) -> dict[str, float]:
        return {
            "score_weight": self.score_weight,
            "margin_weight": self.margin_weight,
            "bias": self.bias,
            "fitted_on": self.fitted_on,
        }

    @classmethod
    def from_dict(cls, raw: dict) -> Calibrator:
        try:
            return cls(
                float(raw["score_weight"]),
                float(raw["margin_weight"]),
                float(raw["bias"]),
                int(raw.get("fitted_on", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"a stored calibration is unusable: {exc}") from None


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
