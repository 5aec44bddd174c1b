"""Losses over in-batch negatives: SDML's smoothed softmax and the triplet baseline (Bonadiman et
al.)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models_app.siamese.configs import ConfigError
from models_app.siamese.losses.common import (
    check_pairs,
    choice_option,
    euclidean_distance,
    masked_mean,
    negative_mask,
    number_option,
    squared_distances,
)


class SDMLLoss(nn.Module):
    """Bonadiman et al., Smoothed Deep Metric Learning: in-batch softmax with label smoothing.

    Row i of the batch is (a_i, b_i), a positive pair; every other b_j is a negative for a_i.
    ``logits_ij = -scale * ||a_i - b_j||^2`` (the paper has no scale, i.e. scale = 1). The target
    row follows the paper's eq. 3, ``p' = (1 - eps) p + eps / N``: the smoothing mass is spread
    over *all* N valid columns, the gold one included, so the diagonal gets ``1 - eps + eps / N``
    and each negative ``eps / N`` (Figure 1: 0.8 / 0.1 / 0.1 for eps = 0.3, N = 3). The loss is
    KL(target || softmax(logits)), averaged over rows; with eps = 0 it is plain cross-entropy.

    With ``group_ids``, columns j != i of row i's own group are not negatives (they are other
    paraphrases of the same group): they are removed from the softmax and receive no smoothing
    mass, so N counts only the valid columns of that row. A row left with no negative at all --
    including every row of a batch of one -- carries no signal and is left out of the mean; when
    no row has a negative the loss is a zero still attached to the graph, so a short last batch
    does not crash a training run.
    """

    def __init__(self, smoothing: float = 0.3, scale: float = 1.0) -> None:
        super().__init__()
        smoothing = number_option("sdml", "smoothing", smoothing)
        scale = number_option("sdml", "scale", scale)
        if not 0.0 <= smoothing < 1.0:
            raise ConfigError(f"sdml: smoothing must lie in [0, 1), got {smoothing}")
        if scale <= 0.0:
            raise ConfigError(f"sdml: scale must be positive, got {scale}")
        self.smoothing = smoothing
        self.scale = scale

    def targets(self, valid: Tensor, dtype: torch.dtype | None = None) -> Tensor:
        """The smoothed target rows for a (B, B) mask of usable columns (diagonal always usable)."""
        eye = torch.eye(valid.shape[0], dtype=torch.bool, device=valid.device)  # (B, B)
        usable = (valid | eye).to(dtype or torch.get_default_dtype())  # (B, B)
        per_column = self.smoothing / usable.sum(dim=1, keepdim=True)  # (B, 1)
        return usable * per_column + eye * (1.0 - self.smoothing)  # (B, B)

    def forward(
        self,
        a: Tensor,
        b: Tensor,
        group_ids: Tensor | None = None,
        positive_margin: Tensor | None = None,
    ) -> Tensor:
        """``positive_margin`` (B,), squared distance added to row i's own pair: the row's loss
        is as if its positive were that much farther, so it keeps pulling until the positive
        is nearer than the negatives by about the margin (an additive margin, as in CosFace)."""
        batch = check_pairs(a, b)
        negatives = negative_mask(batch, group_ids, a.device)  # (B, B)
        eye = torch.eye(batch, dtype=torch.bool, device=a.device)  # (B, B)
        usable = negatives | eye  # (B, B)
        distances = squared_distances(a, b)  # (B, B)
        if positive_margin is not None:
            if positive_margin.shape != (batch,):
                shape = tuple(positive_margin.shape)
                raise ValueError(f"positive_margin must have shape ({batch},), got {shape}")
            distances = distances + torch.diag(positive_margin.to(distances.dtype))
        logits = -self.scale * distances  # (B, B)
        logits = logits.masked_fill(~usable, float("-inf"))  # (B, B)
        # Masked columns are -inf, so their probability is exactly 0; zero their log-probabilities
        # so that 0 * -inf does not turn into NaN in the sum below.
        log_probs = torch.log_softmax(logits, dim=1).masked_fill(~usable, 0.0)  # (B, B)
        target = self.targets(usable, log_probs.dtype)  # (B, B)
        kl = (torch.xlogy(target, target) - target * log_probs).sum(dim=1)  # (B,)
        return masked_mean(kl, negatives.any(dim=1))

    def extra_repr(self) -> str:
        return f"smoothing={self.smoothing}, scale={self.scale}"


class TripletLoss(nn.Module):
    """The triplet baseline of Bonadiman et al. (eq. 1), with in-batch negatives.

    The negatives for anchor i are the positives of the other rows (excluding rows of the same
    group when ``group_ids`` is given). ``mining="random"`` draws one valid negative uniformly
    (pass a ``torch.Generator`` for reproducible draws); ``"hard"`` takes the closest valid one.
    ``distance="squared"`` is eq. 1 as printed (SSD, FaceNet's choice, better in the paper's
    Tables 3-6); ``"euclidean"`` is the unsquared distance of PyTorch's ``TripletMarginLoss``
    (EUC). Rows without any valid negative are left out of the mean; the paper sums over the
    batch, we average so the scale does not depend on the batch size.
    """

    DISTANCES = ("euclidean", "squared")
    MININGS = ("random", "hard")

    def __init__(
        self, margin: float = 1.0, distance: str = "euclidean", mining: str = "random"
    ) -> None:
        super().__init__()
        margin = number_option("triplet", "margin", margin)
        if margin < 0.0:
            raise ConfigError(f"triplet: margin must not be negative, got {margin}")
        self.margin = margin
        self.distance = choice_option("triplet", "distance", distance, self.DISTANCES)
        self.mining = choice_option("triplet", "mining", mining, self.MININGS)

    def _distance(self, x: Tensor, y: Tensor) -> Tensor:
        if self.distance == "squared":
            return (x - y).pow(2).sum(dim=1)  # (B,)
        return euclidean_distance(x, y)  # (B,)

    def negative_indices(
        self,
        anchor: Tensor,
        positive: Tensor,
        negatives: Tensor,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """For each row, the column of ``positive`` used as its negative (arbitrary if none)."""
        with torch.no_grad():
            if self.mining == "hard":
                # Squared or not, the closest column is the same one.
                distances = squared_distances(anchor, positive)  # (B, B)
                return distances.masked_fill(~negatives, float("inf")).argmin(dim=1)  # (B,)
            device = generator.device if generator is not None else anchor.device
            scores = torch.rand(negatives.shape, generator=generator, device=device)  # (B, B)
            scores = scores.to(anchor.device).masked_fill(~negatives, -1.0)  # (B, B)
            return scores.argmax(dim=1)  # (B,)

    def forward(
        self,
        anchor: Tensor,
        positive: Tensor,
        group_ids: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        batch = check_pairs(anchor, positive)
        negatives = negative_mask(batch, group_ids, anchor.device)  # (B, B)
        chosen = self.negative_indices(anchor, positive, negatives, generator)  # (B,)
        d_pos = self._distance(anchor, positive)  # (B,)
        d_neg = self._distance(anchor, positive[chosen])  # (B,)
        losses = F.relu(d_pos - d_neg + self.margin)  # (B,)
        return masked_mean(losses, negatives.any(dim=1))

    def extra_repr(self) -> str:
        return f"margin={self.margin}, distance={self.distance!r}, mining={self.mining!r}"
