"""Progress a bar can follow: encoding a taxonomy reports each chunk with the time left, and a
training's share done follows whichever budget (steps or minutes) ends it first."""

from __future__ import annotations

import time

import numpy as np

from models_app.siamese import progress as progress_module
from models_app.siamese.progress import budget_fraction, encode_reporting


class CountingEncoder:
    dim = 3

    def __init__(self) -> None:
        self.calls: list[int] = []

    def encode(self, texts):
        self.calls.append(len(texts))
        return np.array([[len(t), 1.0, 0.0] for t in texts], dtype=np.float32).reshape(-1, 3)


def test_encoding_reports_each_chunk_and_gives_the_vectors_of_one_call(monkeypatch):
    monkeypatch.setattr(progress_module, "ENCODE_CHUNK", 4)
    texts = [f"title {'x' * n}" for n in range(10)]
    reports = []
    encoder = CountingEncoder()
    vectors = encode_reporting(encoder, texts, lambda *a: reports.append(a), "encode")
    assert encoder.calls == [4, 4, 2]
    np.testing.assert_array_equal(vectors, CountingEncoder().encode(texts))
    assert [(stage, round(fraction, 2)) for stage, fraction, _ in reports] == [
        ("encode", 0.4),
        ("encode", 0.8),
        ("encode", 1.0),
    ]
    assert reports[-1][2] == 0.0 and all(eta >= 0 for _, _, eta in reports)


def test_the_share_done_follows_the_budget_that_ends_first():
    now = time.monotonic()
    # A run stopped by its minutes long before its steps: its bar follows the clock.
    assert round(budget_fraction(30, 1500, now - 20 * 60, 40.0), 2) == 0.5
    # A fast machine: the steps end it first.
    assert budget_fraction(750, 1500, now - 60, 40.0) == 0.5
    assert budget_fraction(1500, 1500, now, 40.0) == 1.0
    assert budget_fraction(10, 1500, now - 99 * 60, 40.0) == 1.0
