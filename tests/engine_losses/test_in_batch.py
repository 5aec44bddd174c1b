"""The in-batch losses on small hand-made tensors: SDML (against a reference, smoothing, margins,
group masking) and triplet (mining, distances, rows without a negative)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from models_app.siamese.losses import SDMLLoss, TripletLoss
from tests.engine_losses.conftest import A, B, tensor

# --- SDML -----------------------------------------------------------------------------------------


def numpy_sdml(
    a: np.ndarray,
    b: np.ndarray,
    usable: np.ndarray,
    eps: float,
    scale: float,
    margins: np.ndarray | None = None,
):
    """Reference SDML, one row at a time over that row's usable columns (diagonal included);
    ``margins`` are added to each row's own squared distance."""
    losses = []
    for i in range(len(a)):
        cols = np.flatnonzero(usable[i])
        if len(cols) < 2:
            continue
        distances = ((a[i] - b[cols]) ** 2).sum(axis=1)
        if margins is not None:
            distances[cols == i] += margins[i]
        logits = -scale * distances
        log_p = logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()
        target = np.full(len(cols), eps / len(cols))
        target[cols == i] += 1.0 - eps
        losses.append(float((target * (np.log(target) - log_p)).sum()))
    return float(np.mean(losses))


def test_sdml_without_smoothing_is_cross_entropy_over_negative_squared_distances():
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    b = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    logits = -2.0 * torch.cdist(a, b).pow(2)
    expected = F.cross_entropy(logits, torch.arange(5))
    assert SDMLLoss(smoothing=0.0, scale=2.0)(a, b).item() == pytest.approx(expected.item())


def test_sdml_smooths_like_the_paper_figure():
    # eps = 0.3, N = 3: 0.8 on the diagonal, 0.1 elsewhere (eq. 3 and Figure 1).
    targets = SDMLLoss(smoothing=0.3).targets(torch.ones(3, 3, dtype=torch.bool))
    np.testing.assert_allclose(targets.numpy(), [[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]])
    # A masked column gets no mass; the row's eps is spread over its two usable columns.
    usable = torch.tensor([[True, False, True], [True, True, True], [True, True, True]])
    row = SDMLLoss(smoothing=0.3).targets(usable)[0]
    np.testing.assert_allclose(row.numpy(), [0.85, 0.0, 0.15])


def test_sdml_is_the_kl_divergence_to_the_smoothed_targets():
    a = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    b = np.array([[0.1, 0.0], [1.0, 0.5], [0.5, 1.0]])
    value = SDMLLoss(smoothing=0.3, scale=1.5)(torch.tensor(a), torch.tensor(b))
    expected = numpy_sdml(a, b, np.ones((3, 3), dtype=bool), eps=0.3, scale=1.5)
    assert value.item() == pytest.approx(expected)


def test_sdml_with_a_positive_margin_is_the_loss_of_a_positive_that_much_farther():
    gen = torch.Generator().manual_seed(2)
    a = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    b = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    margins = torch.tensor([0.0, 0.3, 0.0, 0.1], dtype=torch.float64)
    value = SDMLLoss(smoothing=0.3, scale=2.0)(a, b, positive_margin=margins)
    usable = np.ones((4, 4), dtype=bool)
    expected = numpy_sdml(a.numpy(), b.numpy(), usable, eps=0.3, scale=2.0, margins=margins.numpy())
    assert value.item() == pytest.approx(expected)
    plain = SDMLLoss(smoothing=0.3, scale=2.0)(a, b)
    assert value.item() > plain.item()
    zero = SDMLLoss(smoothing=0.3, scale=2.0)(a, b, positive_margin=torch.zeros(4))
    assert zero.item() == pytest.approx(plain.item())


def test_sdml_keeps_pulling_a_row_that_is_ahead_by_less_than_its_margin():
    # Row 0's positive is ahead of its negative by a little: without a margin its pull is
    # weak; with one larger than the lead the pull grows.
    a = tensor([[1.0, 0.0], [0.0, 1.0]], grad=True)
    b = tensor([[0.95, 0.31], [0.8, 0.6]])
    pulls = []
    for margin in (0.0, 0.5):
        a.grad = None
        SDMLLoss(smoothing=0.0, scale=5.0)(
            a, b, positive_margin=torch.tensor([margin, 0.0])
        ).backward()
        pulls.append(a.grad[0].norm().item())
    assert pulls[1] > 2 * pulls[0]


def test_sdml_refuses_margins_of_the_wrong_shape():
    a, b = torch.zeros(3, 2), torch.ones(3, 2)
    with pytest.raises(ValueError, match="positive_margin must have shape"):
        SDMLLoss()(a, b, positive_margin=torch.zeros(2))


def test_sdml_leaves_same_group_columns_out_of_the_softmax_and_the_smoothing():
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    b = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    groups = torch.tensor([0, 0, 1, 2])
    usable = (groups[:, None] != groups[None, :]) | torch.eye(4, dtype=torch.bool)
    value = SDMLLoss(smoothing=0.3)(a, b, groups)
    expected = numpy_sdml(a.numpy(), b.numpy(), usable.numpy(), eps=0.3, scale=1.0)
    assert value.item() == pytest.approx(expected)


def test_moving_a_same_group_column_does_not_move_the_anchor_of_that_group():
    # a_0 appears only in row 0, so its gradient sees only the columns row 0 may use.
    gen = torch.Generator().manual_seed(2)
    a = torch.randn(3, 3, generator=gen, dtype=torch.float64)
    b = torch.randn(3, 3, generator=gen, dtype=torch.float64)
    groups = torch.tensor([7, 7, 8])
    loss = SDMLLoss(smoothing=0.3)

    def anchor_grad(columns: torch.Tensor) -> torch.Tensor:
        anchors = a.clone().requires_grad_(True)
        loss(anchors, columns, groups).backward()
        return anchors.grad[0]

    same_group_moved = b.clone()
    same_group_moved[1] += 5.0
    other_group_moved = b.clone()
    other_group_moved[2] += 5.0
    assert torch.allclose(anchor_grad(same_group_moved), anchor_grad(b))
    assert not torch.allclose(anchor_grad(other_group_moved), anchor_grad(b))


def test_sdml_pulls_a_positive_that_is_farther_than_the_negatives():
    a = tensor([[0.0, 0.0], [3.0, 0.0]])
    b = tensor([[2.0, 0.0], [1.5, 0.5]], grad=True)
    SDMLLoss(smoothing=0.3)(a, b).backward()
    with torch.no_grad():
        stepped = b - 0.05 * b.grad
    assert (stepped[0] - a[0]).norm() < (b[0] - a[0]).norm()


def test_sdml_smoothing_draws_a_far_negative_back_instead_of_pushing_it_to_infinity():
    # Row 0 gives its negative b_1 less than its 0.15 target, so the smoothing mass pulls b_1
    # in: random points settle on a sphere around the anchor. a_1 sits on b_1, so row 1 puts no
    # gradient on b_1 and only row 0 moves it.
    a = tensor([[0.0, 0.0], [0.0, 2.0]])
    b = tensor([[0.5, 0.0], [0.0, 2.0]], grad=True)
    SDMLLoss(smoothing=0.3)(a, b).backward()
    with torch.no_grad():
        stepped = b - 0.01 * b.grad
    assert (stepped[1] - a[0]).norm() < (b[1] - a[0]).norm()
    b.grad = None
    SDMLLoss(smoothing=0.0)(a, b).backward()
    with torch.no_grad():
        stepped = b - 0.01 * b.grad
    assert (stepped[1] - a[0]).norm() > (b[1] - a[0]).norm()


def test_sdml_with_no_negatives_returns_a_zero_that_still_backpropagates():
    # A batch of one (a short last batch) or of one group carries no signal; it must not crash.
    loss = SDMLLoss()
    single = tensor([[1.0, 2.0]], grad=True)
    value = loss(single, tensor([[0.0, 1.0]]))
    assert value.item() == 0.0
    value.backward()
    assert single.grad is not None
    assert torch.count_nonzero(single.grad) == 0
    same = loss(tensor([[1.0, 0.0], [0.0, 1.0]]), tensor([[1.0, 1.0], [2.0, 0.0]]), torch.zeros(2))
    assert same.item() == 0.0


def test_sdml_rejects_group_ids_of_the_wrong_length():
    with pytest.raises(ValueError, match="group_ids must have shape"):
        SDMLLoss()(tensor(A), tensor(B), torch.tensor([0, 1]))


# --- triplet --------------------------------------------------------------------------------------


ANCHORS = [[0.0, 0.0], [0.0, 3.0], [5.0, 5.0]]

POSITIVES = [[1.0, 0.0], [0.0, 4.0], [5.0, 7.0]]

# Distances from each anchor to the other rows' positives:
#   row 0: p1 4, p2 sqrt(74);  row 1: p0 sqrt(10), p2 sqrt(41);  row 2: p0 sqrt(41), p1 sqrt(26).


def test_hard_mining_picks_the_closest_valid_negative():
    loss = TripletLoss(mining="hard")
    a, p = tensor(ANCHORS), tensor(POSITIVES)
    everyone = ~torch.eye(3, dtype=torch.bool)
    assert loss.negative_indices(a, p, everyone).tolist() == [1, 0, 1]
    groups = torch.tensor([0, 0, 1])
    not_group = (groups[:, None] != groups[None, :]) & everyone
    assert loss.negative_indices(a, p, not_group).tolist() == [2, 2, 1]


def test_hard_triplet_loss_with_euclidean_distance():
    value = TripletLoss(margin=4.0, mining="hard")(tensor(ANCHORS), tensor(POSITIVES))
    expected = ((1 - 4 + 4) + (1 - math.sqrt(10) + 4) + (2 - math.sqrt(26) + 4)) / 3
    assert value.item() == pytest.approx(expected)


def test_hard_triplet_loss_with_squared_distance_and_a_satisfied_row():
    loss = TripletLoss(margin=20.0, distance="squared", mining="hard")
    value = loss(tensor(ANCHORS), tensor(POSITIVES))
    # row 0: 1 - 16 + 20 = 5; row 1: 1 - 10 + 20 = 11; row 2: 4 - 26 + 20 < 0, so 0.
    assert value.item() == pytest.approx(16 / 3)


def test_triplet_respects_groups_when_choosing_the_hard_negative():
    loss = TripletLoss(margin=80.0, distance="squared", mining="hard")
    value = loss(tensor(ANCHORS), tensor(POSITIVES), torch.tensor([0, 0, 1]))
    # row 0 must take p2 (74), row 1 must take p2 (41); row 2 takes p1 (26).
    assert value.item() == pytest.approx(((1 - 74 + 80) + (1 - 41 + 80) + (4 - 26 + 80)) / 3)


def test_random_mining_only_draws_valid_negatives_and_reaches_all_of_them():
    loss = TripletLoss()
    a = torch.zeros(6, 2)
    groups = torch.tensor([0, 0, 1, 1, 2, 2])
    valid = (groups[:, None] != groups[None, :]) & ~torch.eye(6, dtype=torch.bool)
    gen = torch.Generator().manual_seed(0)
    draws = torch.stack([loss.negative_indices(a, a, valid, gen) for _ in range(200)])  # (200, 6)
    for row in range(6):
        assert set(draws[:, row].tolist()) == set(valid[row].nonzero().flatten().tolist())


def test_random_mining_is_reproducible_with_a_seeded_generator():
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(8, 4, generator=gen)
    p = torch.randn(8, 4, generator=gen)
    loss = TripletLoss()
    first = loss(a, p, generator=torch.Generator().manual_seed(11))
    second = loss(a, p, generator=torch.Generator().manual_seed(11))
    assert first.item() == second.item()


def test_random_triplet_value_with_a_single_candidate_per_row():
    value = TripletLoss(margin=4.0)(tensor(ANCHORS[:2]), tensor(POSITIVES[:2]))
    assert value.item() == pytest.approx(((1 - 4 + 4) + (1 - math.sqrt(10) + 4)) / 2)


def test_triplet_skips_rows_without_a_valid_negative():
    a = tensor([[0.0, 0.0], [1.0, 1.0]], grad=True)
    value = TripletLoss()(a, tensor([[0.0, 0.0], [5.0, 5.0]]), torch.tensor([3, 3]))
    assert value.item() == 0.0
    value.backward()
    assert torch.count_nonzero(a.grad) == 0
    assert TripletLoss(mining="hard")(tensor([[1.0, 0.0]]), tensor([[1.0, 0.0]])).item() == 0.0


def test_triplet_gradient_is_finite_when_anchor_and_positive_coincide():
    a = tensor([[1.0, 1.0], [0.0, 0.0]], grad=True)
    TripletLoss(mining="hard")(a, tensor([[1.0, 1.0], [0.5, 0.0]])).backward()
    assert torch.isfinite(a.grad).all()
