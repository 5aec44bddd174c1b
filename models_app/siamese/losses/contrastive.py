"""Contrastive losses on labelled pairs: on the cosine similarity (Neculoiu et al.), and on the
euclidean distance with a logistic MLP beside it (Nicosia & Moschitti's hybrid)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models_app.siamese.configs import ConfigError
from models_app.siamese.losses.common import (
    SQRT_FLOOR,
    check_labels,
    check_pairs,
    euclidean_distance,
    number_option,
    positive_int,
)


class CosineContrastiveLoss(nn.Module):
    """Neculoiu et al. 2016, eqs. 7-13: contrastive loss on the cosine similarity E of a pair.

    Similar pairs pay ``1/4 (1 - E)^2``; dissimilar pairs pay ``E^2`` when ``E > margin``, else 0.

    The paper prints the dissimilar case as "E^2 if E < m, 0 otherwise". Read literally, that
    penalises only pairs that are *already* far apart and lets any pair more similar than m go
    free, so it cannot teach dissimilarity; its Figure 2 and the usual contrastive hinge (push
    apart what is still too close) both say the inequality is flipped. We treat it as a typo and
    use ``E > m``. The margin must lie in [0, 1): below 0 the E^2 gradient would pull a pair with
    negative E back up towards 0, and at 1 or above no pair could ever exceed it.
    """

    def __init__(self, margin: float = 0.5) -> None:
        super().__init__()
        margin = number_option("contrastive", "margin", margin)
        if not 0.0 <= margin < 1.0:
            raise ConfigError(f"contrastive: margin must lie in [0, 1), got {margin}")
        self.margin = margin

    def forward(self, a: Tensor, b: Tensor, labels: Tensor) -> Tensor:
        check_pairs(a, b)
        y = check_labels(labels, a)  # (B,)
        energy = F.cosine_similarity(a, b, dim=1, eps=1e-8)  # (B,)
        similar = 0.25 * (1.0 - energy).pow(2)  # (B,)
        too_close = (energy > self.margin).to(energy.dtype)  # (B,)
        dissimilar = energy.pow(2) * too_close  # (B,)
        return (y * similar + (1.0 - y) * dissimilar).mean()

    def extra_repr(self) -> str:
        return f"margin={self.margin}"


class HybridLoss(nn.Module):
    """Nicosia & Moschitti 2017: contrastive loss on the euclidean distance + a logistic MLP.

    The MLP reads ``[f(a); f(b); d(a, b)]`` where d is the scalar euclidean distance of eq. 1
    (the paper feeds exactly this; no |a - b| features), through two hidden layers as in the
    paper (200 units there; ``hidden`` here, ReLU, since the paper names no activation), and
    outputs one match logit. The loss is eq. 5, ``weight * L_c + L_l``, with eq. 3 as printed:
    ``y d^2 + (1 - y) max(0, margin - d)^2`` (no 1/2 factor in the paper), and L_l the binary
    cross-entropy of the logit. Both terms are batch means, where the paper sums. The paper
    tuned weight (lambda_c) to 1.0 for paraphrases and 0.01 for entailment; the default here is
    0.5. The input order matters to the MLP: score (query, candidate), not the reverse.
    """

    def __init__(
        self, dim: int, hidden: int = 128, weight: float = 0.5, margin: float = 1.0
    ) -> None:
        super().__init__()
        self.dim = positive_int("hybrid", "dim", dim)
        hidden = positive_int("hybrid", "hidden", hidden)
        weight = number_option("hybrid", "weight", weight)
        margin = number_option("hybrid", "margin", margin)
        if weight < 0.0:
            raise ConfigError(f"hybrid: weight must not be negative, got {weight}")
        if margin <= 0.0:
            raise ConfigError(f"hybrid: margin must be positive, got {margin}")
        self.weight = weight
        self.margin = margin
        self.mlp = nn.Sequential(
            nn.Linear(2 * self.dim + 1, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 1),
        )

    def _logits(self, a: Tensor, b: Tensor, distance: Tensor) -> Tensor:
        if a.shape[1] != self.dim:
            raise ValueError(f"hybrid loss was built for dim {self.dim}, got {a.shape[1]}")
        features = torch.cat([a, b, distance[:, None]], dim=1)  # (B, 2D + 1)
        return self.mlp(features).squeeze(1)  # (B,)

    def match_logits(self, a: Tensor, b: Tensor) -> Tensor:
        """The MLP's raw match score for each pair."""
        check_pairs(a, b)
        return self._logits(a, b, euclidean_distance(a, b))  # (B,)

    def match_probability(self, a: Tensor, b: Tensor) -> Tensor:
        """Calibrated-ish P(match) in [0, 1] for each pair, for re-scoring retrieved candidates."""
        return torch.sigmoid(self.match_logits(a, b))  # (B,)

    def forward(self, a: Tensor, b: Tensor, labels: Tensor) -> Tensor:
        check_pairs(a, b)
        y = check_labels(labels, a)  # (B,)
        squared = (a - b).pow(2).sum(dim=1)  # (B,)
        distance = squared.clamp_min(SQRT_FLOOR).sqrt()  # (B,)
        # d^2 directly for similar pairs: exact, and no square root to differentiate.
        contrastive = y * squared + (1.0 - y) * F.relu(self.margin - distance).pow(2)  # (B,)
        logistic = F.binary_cross_entropy_with_logits(self._logits(a, b, distance), y)
        return self.weight * contrastive.mean() + logistic

    def extra_repr(self) -> str:
        return f"dim={self.dim}, weight={self.weight}, margin={self.margin}"
