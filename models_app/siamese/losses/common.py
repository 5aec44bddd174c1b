"""What the losses share: checks of their options and inputs, the in-batch negative mask, pairwise
and row-wise distances, and a mean over the rows that count."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from models_app.siamese.configs import ConfigError

# Floor under squared distances before a square root: keeps the gradient finite (and zero) when
# two embeddings coincide, instead of the NaN that d/dx sqrt(x) gives at x = 0.
SQRT_FLOOR = 1e-12


# --- validation helpers -------------------------------------------------------------------------


def number_option(owner: str, name: str, value: Any) -> float:
    """A finite real number; bools are refused because JSON configs make ``true`` easy to typo."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{owner}: {name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ConfigError(f"{owner}: {name} must be finite, got {value!r}")
    return number


def positive_int(owner: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{owner}: {name} must be a positive integer, got {value!r}")
    return value


def choice_option(owner: str, name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{owner}: {name} must be one of {list(choices)}, got {value!r}")
    return value


def check_pairs(*tensors: Tensor) -> int:
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


def check_labels(labels: Tensor, like: Tensor) -> Tensor:
    """Labels (B,) as floats in [0, 1] on the embeddings' device and dtype; 1 means similar."""
    if labels.shape != like.shape[:1]:
        raise ValueError(f"labels must have shape ({like.shape[0]},), got {tuple(labels.shape)}")
    y = labels.to(device=like.device, dtype=like.dtype)  # (B,)
    if bool(((y < 0) | (y > 1)).any()):
        raise ValueError("labels must lie in [0, 1] (1 = similar, 0 = dissimilar)")
    return y


def negative_mask(batch: int, group_ids: Tensor | None, device: torch.device) -> Tensor:
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


def squared_distances(x: Tensor, y: Tensor) -> Tensor:
    """All pairwise ||x_i - y_j||^2 without materialising (B, B, D)."""
    x_sq = x.pow(2).sum(dim=1, keepdim=True)  # (B, 1)
    y_sq = y.pow(2).sum(dim=1, keepdim=True).T  # (1, B)
    return (x_sq + y_sq - 2.0 * x @ y.T).clamp_min(0.0)  # (B, B)


def euclidean_distance(x: Tensor, y: Tensor) -> Tensor:
    """Row-wise ||x_i - y_i||, with a zero (not NaN) gradient where the rows coincide."""
    return (x - y).pow(2).sum(dim=1).clamp_min(SQRT_FLOOR).sqrt()  # (B,)


def masked_mean(values: Tensor, keep: Tensor) -> Tensor:
    """Mean of ``values`` over ``keep``; a zero still attached to the graph when nothing is kept."""
    weights = keep.to(values.dtype)  # (B,)
    return (values * weights).sum() / weights.sum().clamp_min(1.0)
