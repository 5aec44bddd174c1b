"""The contrastive losses on small hand-made tensors: cosine contrastive (values, gradient
signs, bad labels) and hybrid (its two terms, its MLP)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from models_app.siamese.losses import CosineContrastiveLoss, HybridLoss
from tests.engine_losses.conftest import A, B, tensor

# --- cosine contrastive ---------------------------------------------------------------------------


def test_contrastive_matches_the_paper_terms_on_a_mixed_batch():
    loss = CosineContrastiveLoss(margin=0.5)
    value = loss(tensor(A), tensor(B), torch.tensor([1, 0, 0, 1]))
    # similar E=0.6: (1/4)(0.4)^2 = 0.04; dissimilar E=0.6 > 0.5: 0.36; dissimilar E=0.28: 0;
    # similar E=-1: (1/4)(2)^2 = 1.
    assert value.item() == pytest.approx((0.04 + 0.36 + 0.0 + 1.0) / 4)


def test_a_dissimilar_pair_below_the_margin_costs_nothing_and_one_above_costs_e_squared():
    # The paper prints "E^2 if E < m"; we read it as E > m (see the class docstring).
    loss = CosineContrastiveLoss(margin=0.5)
    below = loss(tensor([[1.0, 0.0]]), tensor([[0.28, 0.96]]), torch.tensor([False]))
    above = loss(tensor([[1.0, 0.0]]), tensor([[0.6, 0.8]]), torch.tensor([False]))
    assert below.item() == 0.0
    assert above.item() == pytest.approx(0.6**2)


def test_a_gradient_step_pushes_a_dissimilar_pair_above_the_margin_apart():
    loss = CosineContrastiveLoss(margin=0.5)
    a = tensor([[1.0, 0.0]], grad=True)
    b = tensor([[0.6, 0.8]])
    loss(a, b, torch.tensor([0.0])).backward()
    with torch.no_grad():
        stepped = a - 0.1 * a.grad
    assert F.cosine_similarity(stepped, b).item() < 0.6


def test_a_gradient_step_pulls_a_similar_pair_together():
    loss = CosineContrastiveLoss()
    a = tensor([[1.0, 0.0]], grad=True)
    b = tensor([[0.6, 0.8]])
    loss(a, b, torch.tensor([1.0])).backward()
    with torch.no_grad():
        stepped = a - 0.1 * a.grad
    assert F.cosine_similarity(stepped, b).item() > 0.6


def test_contrastive_rejects_labels_that_are_not_zero_or_one_and_mismatched_shapes():
    loss = CosineContrastiveLoss()
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        loss(tensor(A), tensor(B), torch.tensor([1, 0, 2, 1]))
    with pytest.raises(ValueError, match="labels must have shape"):
        loss(tensor(A), tensor(B), torch.tensor([1, 0]))
    with pytest.raises(ValueError, match="shapes differ"):
        loss(tensor(A), tensor(B[:3]), torch.tensor([1, 0, 0, 1]))


# --- hybrid ---------------------------------------------------------------------------------------


def test_hybrid_contrastive_part_is_the_papers_eq_3():
    a = tensor([[0.0, 0.0]] * 3, dtype=torch.float32)
    b = tensor([[3.0, 4.0], [0.3, 0.4], [3.0, 4.0]], dtype=torch.float32)
    labels = torch.tensor([1.0, 0.0, 0.0])
    loss = HybridLoss(dim=2, weight=0.0, margin=1.0)
    logistic_only = loss(a, b, labels)
    loss.weight = 2.0
    joint = loss(a, b, labels)
    # similar d = 5: 25; dissimilar d = 0.5 < margin: (1 - 0.5)^2; dissimilar d = 5: 0.
    assert ((joint - logistic_only) / 2.0).item() == pytest.approx((25 + 0.25 + 0) / 3)


def test_hybrid_logistic_part_is_binary_cross_entropy_of_the_match_probability():
    gen = torch.Generator().manual_seed(4)
    a = torch.randn(4, 3, generator=gen)
    b = torch.randn(4, 3, generator=gen)
    labels = torch.tensor([1.0, 0.0, 1.0, 0.0])
    loss = HybridLoss(dim=3, weight=0.0)
    p = loss.match_probability(a, b).detach().numpy()
    y = labels.numpy()
    expected = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
    assert loss(a, b, labels).item() == pytest.approx(float(expected), rel=1e-5)


def test_hybrid_mlp_reads_both_embeddings_and_their_distance():
    loss = HybridLoss(dim=5, hidden=7)
    assert loss.mlp[0].in_features == 2 * 5 + 1
    p = loss.match_probability(torch.randn(6, 5), torch.randn(6, 5))
    assert p.shape == (6,)
    assert ((p >= 0) & (p <= 1)).all()
    with pytest.raises(ValueError, match="built for dim 5"):
        loss.match_probability(torch.randn(2, 4), torch.randn(2, 4))


def test_hybrid_contrastive_gradient_pushes_a_close_dissimilar_pair_apart():
    loss = HybridLoss(dim=2, weight=1.0)
    for parameter in loss.parameters():
        parameter.requires_grad_(False)
        parameter.zero_()  # logit 0 everywhere: the logistic term has no gradient to give
    a = tensor([[0.0, 0.0]], grad=True, dtype=torch.float32)
    b = tensor([[0.3, 0.4]], dtype=torch.float32)
    loss(a, b, torch.tensor([0.0])).backward()
    with torch.no_grad():
        stepped = a - 0.1 * a.grad
    assert (stepped - b).norm() > 0.5
