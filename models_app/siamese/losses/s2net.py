"""S2Net's pairwise logistic loss on the gap between two cosine scores (Yih et al.)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from models_app.siamese.configs import ConfigError
from models_app.siamese.losses.common import check_pairs, number_option


class S2NetLoss(nn.Module):
    """Yih et al. 2011, eq. 2: pairwise logistic loss on the gap between two cosine scores.

    ``delta = cos(anchor, positive) - cos(anchor, negative)``, ``loss = log(1 + exp(-gamma
    delta))``, computed as ``softplus(-gamma delta)`` so a large gamma cannot overflow. gamma
    stretches delta from [-2, 2]; the paper uses 10 and reports it matters little once large.
    """

    def __init__(self, gamma: float = 10.0) -> None:
        super().__init__()
        gamma = number_option("s2net", "gamma", gamma)
        if gamma <= 0.0:
            raise ConfigError(f"s2net: gamma must be positive, got {gamma}")
        self.gamma = gamma

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        check_pairs(anchor, positive, negative)
        delta = F.cosine_similarity(anchor, positive, dim=1, eps=1e-8) - F.cosine_similarity(
            anchor, negative, dim=1, eps=1e-8
        )  # (B,)
        return F.softplus(-self.gamma * delta).mean()

    def extra_repr(self) -> str:
        return f"gamma={self.gamma}"
