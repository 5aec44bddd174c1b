"""The sparse optimizer: ``RowSparseAdam`` takes ``SparseAdam``'s steps on the rows a batch
reaches, and training uses it for the bucket table."""

from __future__ import annotations

import copy

import pytest
import torch

from models_app.siamese.encoders import encoder_class, parse_config
from models_app.siamese.optim import Optimizer, RowSparseAdam
from tests.engine_train.conftest import ENCODER, MEMBERS


def _sparse_steps(optimizer_class, table, batches, *, state=None, **options):
    """Runs ``optimizer_class`` over ``batches`` of bag ids on a copy of ``table``; returns the
    table and the optimizer's state dict."""
    bag = torch.nn.EmbeddingBag(*table.shape, mode="mean", sparse=True)
    with torch.no_grad():
        bag.weight.copy_(table)
    optimizer = optimizer_class(bag.parameters(), lr=0.01, **options)
    if state is not None:
        optimizer.load_state_dict(copy.deepcopy(state))  # loading shares the tensors it is given
    for ids, offsets in batches:
        optimizer.zero_grad(set_to_none=True)
        bag(ids, offsets).sin().sum().backward()
        optimizer.step()
    return bag.weight.detach().clone(), optimizer.state_dict()


def _bags(seed, steps, *, rows=2000, bag_size=6, bags=40):
    generator = torch.Generator().manual_seed(seed)
    offsets = torch.arange(0, bags * bag_size, bag_size)
    return [
        (torch.randint(0, rows, (bags * bag_size,), generator=generator), offsets)
        for _ in range(steps)
    ]


def test_row_sparse_adam_takes_sparse_adams_steps():
    table = torch.randn(2000, 8, generator=torch.Generator().manual_seed(0))
    batches = _bags(1, 40)  # 240 ids of 2,000 rows a step: a dozen rows drawn twice a batch
    ours, our_state = _sparse_steps(RowSparseAdam, table, batches)
    theirs, their_state = _sparse_steps(torch.optim.SparseAdam, table, batches)
    assert not torch.equal(ours, table)
    # Only the summing order of a row's duplicate gradients may differ.
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    for ours_state, theirs_state in zip(
        our_state["state"].values(), their_state["state"].values(), strict=True
    ):
        assert type(ours_state["step"]) is int
        assert ours_state["step"] == theirs_state["step"] == 40
        torch.testing.assert_close(ours_state["exp_avg"], theirs_state["exp_avg"])
        torch.testing.assert_close(ours_state["exp_avg_sq"], theirs_state["exp_avg_sq"])
    untouched = torch.ones(2000, dtype=torch.bool)
    untouched[torch.cat([ids for ids, _ in batches])] = False
    assert untouched.any()
    assert torch.equal(ours[untouched], table[untouched])  # rows no step touched stay as they were


def test_row_sparse_adam_is_bit_for_bit_sparse_adam_when_no_row_repeats_in_a_batch():
    table = torch.randn(500, 8, generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(2)
    batches = [
        (torch.randperm(500, generator=generator)[:60], torch.arange(0, 60, 3)) for _ in range(25)
    ]
    ours, _ = _sparse_steps(RowSparseAdam, table, batches)
    theirs, _ = _sparse_steps(torch.optim.SparseAdam, table, batches)
    assert torch.equal(ours, theirs)


def test_row_sparse_adam_resumes_from_a_sparse_adam_checkpoint():
    table = torch.randn(2000, 8, generator=torch.Generator().manual_seed(0))
    first, later = _bags(3, 10), _bags(4, 10)
    middle, their_state = _sparse_steps(torch.optim.SparseAdam, table, first)
    resumed, _ = _sparse_steps(RowSparseAdam, middle, later, state=their_state)
    straight, _ = _sparse_steps(torch.optim.SparseAdam, middle, later, state=their_state)
    torch.testing.assert_close(resumed, straight, rtol=1e-5, atol=1e-6)


def test_row_sparse_adam_maximizes_as_sparse_adam_does():
    table = torch.randn(2000, 8, generator=torch.Generator().manual_seed(0))
    batches = _bags(5, 10)
    ours, _ = _sparse_steps(RowSparseAdam, table, batches, maximize=True)
    theirs, _ = _sparse_steps(torch.optim.SparseAdam, table, batches, maximize=True)
    minimized, _ = _sparse_steps(RowSparseAdam, table, batches)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(ours, minimized)


def test_row_sparse_adam_updates_a_plain_embeddings_rows_as_sparse_adam_does():
    results = []
    for optimizer_class in (RowSparseAdam, torch.optim.SparseAdam):
        torch.manual_seed(0)
        embedding = torch.nn.Embedding(50, 4, sparse=True)
        optimizer = optimizer_class(embedding.parameters(), lr=0.05)
        for step in range(5):
            optimizer.zero_grad(set_to_none=True)
            embedding(torch.tensor([[1, 7, 7], [step, 30, 1]])).square().sum().backward()
            optimizer.step()
        results.append(embedding.weight.detach())
    torch.testing.assert_close(*results)


def test_a_step_without_rows_counts_but_changes_nothing():
    bag = torch.nn.EmbeddingBag(10, 4, mode="sum", sparse=True)
    before = bag.weight.detach().clone()
    optimizer = RowSparseAdam(bag.parameters(), lr=0.1)
    bag(torch.zeros(0, dtype=torch.long), torch.zeros(1, dtype=torch.long)).sum().backward()
    assert bag.weight.grad._nnz() == 0
    optimizer.step()
    assert torch.equal(bag.weight, before)
    assert optimizer.state[bag.weight]["step"] == 1  # as SparseAdam counts it


def test_row_sparse_adam_refuses_a_dense_gradient_before_changing_anything():
    bag = torch.nn.EmbeddingBag(10, 2, sparse=True)
    dense = torch.nn.Parameter(torch.zeros(3, 2))
    before = bag.weight.detach().clone()
    optimizer = RowSparseAdam([bag.weight, dense], lr=0.01)
    (bag(torch.tensor([1, 2]), torch.tensor([0])).sum() + dense.sum()).backward()
    with pytest.raises(RuntimeError, match="sparse gradients of whole rows"):
        optimizer.step()
    assert torch.equal(bag.weight, before)


def test_row_sparse_adam_refuses_a_gradient_sparse_in_every_dimension():
    weight = torch.nn.Parameter(torch.zeros(3, 2))
    optimizer = RowSparseAdam([weight], lr=0.01)
    weight.grad = torch.ones(3, 2).to_sparse()  # scalar values, two sparse dimensions
    with pytest.raises(RuntimeError, match="sparse gradients of whole rows"):
        optimizer.step()


def test_the_training_optimizer_uses_row_sparse_adam_for_the_bucket_table():
    encoder = encoder_class("ngram_bag").create([t for _, t in MEMBERS], parse_config(ENCODER))
    optimizer = Optimizer(encoder, torch.nn.Identity(), 0.01)
    sparse_optimizers = [o for o in optimizer.optimizers if isinstance(o, RowSparseAdam)]
    assert [p for o in sparse_optimizers for g in o.param_groups for p in g["params"]] == [
        encoder.bag.weight
    ]
    assert all(p is not encoder.bag.weight for p in optimizer.dense)
