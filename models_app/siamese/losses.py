"""Losses: embeddings (and labels) in, a scalar to minimise out.

Each loss is a small ``nn.Module`` that never sees the encoder, so it can be tested on hand-made
tensors and swapped by name from a training config (``build_loss``). The papers behind them are
in ``shared/papers``; where the extracted text is ambiguous the choice is written down beside the
code that makes it.

``HybridLoss`` owns parameters (its MLP): a training loop must hand ``loss.parameters()`` to the
optimizer together with the encoder's.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models_app.siamese.encoders import ConfigError

# Floor under squared distances before a square root: keeps the gradient finite (and zero) when
# two embeddings coincide, instead of the NaN that d/dx sqrt(x) gives at x = 0.
_SQRT_FLOOR = 1e-12


# --- validation helpers -------------------------------------------------------------------------


def _number(owner: str, name: str, value: Any) -> float:
    """A finite real number; bools are refused because JSON configs make ``true`` easy to typo."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{owner}: {name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ConfigError(f"{owner}: {name} must be finite, got {value!r}")
    return number


def _positive_int(owner: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{owner}: {name} must be a positive integer, got {value!r}")
    return value


def _choice(owner: str, name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{owner}: {name} must be one of {list(choices)}, got {value!r}")
    return value


def _check_pairs(*tensors: Tensor) -> int:
    """All inputs are (B, D) with the same shape and B >= 1; returns B."""
    first = tensors[0]
    if first.dim() != 2:
        raise ValueError(f"embeddings must be 2-D (B, D), got shape {tuple(first.shape)}")
    for other in tensors[1:]:
        if other.shape != first.shape:
            raise ValueError(
                f"embedding shapes differ: {tuple(first.shape)} vs {tuple(other.shape)}"
            )
    if first.shape[0] == 0:
        raise ValueError("empty batch")
    return first.shape[0]


def _check_labels(labels: Tensor, like: Tensor) -> Tensor:
    """Labels (B,) as floats in [0, 1] on the embeddings' device and dtype; 1 means similar."""
    if labels.shape != like.shape[:1]:
        raise ValueError(f"labels must have shape ({like.shape[0]},), got {tuple(labels.shape)}")
    y = labels.to(device=like.device, dtype=like.dtype)  # (B,)
    if bool(((y < 0) | (y > 1)).any()):
        raise ValueError("labels must lie in [0, 1] (1 = similar, 0 = dissimilar)")
    return y


def _negative_mask(batch: int, group_ids: Tensor | None, device: torch.device) -> Tensor:
    """(B, B) bool: True where column j may serve as an in-batch negative for row i.

    Never the diagonal (that is row i's own positive), and never a column of row i's group.
    """
    eye = torch.eye(batch, dtype=torch.bool, device=device)  # (B, B)
    if group_ids is None:
        return ~eye
    if group_ids.shape != (batch,):
        raise ValueError(f"group_ids must have shape ({batch},), got {tuple(group_ids.shape)}")
    groups = group_ids.to(device)  # (B,)
    same_group = groups[:, None] == groups[None, :]  # (B, B)
    return ~(same_group | eye)


def _squared_distances(x: Tensor, y: Tensor) -> Tensor:
    """All pairwise ||x_i - y_j||^2 without materialising (B, B, D)."""
    x_sq = x.pow(2).sum(dim=1, keepdim=True)  # (B, 1)
    y_sq = y.pow(2).sum(dim=1, keepdim=True).T  # (1, B)
    return (x_sq + y_sq - 2.0 * x @ y.T).clamp_min(0.0)  # (B, B)


def _euclidean(x: Tensor, y: Tensor) -> Tensor:
    """Row-wise ||x_i - y_i||, with a zero (not NaN) gradient where the rows coincide."""
    return (x - y).pow(2).sum(dim=1).clamp_min(_SQRT_FLOOR).sqrt()  # (B,)


def _masked_mean(values: Tensor, keep: Tensor) -> Tensor:
    """Mean of ``values`` over ``keep``; a zero still attached to the graph when nothing is kept."""
    weights = keep.to(values.dtype)  # (B,)
    return (values * weights).sum() / weights.sum().clamp_min(1.0)


# --- the losses -----------------------------------------------------------------------------------


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
        margin = _number("contrastive", "margin", margin)
        if not 0.0 <= margin < 1.0:
            raise ConfigError(f"contrastive: margin must lie in [0, 1), got {margin}")
        self.margin = margin

    def forward(self, a: Tensor, b: Tensor, labels: Tensor) -> Tensor:
        _check_pairs(a, b)
        y = _check_labels(labels, a)  # (B,)
        energy = F.cosine_similarity(a, b, dim=1, eps=1e-8)  # (B,)
        similar = 0.25 * (1.0 - energy).pow(2)  # (B,)
        too_close = (energy > self.margin).to(energy.dtype)  # (B,)
        dissimilar = energy.pow(2) * too_close  # (B,)
        return (y * similar + (1.0 - y) * dissimilar).mean()

    def extra_repr(self) -> str:
        return f"margin={self.margin}"


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
        smoothing = _number("sdml", "smoothing", smoothing)
        scale = _number("sdml", "scale", scale)
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
        batch = _check_pairs(a, b)
        negatives = _negative_mask(batch, group_ids, a.device)  # (B, B)
        eye = torch.eye(batch, dtype=torch.bool, device=a.device)  # (B, B)
        usable = negatives | eye  # (B, B)
        distances = _squared_distances(a, b)  # (B, B)
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
        return _masked_mean(kl, negatives.any(dim=1))

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
        margin = _number("triplet", "margin", margin)
        if margin < 0.0:
            raise ConfigError(f"triplet: margin must not be negative, got {margin}")
        self.margin = margin
        self.distance = _choice("triplet", "distance", distance, self.DISTANCES)
        self.mining = _choice("triplet", "mining", mining, self.MININGS)

    def _distance(self, x: Tensor, y: Tensor) -> Tensor:
        if self.distance == "squared":
            return (x - y).pow(2).sum(dim=1)  # (B,)
        return _euclidean(x, y)  # (B,)

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
                distances = _squared_distances(anchor, positive)  # (B, B)
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
        batch = _check_pairs(anchor, positive)
        negatives = _negative_mask(batch, group_ids, anchor.device)  # (B, B)
        chosen = self.negative_indices(anchor, positive, negatives, generator)  # (B,)
        d_pos = self._distance(anchor, positive)  # (B,)
        d_neg = self._distance(anchor, positive[chosen])  # (B,)
        losses = F.relu(d_pos - d_neg + self.margin)  # (B,)
        return _masked_mean(losses, negatives.any(dim=1))

    def extra_repr(self) -> str:
        return f"margin={self.margin}, distance={self.distance!r}, mining={self.mining!r}"


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
        self.dim = _positive_int("hybrid", "dim", dim)
        hidden = _positive_int("hybrid", "hidden", hidden)
        weight = _number("hybrid", "weight", weight)
        margin = _number("hybrid", "margin", margin)
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
        _check_pairs(a, b)
        return self._logits(a, b, _euclidean(a, b))  # (B,)

    def match_probability(self, a: Tensor, b: Tensor) -> Tensor:
        """Calibrated-ish P(match) in [0, 1] for each pair, for re-scoring retrieved candidates."""
        return torch.sigmoid(self.match_logits(a, b))  # (B,)

    def forward(self, a: Tensor, b: Tensor, labels: Tensor) -> Tensor:
        _check_pairs(a, b)
        y = _check_labels(labels, a)  # (B,)
        squared = (a - b).pow(2).sum(dim=1)  # (B,)
        distance = squared.clamp_min(_SQRT_FLOOR).sqrt()  # (B,)
        # d^2 directly for similar pairs: exact, and no square root to differentiate.
        contrastive = y * squared + (1.0 - y) * F.relu(self.margin - distance).pow(2)  # (B,)
        logistic = F.binary_cross_entropy_with_logits(self._logits(a, b, distance), y)
        return self.weight * contrastive.mean() + logistic

    def extra_repr(self) -> str:
        return f"dim={self.dim}, weight={self.weight}, margin={self.margin}"


class S2NetLoss(nn.Module):
    """Yih et al. 2011, eq. 2: pairwise logistic loss on the gap between two cosine scores.

    ``delta = cos(anchor, positive) - cos(anchor, negative)``, ``loss = log(1 + exp(-gamma
    delta))``, computed as ``softplus(-gamma delta)`` so a large gamma cannot overflow. gamma
    stretches delta from [-2, 2]; the paper uses 10 and reports it matters little once large.
    """

    def __init__(self, gamma: float = 10.0) -> None:
        super().__init__()
        gamma = _number("s2net", "gamma", gamma)
        if gamma <= 0.0:
            raise ConfigError(f"s2net: gamma must be positive, got {gamma}")
        self.gamma = gamma

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        _check_pairs(anchor, positive, negative)
        delta = F.cosine_similarity(anchor, positive, dim=1, eps=1e-8) - F.cosine_similarity(
            anchor, negative, dim=1, eps=1e-8
        )  # (B,)
        return F.softplus(-self.gamma * delta).mean()

    def extra_repr(self) -> str:
        return f"gamma={self.gamma}"


# --- registry -------------------------------------------------------------------------------------

LOSSES: dict[str, type[nn.Module]] = {
    "contrastive": CosineContrastiveLoss,
    "sdml": SDMLLoss,
    "triplet": TripletLoss,
    "hybrid": HybridLoss,
    "s2net": S2NetLoss,
}


def build_loss(name: str, params: Mapping[str, Any], *, dim: int) -> nn.Module:
    """The loss a training config names, with its options checked; ``dim`` is the encoder's.

    Raises ``ConfigError`` for an unknown name, an unknown option, or an impossible value, so a
    bad config fails before any training starts.
    """
    if not isinstance(name, str) or name not in LOSSES:
        raise ConfigError(f"unknown loss {name!r}; choose one of {sorted(LOSSES)}")
    if not isinstance(params, Mapping):
        raise ConfigError(f"{name}: options must be a mapping, got {type(params).__name__}")
    dim = _positive_int(name, "dim", dim)
    loss_class = LOSSES[name]
    accepted = [p for p in inspect.signature(loss_class.__init__).parameters if p != "self"]
    needs_dim = "dim" in accepted
    options = [p for p in accepted if p != "dim"]
    unknown = sorted(str(key) for key in params if key not in options)
    if unknown:
        raise ConfigError(
            f"unknown option(s) for loss {name}: {', '.join(unknown)}; valid options: {options}"
        )
    if needs_dim:
        return loss_class(dim=dim, **params)
    return loss_class(**params)
