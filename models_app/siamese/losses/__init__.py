"""Losses: embeddings (and labels) in, a scalar to minimise out.

Each loss is a small ``nn.Module`` that never sees the encoder, so it can be tested on hand-made
tensors and swapped by name from a training config (``build_loss``). The papers behind them are
in ``shared/papers``; where the extracted text is ambiguous the choice is written down beside the
code that makes it.

``HybridLoss`` owns parameters (its MLP): a training loop must hand ``loss.parameters()`` to the
optimizer together with the encoder's.

One module a family (``contrastive``, ``in_batch``, ``s2net``) beside what they share
(``common``); the registry is here. Callers import from here.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from torch import nn

from models_app.siamese.configs import ConfigError
from models_app.siamese.losses.common import positive_int
from models_app.siamese.losses.contrastive import CosineContrastiveLoss, HybridLoss
from models_app.siamese.losses.in_batch import SDMLLoss, TripletLoss
from models_app.siamese.losses.s2net import S2NetLoss

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
    dim = positive_int(name, "dim", dim)
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


__all__ = [
    "LOSSES",
    "CosineContrastiveLoss",
    "HybridLoss",
    "S2NetLoss",
    "SDMLLoss",
    "TripletLoss",
    "build_loss",
]
