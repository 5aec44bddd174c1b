"""The starter's residual: a small network over the standardized features whose score is added
to the linear one.

A linear score cannot say "a close member counts for less when the text has words the member
lacks", and on real vacancy titles such interactions are worth about a point of acc@1 (ESCO)
and two (O*NET) before any verdict (``bench/starter_ranker.py``). The network is fitted once,
on real labelled titles, beside the starter's linear weights; a taxonomy's own fits keep it
fixed and move only the linear weights and the calibration, so a few verdicts never have to
fit a network.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ResidualNet:
    """``score = relu(x · hidden_weightsᵀ + hidden_bias) · output_weights`` of standardized
    features ``x``. Several networks fitted from different seeds are stored as one, their hidden
    units side by side and the output averaged."""

    hidden_weights: np.ndarray  # (H, F)
    hidden_bias: np.ndarray  # (H,)
    output_weights: np.ndarray  # (H,)

    def scores(self, standardized: np.ndarray) -> np.ndarray:
        """(C,) each candidate's residual score, from its (C, F) standardized features."""
        hidden = standardized @ self.hidden_weights.T
        hidden += self.hidden_bias
        np.maximum(hidden, 0.0, out=hidden)
        return hidden @ self.output_weights

    def as_dict(self) -> dict:
        return {
            "hidden_weights": np.round(self.hidden_weights, 7).tolist(),
            "hidden_bias": np.round(self.hidden_bias, 7).tolist(),
            "output_weights": np.round(self.output_weights, 7).tolist(),
        }

    @classmethod
    def from_dict(cls, raw: object, features: int) -> ResidualNet:
        """Raises ``ValueError`` for anything but finite arrays of matching shapes over
        ``features`` inputs."""
        if not isinstance(raw, dict):
            raise ValueError("its residual must be an object")
        hidden_weights, hidden_bias, output_weights = (
            np.asarray(raw[key], dtype=np.float64)
            for key in ("hidden_weights", "hidden_bias", "output_weights")
        )
        units = hidden_bias.shape[0] if hidden_bias.ndim == 1 else -1
        if (
            units < 1
            or hidden_weights.shape != (units, features)
            or output_weights.shape != (units,)
        ):
            raise ValueError(f"its residual must have (H, {features}), (H,) and (H,) weights")
        if not all(np.isfinite(a).all() for a in (hidden_weights, hidden_bias, output_weights)):
            raise ValueError("its residual's weights must be finite")
        return cls(hidden_weights, hidden_bias, output_weights)


def padded_lists(features, offsets, width: int, dtype) -> tuple[np.ndarray, ...]:
    """Texts' candidate lists of different lengths as one array each, padded to the longest:
    (N, C, width) features, (N, C) offsets, and the (N, C) mask of real candidates."""
    widest = max(len(f) for f in features)
    padded = np.zeros((len(features), widest, width), dtype)
    added = np.zeros((len(features), widest), dtype)
    mask = np.zeros((len(features), widest), bool)
    for i, (rows, offset) in enumerate(zip(features, offsets, strict=True)):
        padded[i, : len(rows)] = rows
        added[i, : len(rows)] = offset
        mask[i, : len(rows)] = True
    return padded, added, mask


@dataclass(frozen=True)
class ResidualConfig:
    # Larger networks or longer fits (64 units, 30 epochs) won more on vacancy titles and lost
    # clean titles 1.8 points; this size costs them nothing measurable (bench/starter_ranker.py).
    hidden: int = 32  # units of each network
    networks: int = 8  # fitted from seeds seed..seed+networks-1 and averaged, for a stable fit
    epochs: int = 10
    batch: int = 256
    learning_rate: float = 3e-3
    weight_decay: float = 1e-4
    seed: int = 0


def fit_residual(
    features: Sequence[np.ndarray],
    linear_scores: Sequence[np.ndarray],
    targets: Sequence[int],
    config: ResidualConfig = ResidualConfig(),
) -> ResidualNet:
    """The residual that, added to each text's fixed ``linear_scores``, best ranks its right
    candidate (row ``targets[i]`` of ``features[i]``, standardized) first: listwise softmax
    cross-entropy by Adam, each network from its own seed."""
    import torch

    if not features or any(t < 0 or t >= len(f) for f, t in zip(features, targets, strict=True)):
        raise ValueError("every example needs its right candidate among its features")
    width = features[0].shape[1]
    padded, offsets, mask = padded_lists(features, linear_scores, width, np.float32)
    x, offset = torch.from_numpy(padded), torch.from_numpy(offsets)
    valid, y = torch.from_numpy(mask), torch.tensor(list(targets))
    parts = []
    for network in range(config.networks):
        generator = torch.Generator().manual_seed(config.seed + network)
        torch.manual_seed(config.seed + network)
        hidden = torch.nn.Linear(width, config.hidden)
        output = torch.nn.Linear(config.hidden, 1, bias=False)
        parameters = [*hidden.parameters(), *output.parameters()]
        optimiser = torch.optim.Adam(
            parameters, lr=config.learning_rate, weight_decay=config.weight_decay
        )
        for _ in range(config.epochs):
            order = torch.randperm(len(features), generator=generator)
            for start in range(0, len(features), config.batch):
                batch = order[start : start + config.batch]
                residual = output(torch.relu(hidden(x[batch]))).squeeze(-1)
                logits = (offset[batch] + residual).masked_fill(~valid[batch], -1e9)
                loss = torch.nn.functional.cross_entropy(logits, y[batch])
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
        parts.append(
            (
                hidden.weight.detach().double().numpy(),
                hidden.bias.detach().double().numpy(),
                output.weight.detach().double().numpy()[0] / config.networks,
            )
        )
    return ResidualNet(*(np.concatenate(arrays) for arrays in zip(*parts, strict=True)))
