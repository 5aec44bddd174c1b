"""S2Net's loss on small hand-made tensors: its value, finite for a huge gamma, its gradient."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from models_app.siamese.losses import S2NetLoss
from tests.engine_losses.conftest import tensor


def test_s2net_is_softplus_of_the_scaled_cosine_gap():
    anchor = tensor([[1.0, 0.0], [1.0, 0.0]])
    positive = tensor([[2.0, 0.0], [-1.0, 0.0]])
    negative = tensor([[0.0, 3.0], [1.0, 1.0]])
    value = S2NetLoss(gamma=10.0)(anchor, positive, negative)
    # row 0: delta = 1 - 0; row 1: delta = -1 - 1/sqrt(2).
    expected = (math.log1p(math.exp(-10.0)) + math.log1p(math.exp(10.0 * (1 + 2**-0.5)))) / 2
    assert value.item() == pytest.approx(expected)


def test_s2net_stays_finite_for_a_huge_gamma():
    value = S2NetLoss(gamma=1e4)(tensor([[1.0, 0.0]]), tensor([[-1.0, 0.0]]), tensor([[1.0, 0.0]]))
    assert value.item() == pytest.approx(2e4)


def test_s2net_gradient_raises_the_positive_cosine():
    anchor = tensor([[1.0, 0.0]], grad=True)
    positive = tensor([[0.6, 0.8]])
    S2NetLoss()(anchor, positive, tensor([[0.8, 0.6]])).backward()
    with torch.no_grad():
        stepped = anchor - 0.1 * anchor.grad
    assert F.cosine_similarity(stepped, positive).item() > 0.6
