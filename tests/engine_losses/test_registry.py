"""The loss registry builds every loss by name with its options checked; and on a toy problem
every loss learns."""

from __future__ import annotations

import pytest
import torch

from models_app.siamese.configs import ConfigError
from models_app.siamese.losses import LOSSES, HybridLoss, S2NetLoss, TripletLoss, build_loss


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_the_registry_builds_every_loss_with_its_defaults(name):
    assert isinstance(build_loss(name, {}, dim=8), LOSSES[name])


def test_the_registry_passes_options_and_the_encoder_dim_through():
    assert build_loss("sdml", {"smoothing": 0.1, "scale": 20}, dim=8).smoothing == 0.1
    hybrid = build_loss("hybrid", {"hidden": 16}, dim=12)
    assert hybrid.mlp[0].in_features == 25
    assert hybrid.mlp[0].out_features == 16


def test_an_unknown_loss_name_lists_the_valid_ones():
    with pytest.raises(ConfigError, match=r"contrastive.*hybrid.*s2net.*sdml.*triplet"):
        build_loss("arcface", {}, dim=8)


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("sdml", {"temperature": 0.05}, "unknown option.*temperature"),
        ("hybrid", {"dim": 4}, "unknown option.*dim"),
        ("triplet", {"margin": 1.0, "hard": True}, "unknown option.*hard"),
    ],
)
def test_unknown_options_are_refused(name, params, message):
    with pytest.raises(ConfigError, match=message):
        build_loss(name, params, dim=8)


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("contrastive", {"margin": -0.1}, r"margin must lie in \[0, 1\)"),
        ("contrastive", {"margin": 1.0}, r"margin must lie in \[0, 1\)"),
        ("contrastive", {"margin": "0.5"}, "must be a number"),
        ("contrastive", {"margin": True}, "must be a number"),
        ("sdml", {"smoothing": 1.0}, "smoothing"),
        ("sdml", {"smoothing": -0.1}, "smoothing"),
        ("sdml", {"scale": 0}, "scale must be positive"),
        ("sdml", {"scale": float("nan")}, "must be finite"),
        ("triplet", {"margin": -1}, "must not be negative"),
        ("triplet", {"distance": "cosine"}, "distance must be one of"),
        ("triplet", {"mining": "semi-hard"}, "mining must be one of"),
        ("hybrid", {"hidden": 0}, "positive integer"),
        ("hybrid", {"hidden": 2.5}, "positive integer"),
        ("hybrid", {"weight": -1}, "must not be negative"),
        ("hybrid", {"margin": 0}, "margin must be positive"),
        ("s2net", {"gamma": 0}, "gamma must be positive"),
        ("s2net", {"gamma": -10}, "gamma must be positive"),
        ("s2net", {"gamma": float("inf")}, "must be finite"),
    ],
)
def test_impossible_values_are_refused(name, params, message):
    with pytest.raises(ConfigError, match=message):
        build_loss(name, params, dim=8)


def test_the_registry_refuses_options_that_are_not_a_mapping_and_a_bad_dim():
    with pytest.raises(ConfigError, match="must be a mapping"):
        build_loss("sdml", [("smoothing", 0.1)], dim=8)
    with pytest.raises(ConfigError, match="dim must be a positive integer"):
        build_loss("hybrid", {}, dim=0)


def test_direct_construction_validates_too_and_config_errors_are_value_errors():
    with pytest.raises(ValueError, match="gamma"):
        S2NetLoss(gamma=0.0)
    with pytest.raises(ConfigError, match="dim"):
        HybridLoss(dim=-3)
    with pytest.raises(ConfigError, match="mining"):
        TripletLoss(mining="hardest")


# --- a toy problem: every loss learns ---------------------------------------------------------


def toy_batch(loss_name: str, encoder: torch.nn.Module, gen: torch.Generator):
    """Two overlapping clusters of 8-d points; a closure computes the loss through ``encoder``.

    The clusters overlap enough that no random initial encoder already solves the problem.
    """
    centers = torch.randn(2, 8, generator=gen) * 0.5
    cluster = torch.arange(16) % 2  # (16,)

    def sample(which: torch.Tensor) -> torch.Tensor:
        return centers[which] + torch.randn(len(which), 8, generator=gen)  # (16, 8)

    x_a, x_same, x_other = sample(cluster), sample(cluster), sample(1 - cluster)
    similar = torch.arange(16) < 8  # (16,)
    x_b = torch.where(similar[:, None], x_same, x_other)  # (16, 8)
    loss = build_loss(loss_name, {}, dim=4)

    def compute() -> torch.Tensor:
        if loss_name in ("contrastive", "hybrid"):
            return loss(encoder(x_a), encoder(x_b), similar)
        if loss_name == "sdml":
            return loss(encoder(x_a), encoder(x_same), cluster)
        if loss_name == "triplet":
            return loss(encoder(x_a), encoder(x_same), cluster, torch.Generator().manual_seed(0))
        return loss(encoder(x_a), encoder(x_same), encoder(x_other))

    return loss, compute


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_a_few_adam_steps_on_two_clusters_reduce_the_loss(name):
    with torch.random.fork_rng():
        torch.manual_seed(0)
        encoder = torch.nn.Linear(8, 4)
        loss, compute = toy_batch(name, encoder, torch.Generator().manual_seed(0))
        optimizer = torch.optim.Adam([*encoder.parameters(), *loss.parameters()], lr=0.05)
        before = compute().item()
        for _ in range(30):
            optimizer.zero_grad()
            compute().backward()
            optimizer.step()
        after = compute().item()
    assert after < 0.8 * before, (before, after)
