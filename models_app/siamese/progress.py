"""How long work reports how far it has come: every training, build, index and run stage calls a
``Progress`` with its stage's name, the fraction of it done and the seconds left when known."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str, float, float | None], None]


def no_progress(stage: str, fraction: float, eta: float | None = None) -> None:
    return None
