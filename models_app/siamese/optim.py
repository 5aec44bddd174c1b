"""The optimizer of the training loop: Adam for dense weights and a row-sparse Adam for the
n-gram table, whose gradient touches a few thousand of its rows per step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from models_app.siamese.networks.base import NeuralEncoder


class RowSparseAdam(torch.optim.SparseAdam):
    """SparseAdam's update, computed on the rows a step's gradient touches as dense tensors.

    torch's SparseAdam coalesces the gradient, then reads and writes the moment estimates
    through sparse tensors (two ``sparse_mask`` and three sparse additions), which on the
    n-gram table's gradient was close to half of a training step; summing the rows with
    ``index_add_`` and updating the gathered rows costs a fraction of that
    (docs/decisions/performance-choices.md). With a float learning rate the
    arithmetic is SparseAdam's, operation for operation; only the order in which a row's
    duplicate gradients are summed may differ. Same state (``step`` an int, ``exp_avg``,
    ``exp_avg_sq``), so either's state dict loads into the other: a checkpoint written before
    this class resumes with it.
    """

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            # Checked before any update, so a bad gradient leaves every parameter as it was.
            for param in group["params"]:
                grad = param.grad
                if grad is not None and not (grad.is_sparse and grad.sparse_dim() == 1):
                    raise RuntimeError(
                        "RowSparseAdam needs sparse gradients of whole rows (an embedding "
                        "table's); use Adam for dense ones"
                    )
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self.state[param]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(param)
                    state["exp_avg_sq"] = torch.zeros_like(param)
                state["step"] += 1  # as SparseAdam: counted even when no row was touched
                grad = -param.grad if group.get("maximize", False) else param.grad
                _row_adam_update(param, grad, state, group)
        return loss


def _row_adam_update(
    param: torch.Tensor, grad: torch.Tensor, state: dict[str, Any], group: dict[str, Any]
) -> None:
    """One Adam step on the rows of ``param`` that ``grad`` (sparse, a row per occurrence,
    repeats allowed) touches; ``state`` holds the moments, ``group`` the hyperparameters."""
    rows, position = torch.unique(grad._indices()[0], return_inverse=True)
    if rows.numel() == 0:
        return
    values = grad._values()  # (nnz, D), a row per occurrence
    summed = values.new_zeros((len(rows), *values.shape[1:])).index_add_(0, position, values)
    beta1, beta2 = group["betas"]
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    # old <- old + (1 - b) * (new - old), in SparseAdam's order of operations
    old_exp_avg = exp_avg.index_select(0, rows)
    exp_avg_update = summed.sub(old_exp_avg).mul_(1 - beta1)
    old_exp_avg_sq = exp_avg_sq.index_select(0, rows)
    exp_avg_sq_update = summed.pow_(2).sub_(old_exp_avg_sq).mul_(1 - beta2)
    numer = exp_avg_update.add_(old_exp_avg)
    new_exp_avg_sq = exp_avg_sq_update.add_(old_exp_avg_sq)
    exp_avg.index_copy_(0, rows, numer)
    exp_avg_sq.index_copy_(0, rows, new_exp_avg_sq)
    # Both were copied above, so they may be overwritten in place from here on.
    denom = new_exp_avg_sq.sqrt_().add_(group["eps"])
    step = state["step"]
    step_size = float(group["lr"]) * math.sqrt(1 - beta2**step) / (1 - beta1**step)
    param.index_add_(0, rows, numer.div_(denom).mul_(-step_size))


class Optimizer:
    """Adam for dense parameters, SparseAdam's update for embedding tables with sparse
    gradients (``RowSparseAdam``)."""

    def __init__(self, encoder: NeuralEncoder, loss: torch.nn.Module, lr: float) -> None:
        sparse = {
            id(p)
            for m in encoder.modules()
            if isinstance(m, torch.nn.Embedding | torch.nn.EmbeddingBag) and m.sparse
            for p in m.parameters()
        }
        params = list(encoder.parameters()) + list(loss.parameters())
        self.dense = [p for p in params if id(p) not in sparse]
        sparse_params = [p for p in params if id(p) in sparse]
        self.optimizers = [torch.optim.Adam(self.dense, lr=lr)]
        if sparse_params:
            self.optimizers.append(RowSparseAdam(sparse_params, lr=lr))

    def zero_grad(self, set_to_none: bool = True) -> None:
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        torch.nn.utils.clip_grad_norm_(self.dense, 5.0)  # clipping needs dense gradients
        for optimizer in self.optimizers:
            optimizer.step()

    def state_dict(self) -> list[dict]:
        return [optimizer.state_dict() for optimizer in self.optimizers]

    def load_state_dict(self, states: list[dict]) -> None:
        for optimizer, state in zip(self.optimizers, states, strict=True):
            optimizer.load_state_dict(state)
