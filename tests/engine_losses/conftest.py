"""What the loss tests share: hand-made tensors, and a batch of pairs at known cosines."""

from __future__ import annotations

import torch


def tensor(
    rows: list[list[float]], *, grad: bool = False, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    return torch.tensor(rows, dtype=dtype, requires_grad=grad)


# E = 0.6 for (1, 0) against (0.6, 0.8); E = 0.28 against (0.28, 0.96); E = -1 against (-1, 0).
A = [[1.0, 0.0]] * 4

B = [[0.6, 0.8], [1.8, 2.4], [0.28, 0.96], [-1.0, 0.0]]
